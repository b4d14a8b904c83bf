"""Azure Pipelines' side channels: logging commands, and a log that cannot speak to the agent.

The pipeline agent reads commands from the step's log: `##vso[area.action key=value;…]data`
(https://learn.microsoft.com/en-us/azure/devops/pipelines/scripts/logging-commands). pairbot
speaks four of them:

    mask(value)        ##vso[task.setvariable variable=…;issecret=true]value — the value is a
                       secret from then on: the agent replaces it with *** in every log line
    log_error(line)    ##vso[task.logissue type=error]line — the run's one-line failure
    upload_summary(p)  ##vso[task.uploadsummary]p — a Markdown file on the run's summary tab
    group(title)       ##[group]title … ##[endgroup] — a collapsible section

Data and property values are escaped the way the agent unescapes them (the task library's
rules: `%` → `%AZP25`, CR → `%0D`, LF → `%0A`; in properties also `]` → `%5D`, `;` → `%3B`), so
a message can neither end its line early nor start a second command.

Unlike GitHub's runner, the agent has no `stop-commands`: it looks for `##vso[` anywhere in a
line. So everything an agent prints goes through `AgentLog`, which breaks every `##vso[` and
every line-leading `##[` (case-insensitively) before the line reaches the log: nothing an agent
prints can set a variable, register or end a group, upload a file or fail the run.

`LoggingCommands` is this module as the run driver's `LogCommands` (`action.run.platform`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TextIO

__all__ = [
    "AgentLog",
    "LoggingCommands",
    "agent_log",
    "escape_data",
    "escape_property",
    "group",
    "log_error",
    "mask",
    "neutralize",
    "upload_summary",
]

MASK_VARIABLE = "pairbot.secret"
_COMMAND = re.compile(r"##vso\[", re.IGNORECASE)
_FORMAT = re.compile(r"^(\s*)##\[", re.IGNORECASE)


def escape_data(text: str) -> str:
    """Logging-command data as the agent unescapes it: `%`, CR and LF."""
    return text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: the data escapes, plus `]` and `;` that would end the properties."""
    return escape_data(text).replace("]", "%5D").replace(";", "%3B")


def _command(name: str, properties: dict[str, str], data: str, stream: TextIO) -> None:
    props = ";".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    stream.write(f"##vso[{name}{' ' + props if props else ''}]{escape_data(data)}\n")
    stream.flush()


def mask(value: str, stream: TextIO) -> None:
    """Register `value` (and each of its lines) as a secret before anything else is printed.

    A multi-line value is registered line by line too: the agent masks within one log line.
    Blank values are not registered (masking "" would blank the whole log).
    """
    pieces = [value, *(line.strip() for line in re.split(r"\r\n|\r|\n", value))]
    seen: set[str] = set()
    for piece in pieces:
        if piece.strip() and piece not in seen and "\n" not in piece and "\r" not in piece:
            seen.add(piece)
            _command(
                "task.setvariable",
                {"variable": MASK_VARIABLE, "issecret": "true"},
                piece,
                stream,
            )


def log_error(line: str, stream: TextIO) -> None:
    """The run's one-line failure, shown on the run's summary and in its log."""
    _command("task.logissue", {"type": "error"}, line, stream)


def upload_summary(path: Path, stream: TextIO) -> None:
    """Attach the Markdown file at `path` to the run's summary tab."""
    _command("task.uploadsummary", {}, str(path), stream)


def neutralize(text: str) -> str:
    """One line of untrusted output, unable to issue a logging or formatting command."""
    return _FORMAT.sub(r"\1# #[", _COMMAND.sub("##vso ", text))


@contextmanager
def group(title: str, stream: TextIO) -> Iterator[None]:
    """A collapsible log section; always closed, even when the body raises."""
    stream.write(f"##[group]{neutralize(title).replace(chr(10), ' ')}\n")
    stream.flush()
    try:
        yield
    finally:
        stream.write("##[endgroup]\n")
        stream.flush()


class AgentLog:
    """Where the agent's output goes: `line(text)` is an engine `LineSink`, every line
    neutralized (see the module docstring)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def line(self, text: str) -> None:
        for part in text.rstrip("\r\n").splitlines() or [""]:
            self._stream.write(neutralize(part) + "\n")
        self._stream.flush()


@contextmanager
def agent_log(title: str, stream: TextIO) -> Iterator[AgentLog]:
    """A collapsible group holding the agent's output, unable to issue commands."""
    with group(title, stream):
        yield AgentLog(stream)


class LoggingCommands:
    """The step's log on `stream`, as the run driver speaks to it (`LogCommands`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def say(self, line: str) -> None:
        """One plain line."""
        self._stream.write(line + "\n")
        self._stream.flush()

    def mask(self, value: str) -> None:
        """The value (and each of its lines) as a secret variable (`mask`)."""
        mask(value, self._stream)

    def error(self, line: str) -> None:
        """`##vso[task.logissue type=error]`: the run's one-line failure (`log_error`)."""
        log_error(line, self._stream)

    def agent_log(self, title: str) -> AbstractContextManager[AgentLog]:
        """The agent's group, every line neutralized (`agent_log`)."""
        return agent_log(title, self._stream)

    def upload_summary(self, path: Path) -> None:
        """Attach the Markdown file at `path` to the run's summary tab (`upload_summary`)."""
        upload_summary(path, self._stream)
