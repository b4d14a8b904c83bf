"""The Actions runner's side channels: outputs, the job summary, masks, log groups, and a log
that cannot speak to the runner. Small functions over a path or a text stream; no globals.

The runner reads commands from the step's log (a line `::name key=value::data`,
https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands) and
outputs from the file named by `GITHUB_OUTPUT`. Everything written there is data pairbot
controls, except one thing: the agent's streamed output. An agent that prints
`::add-mask::`, `::set-env`-style or `::stop-commands::` lines, or simply echoes a file that
holds them, would otherwise act on the runner — end a group early, hide log text, or worse.
`agent_log` therefore wraps that output in `::stop-commands::<token>` … `::<token>::`: between
the two the runner processes no command at all, and only a line carrying the random,
unguessable token resumes them (the agent never sees the token before it is used). The runner
keeps masking registered secrets inside that span: masking is applied to every log line, it is
not a command.

Command data is escaped the way the runner unescapes it (`%` → `%25`, CR → `%0D`, LF → `%0A`),
so a title or message can neither end its line early nor start a second command. Outputs use
the heredoc form `name<<DELIMITER` with a fresh random delimiter that is checked not to occur in
the name or the value (what `@actions/core` does), so a value cannot close its own block and
forge a second output.

`WorkflowCommands` is this module as the run driver's `LogCommands` (`action.run.platform`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Final, TextIO

__all__ = [
    "SUMMARY_LIMIT",
    "AgentLog",
    "WorkflowCommands",
    "agent_log",
    "append_summary",
    "escape_data",
    "escape_property",
    "group",
    "issue_command",
    "mask",
    "set_outputs",
    "stop_commands",
]

# The runner refuses a step summary above 1 MiB and shows none of it ("$GITHUB_STEP_SUMMARY
# upload aborted, supports content up to a size of 1024k"); stay under it and say so.
SUMMARY_LIMIT: Final = 1024 * 1024
_SUMMARY_NOTICE = "\n\n… (truncated by pairbot: the job summary is limited to 1 MiB)\n"
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_COMMAND_NAME = re.compile(r"[a-z][a-z-]*")
_DELIMITER_TRIES = 8


def _new_delimiter() -> str:
    return f"ghadelimiter_{secrets.token_hex(16)}"


def escape_data(text: str) -> str:
    """Workflow-command data as the runner unescapes it: `%`, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow-command property value: data escaping plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def issue_command(
    name: str, data: str, stream: TextIO, properties: Mapping[str, str] | None = None
) -> None:
    """Write one workflow command line, e.g. `issue_command("error", msg, sys.stdout)`."""
    if not _COMMAND_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a workflow command name")
    props = ",".join(f"{key}={escape_property(value)}" for key, value in (properties or {}).items())
    stream.write(f"::{name}{' ' + props if props else ''}::{escape_data(data)}\n")
    stream.flush()


# -- outputs and the job summary -----------------------------------------------------------


def set_outputs(
    path: Path | None,
    outputs: Mapping[str, str],
    *,
    new_delimiter: Callable[[], str] = _new_delimiter,
) -> None:
    """Append `outputs` to the GITHUB_OUTPUT file, each in the heredoc form.

    Each value gets a fresh delimiter; one that occurs in the name or value is drawn again (a
    random 128-bit delimiter colliding is an attack, not chance). `path` None (not running
    under Actions) writes nothing. A name must be letters, digits, `_` and `-`.
    """
    if path is None:
        return
    blocks: list[str] = []
    for name, value in outputs.items():
        if not _OUTPUT_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an output name (letters, digits, '_' and '-')")
        for _ in range(_DELIMITER_TRIES):
            delimiter = new_delimiter()
            if delimiter and delimiter not in value and delimiter not in name:
                break
        else:
            raise ValueError(f"no delimiter found that does not occur in output {name!r}")
        blocks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    # One write: a crash leaves either every output of this call or none of them.
    with path.open("a", encoding="utf-8", newline="\n") as file:
        file.write("".join(blocks))


