"""The live log of a running agent step: its rendered output, for the card page to show.

    <run dir>/live/<session>.log     the lines the engine printed for that agent session

While an agent step runs, every line the launcher passes on (the agent's rendered output and
the launcher's own notes) is also appended here, line-buffered, so a status page polling the
run-state sees the output as it comes. The file is bounded: past `LIMIT_BYTES` one `TRUNCATED`
line ends it and nothing more is written. The values of the step's credentials (`hide`: the
environment's tokens and model keys) are replaced by `***` in every line, since a card page is
shown to everyone who can read the repository. Writing is best effort: a full disk or a
vanished directory stops the log, never the step.

A run directory keeps one live log: a new session removes the earlier sessions' logs when it
opens its own, so the last step's output stays readable after it ended (for a batch, or a
headless change) and the directory never grows with the number of steps. Only the journal and
the parks are run-state that travels; these files stay on the machine that ran the step.
"""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["LIMIT_BYTES", "REDACTED", "TRUNCATED", "LiveLog", "live_dir", "read_tail"]

LIMIT_BYTES = 256 * 1024
TRUNCATED = "… output truncated"
REDACTED = "***"
_SESSION = re.compile(r"[A-Za-z0-9._-]+")  # a session id names a file in live/, nothing else
# Room kept for the truncation line itself, so the file never passes the limit.
_RESERVE = len((TRUNCATED + "\n").encode())


def live_dir(run_dir: Path) -> Path:
    """`<run dir>/live/`: where the live logs of a run directory's sessions go."""
    return run_dir / "live"


class LiveLog:
    """An append-only, bounded, best-effort log of one session's output lines.

    `line(text)` is an engine line sink. `open()` may be skipped: the first line opens the file.
    """

    def __init__(
        self,
        run_dir: Path,
        session: str,
        *,
        limit: int = LIMIT_BYTES,
        hide: Sequence[str] = (),
    ) -> None:
        if limit <= _RESERVE:
            raise ValueError(f"a live log limit must exceed {_RESERVE} bytes, got {limit}")
        self.path = live_dir(run_dir) / f"{session}.log"
        self._limit = limit
        # Replaced by `***` in every line: longest first, so a value containing another goes whole.
        self._hide = tuple(sorted({h for h in hide if h}, key=len, reverse=True))
        self._written = 0
        self._stream: TextIO | None = None
        self._stopped = False

    def open(self) -> None:
        """Create the file (empty) and remove the run directory's other live logs."""
        if self._stream is not None or self._stopped:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for old in self.path.parent.glob("*.log"):
                if old != self.path:
                    with contextlib.suppress(OSError):  # an old log that stays does no harm
                        old.unlink(missing_ok=True)
            # Line-buffered: each line reaches the file as it is written, for a reader polling it.
            self._stream = self.path.open("a", encoding="utf-8", errors="replace", buffering=1)
        except OSError:
            self._stop()

    def line(self, text: str) -> None:
        """Append one line (a trailing newline is added); past the limit, say so once and stop."""
        if self._stream is None:
            self.open()
        if self._stream is None:
            return
        for secret in self._hide:
            text = text.replace(secret, REDACTED)
        data = text.rstrip("\r\n") + "\n"
        size = len(data.encode("utf-8", errors="replace"))
        try:
            if self._written + size > self._limit - _RESERVE:
                self._stream.write(TRUNCATED + "\n")
                self._stop()
                return
            self._stream.write(data)
            self._written += size
        except OSError:
            self._stop()

    def close(self) -> None:
        """Stop writing; the file stays for the pages to show."""
        self._stop()

    def _stop(self) -> None:
        self._stopped = True
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def read_tail(
    run_dir: Path, lines: int = 200, sessions: Collection[str] | None = None
) -> dict[str, tuple[str, ...]]:
    """The last `lines` lines of each live log under `run_dir` (or only those of `sessions`),
    by session; {} when none can be read. Reads at most the log's bound, so a poll costs little
    however long the step runs."""
    found: dict[str, tuple[str, ...]] = {}
    logs = (
        sorted(live_dir(run_dir).glob("*.log"))
        if sessions is None
        else [live_dir(run_dir) / f"{s}.log" for s in sorted(sessions) if _SESSION.fullmatch(s)]
    )
    for log in logs:
        try:
            with log.open("rb") as stream:
                stream.seek(0, 2)
                size = stream.tell()
                stream.seek(max(0, size - LIMIT_BYTES))
                raw = stream.read(LIMIT_BYTES)
        except OSError:
            continue
        text = raw.decode("utf-8", errors="replace")
        found[log.stem] = tuple(deque(text.splitlines(), maxlen=lines))
    return found
