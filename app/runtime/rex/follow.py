"""Following a started agent: its output as lines, its timeout, and how it ended.

`follow` polls the run directory (protocol.py's scripts, through `RunDir`) every
`poll_interval_s`, sooner at first (50, 100, 200 ms…). The cursor advances by the bytes decoded;
an incremental UTF-8 decoder and a line assembler (`LineAssembler`) turn them into `stdout`
events for complete lines only, in order, each exactly once; the last line without a newline is
emitted once at the end. On the per-agent timeout it sends SIGTERM to the group, `kill_grace_s`
later SIGKILL (`next_signal`). Contact lost for longer than `lost_contact_s`, a launcher that
never started, a run directory that vanished, or processes gone without a status are a
`RexError` (`started=True` once the agent ran).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from app.engine.agent import AgentEvent, AgentSpawnRequest, AgentSpawnResult, EventSink, RunAs
from app.runtime.process import add_line, timeout_note
from app.runtime.rex.connection import CLEANUP_TIMEOUT_S, RexConnection
from app.runtime.rex.errors import RexError
from app.runtime.rex.protocol import (
    READ_CAP_BYTES,
    Poll,
    as_agent,
    b64decode,
    exit_from_status,
    finish_command,
    parse_poll,
    poll_command,
    signal_command,
)

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "DEFAULT_LOST_CONTACT_S",
    "DEFAULT_POLL_INTERVAL_S",
    "DEFAULT_START_TIMEOUT_S",
    "Collector",
    "LineAssembler",
    "Pace",
    "RunDir",
    "follow",
    "next_signal",
    "redactor",
]

DEFAULT_POLL_INTERVAL_S: Final = 0.3
_FIRST_POLL_S: Final = 0.025  # the first wait; each next one doubles, up to the interval
DEFAULT_KILL_GRACE_S: Final = 2.0
DEFAULT_LOST_CONTACT_S: Final = 30.0
DEFAULT_START_TIMEOUT_S: Final = 30.0

Sent = Literal["SIGTERM", "SIGKILL"]


class LineAssembler:
    """Bytes in, complete lines out: each line exactly once, in order, UTF-8 split-safe."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        """The lines `data` completes (without their newline)."""
        text = self._decoder.decode(data)
        if not text:
            return []
        *complete, tail = text.split("\n")
        lines: list[str] = []
        if complete:
            lines.append("".join([*self._partial, complete[0]]))
            lines.extend(complete[1:])
            self._partial = []
        if tail:
            self._partial.append(tail)
        return lines

    def finish(self) -> list[str]:
        """The last line if it had no newline (once), and any undecodable tail bytes."""
        self._partial.append(self._decoder.decode(b"", final=True))
        last = "".join(self._partial)
        self._partial = []
        return [last] if last else []


def redactor(secret: str | None) -> Callable[[str], str]:
    """A function that replaces `secret` with `***` (none: the identity)."""
    if not secret:
        return lambda text: text
    return lambda text: text.replace(secret, "***")


class Collector:
    """Forwards events and remembers the stdout lines for the result (token redacted)."""

    def __init__(self, on_event: EventSink, redact: Callable[[str], str]) -> None:
        self.lines: list[str] = []
        self._on_event = on_event
        self.redact = redact

    def line(self, line: str) -> None:
        """One stdout line of the agent."""
        line = self.redact(line)
        self.lines.append(line)
        self._on_event(AgentEvent(kind="stdout", line=line))

    def error(self, message: str) -> None:
        """A message from pairbot about the run."""
        self._on_event(AgentEvent(kind="error", message=self.redact(message)))

    def exit(self, exit_code: int | None) -> None:
        """The run is over."""
        self._on_event(AgentEvent(kind="exit", exit_code=exit_code))


@dataclass
class RunDir:
    """The run directory of a started agent where it runs, and the scripts run on it (as the
    agent's OS user when it has one). `swept`: its group is stopped and the directory gone."""

    connection: RexConnection
    path: str
    run_as: RunAs | None
    request_timeout_s: float
    swept: bool = False

    async def poll(self, cursor: int) -> Poll:
        """Liveness, the exit sentinel and the log bytes after `cursor`."""
        response = await self.connection.execute(
            "read the agent's output",
            as_agent(self.run_as, poll_command(self.path, cursor)),
            self.request_timeout_s,
        )
        try:
            return parse_poll(response.stdout)
        except ValueError as exc:  # binascii.Error is a ValueError
            raise RexError(f"could not decode the agent's output: {exc}", started=True) from None

    async def signal(self, sig: Literal["TERM", "KILL"]) -> None:
        """Send `sig` to the agent's process group."""
        script = as_agent(self.run_as, signal_command(self.path, sig)) + " || true"
        await self.connection.execute(f"send SIG{sig} to the agent", script, self.request_timeout_s)

    async def finish(self, *, sweep: bool, log: str = "err.log") -> str:
        """Sweep the group (if it may live), read a log's tail, remove the run directory."""
        response = await self.connection.execute(
            "collect the agent's stderr",
            as_agent(self.run_as, finish_command(self.path, sweep=sweep, log=log)),
            self.request_timeout_s,
        )
        self.swept = True
        return b64decode(response.stdout).decode("utf-8", errors="replace")

    async def abandon(self) -> None:
        """A failure or a cancellation left the agent behind: stop it and remove its files."""
        self.swept = True
        script = as_agent(self.run_as, finish_command(self.path, sweep=True))
        with contextlib.suppress(RexError):  # unreachable: nothing more can be done from here
            await self.connection.execute("clean up", script, CLEANUP_TIMEOUT_S)


@dataclass(frozen=True)
class Pace:
    """How `follow` paces a run: poll interval, kill grace, and how long it waits for contact
    and for the launcher to start (seconds)."""

    poll_interval_s: float = DEFAULT_POLL_INTERVAL_S
    kill_grace_s: float = DEFAULT_KILL_GRACE_S
    lost_contact_s: float = DEFAULT_LOST_CONTACT_S
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S


def next_signal(
    sent: Sent | None, sent_at: float, now: float, deadline: float, grace_s: float
) -> Literal["TERM", "KILL", "stop"] | None:
    """What the timeout asks for now: SIGTERM at the deadline, SIGKILL a grace later, and a
    grace after that "stop" (the group is dead but unreaped; nothing more will come)."""
    if sent is None and now >= deadline:
        return "TERM"
    if sent == "SIGTERM" and now >= sent_at + grace_s:
        return "KILL"
    if sent == "SIGKILL" and now >= sent_at + grace_s:
        return "stop"
    return None


async def follow(
    run: RunDir, request: AgentSpawnRequest, events: Collector, pace: Pace
) -> AgentSpawnResult:
    """Stream the agent's lines to `events` until it ends or is stopped; how it ended."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + request.timeout_ms / 1000
    last_contact = started
    assembler = LineAssembler()
    cursor = 0
    sent: Sent | None = None
    sent_at = 0.0
    poll = Poll("starting", None, b"")
    polls = 0
    while True:
        answer = await _poll_in_contact(run, cursor, last_contact, pace)
        if answer is None:
            await asyncio.sleep(pace.poll_interval_s)
            continue
        poll, last_contact = answer, loop.time()
        if poll.state == "gone":
            raise RexError(
                f"the agent's run directory {run.path} vanished while it ran", started=True
            )
        cursor += len(poll.data)
        for line in assembler.feed(poll.data):
            events.line(line)
        if len(poll.data) >= READ_CAP_BYTES:
            continue  # more bytes are waiting: read them before sleeping
        if poll.status is not None or poll.state == "dead":
            break
        now = loop.time()
        if poll.state == "starting" and now - started > pace.start_timeout_s:
            await _not_started(run, pace)
        step = next_signal(sent, sent_at, now, deadline, pace.kill_grace_s)
        if step == "stop":
            break
        if step is not None:
            await run.signal(step)
            sent, sent_at = ("SIGTERM" if step == "TERM" else "SIGKILL"), now
        wake = deadline if sent is None else sent_at + pace.kill_grace_s
        # Quick polls first, doubling up to the interval: a short step (a report, a check)
        # ends in tens of milliseconds, not a whole interval; a long one polls as before.
        polls += 1
        interval = min(pace.poll_interval_s, _FIRST_POLL_S * 2**polls)
        await asyncio.sleep(max(0.0, min(interval, wake - now)))

    for line in assembler.finish():
        events.line(line)
    stderr = events.redact(await run.finish(sweep=poll.state != "dead"))
    return _ended(poll, sent, stderr, request, events, kill_grace_s=pace.kill_grace_s)


async def _poll_in_contact(
    run: RunDir, cursor: int, last_contact: float, pace: Pace
) -> Poll | None:
    """One poll; None when it failed but contact is not yet lost (the last was at
    `last_contact`, on the running loop's clock)."""
    try:
        return await run.poll(cursor)
    except RexError as err:
        if asyncio.get_running_loop().time() - last_contact > pace.lost_contact_s:
            raise RexError(
                f"lost contact with the agent for over {pace.lost_contact_s:g} s "
                f"({err}); it may still be running",
                started=True,
            ) from None
        return None


async def _not_started(run: RunDir, pace: Pace) -> None:
    stderr = await run.finish(sweep=False, log="launcher.log")
    raise RexError(
        f"the agent launcher did not start within {pace.start_timeout_s:g} s: "
        f"{stderr.strip()[-500:] or 'no output'}",
        started=False,
    )


def _ended(
    poll: Poll,
    sent: Sent | None,
    stderr: str,
    request: AgentSpawnRequest,
    events: Collector,
    *,
    kill_grace_s: float,
) -> AgentSpawnResult:
    exit_code: int | None
    ended_by: str | None
    if sent is not None:
        exit_code, ended_by = None, sent
        note = timeout_note(request.timeout_ms, sent, kill_grace_s)
        events.error(note)
        stderr = add_line(stderr, note)
    elif poll.status is not None:
        exit_code, ended_by = exit_from_status(poll.status)
    else:
        raise RexError(
            "the agent's processes vanished without an exit status (killed from outside "
            f"pairbot?); its stderr: {stderr.strip()[-500:] or 'empty'}",
            started=True,
        )
    events.exit(exit_code)
    return AgentSpawnResult(
        exit_code=exit_code, signal=ended_by, stdout="\n".join(events.lines), stderr=stderr
    )