def append_summary(path: Path | None, markdown: str, *, limit: int = SUMMARY_LIMIT) -> bool:
    """Append `markdown` (plus a newline) to the job summary; False when it had to be cut.

    The step's summary stays within `limit` bytes: what does not fit is cut with a visible
    notice, because the runner drops an oversized summary whole. `path` None writes nothing.
    """
    if path is None:
        return True
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    data = text.encode("utf-8")
    used = path.stat().st_size if path.exists() else 0
    room = limit - used
    complete = len(data) <= room
    if not complete:
        notice = _SUMMARY_NOTICE.encode("utf-8")
        keep = max(room - len(notice), 0)
        # Cut on a character boundary: a split UTF-8 sequence would be dropped, not mangled.
        data = data[:keep].decode("utf-8", errors="ignore").encode("utf-8")
        data = data + notice if room >= len(notice) else b""
    with path.open("ab") as file:
        file.write(data)
    return complete


# -- the log -------------------------------------------------------------------------------


def mask(value: str, stream: TextIO) -> None:
    """Register `value` as a secret: the whole value and each of its lines.

    The runner matches masks within one log line, so a multi-line secret (a PEM key) printed
    line by line is only hidden if every line is registered on its own. Blank lines are not
    registered (masking "" or spaces would blank the whole log).
    """
    if not value.strip():
        return
    pieces = [value] + [line.strip() for line in re.split(r"\r\n|\r|\n", value)]
    seen: set[str] = set()
    for piece in pieces:
        if piece.strip() and piece not in seen:
            seen.add(piece)
            issue_command("add-mask", piece, stream)


def _title(text: str) -> str:
    # `::` in a title is harmless to the runner (it is data) but reads as a command in the log
    # and in anything that greps it; `: :` keeps the text readable and commands unambiguous.
    return re.sub(r":(?=:)", ": ", text)


@contextmanager
def group(title: str, stream: TextIO) -> Iterator[None]:
    """A collapsible log group; always closed, even when the body raises.

    The runner does not nest groups: opening one inside another ends the outer one.
    """
    issue_command("group", _title(title), stream)
    try:
        yield
    finally:
        issue_command("endgroup", "", stream)


@contextmanager
def stop_commands(stream: TextIO, *, token: str | None = None) -> Iterator[str]:
    """No workflow command is processed until the block ends; yields the resume token.

    Anything written in between, including pairbot's own `mask` calls, is plain log text:
    register secrets before entering.
    """
    token = token or f"pairbot-{secrets.token_hex(16)}"
    stream.write(f"::stop-commands::{token}\n")
    stream.flush()
    try:
        yield token
    finally:
        stream.write(f"::{token}::\n")
        stream.flush()


class AgentLog:
    """Where the agent's output goes inside `agent_log`: `line(text)` is an engine `LineSink`;
    `write(text)` takes raw chunks. Both end on a line boundary when the block closes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._open_line = False

    def line(self, text: str) -> None:
        """One line of output (a trailing newline is added)."""
        self.write(text.rstrip("\r\n") + "\n")

    def write(self, text: str) -> None:
        """A raw chunk, passed through as is."""
        if text:
            self._stream.write(text)
            self._stream.flush()
            self._open_line = not text.endswith("\n")

    def close_line(self) -> None:
        # The resume line must start a line of its own, or the runner never sees it.
        if self._open_line:
            self._stream.write("\n")
            self._open_line = False


@contextmanager
def agent_log(title: str, stream: TextIO) -> Iterator[AgentLog]:
    """A collapsible group holding the agent's output, with workflow commands stopped inside.

    Order matters: the group opens before commands stop and closes after they resume, since
    `::endgroup::` is itself a command.
    """
    with group(title, stream), stop_commands(stream):
        log = AgentLog(stream)
        try:
            yield log
        finally:
            log.close_line()


class WorkflowCommands:
    """The step's log on `stream`, as the run driver speaks to it (`LogCommands`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def say(self, line: str) -> None:
        """One plain line."""
        self._stream.write(line + "\n")
        self._stream.flush()

    def mask(self, value: str) -> None:
        """`::add-mask::` for the value and each of its lines (`mask`)."""
        mask(value, self._stream)

    def error(self, line: str) -> None:
        """`::error::line`: the run's one-line failure, on the run's page and in its log."""
        issue_command("error", line, self._stream)

    def agent_log(self, title: str) -> AbstractContextManager[AgentLog]:
        """The agent's group, with workflow commands stopped inside (`agent_log`)."""
        return agent_log(title, self._stream)
