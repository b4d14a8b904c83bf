"""The shared output of the renderer: prose, other lines, and the usage accumulated.

Every vocabulary (claude.py, opencode.py, codex.py, gemini.py, cursor.py) writes through one
`Writer` and adds the figures it reads to it.

The sink. `write` receives exactly one output line per call, without a trailing newline; a
line never contains "\\n" (a raw line holding one is written as several lines).

Flushing. Prose is buffered only up to the next newline: a text delta writes every line it
completes at once and keeps the unfinished tail. That tail is written as a line, never dropped
or written twice, when the prose block ends: at a block boundary of the agent's stream, when
another prose block starts (`prose_block`), before any other line is written (`emit`), and on
the renderer's `close()`. Events that write nothing leave the tail pending, so a ping between
two deltas does not split a line.

`text` is the prose, exactly as written: each prose block ends with a newline (one is added
when the block did not end with one). `usage` is the sum of what `add_usage` was given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar, Final, Protocol

from app.engine.agent import AgentUsage
from app.runtime.streamjson.lines import tool_result_lines
from app.runtime.streamjson.usage import add_usage

__all__ = ["CYAN", "DIM", "GREEN", "RED", "Handler", "Vocabulary", "Writer"]

RED: Final = "31"
GREEN: Final = "32"
CYAN: Final = "36"
DIM: Final = "2"

# One event's handler: True when it recognised the event's shape (and wrote it), False when it
# did not (it then wrote nothing, and another vocabulary or the raw line may have it).
Handler = Callable[[dict[str, object]], bool]


class Vocabulary(Protocol):
    """One agent's events: the top-level types it ignores, and a handler per type it reads."""

    SILENT: ClassVar[frozenset[str]]

    def handlers(self) -> Mapping[str, Handler]:
        """The handler of each top-level type this agent emits."""
        ...


class Writer:
    """Writes prose and other lines through `write`, and sums the usage the stream reports."""

    def __init__(self, write: Callable[[str], None], *, color: bool = False) -> None:
        self._write = write
        self._color = color
        self._pending = ""  # the unfinished last line of the current prose block
        self._text: list[str] = []
        self.usage = AgentUsage()

    @property
    def text(self) -> str:
        """The prose so far (a pending partial line included); blocks end with "\\n"."""
        return "".join(self._text)

    def add_usage(self, usage: AgentUsage) -> None:
        """Add one event's figures to the run's."""
        self.usage = add_usage(self.usage, usage)

    def prose(self, chunk: str) -> None:
        """Add prose: write every line it completes, keep the unfinished tail pending."""
        self._text.append(chunk)
        *complete, self._pending = (self._pending + chunk).split("\n")
        for line in complete:
            self._write(line)

    def prose_block(self, text: str) -> None:
        """A whole prose block: it starts on a line of its own and ends its last line."""
        self.end_prose()
        self.prose(text)
        self.end_prose()

    def end_prose(self) -> None:
        """End the prose block: write its unfinished tail as a line of its own."""
        if self._pending:
            self._write(self._pending)
            self._text.append("\n")
            self._pending = ""

    def tool_result(self, content: object, *, is_error: bool) -> None:
        """A tool's result, cut short (lines.tool_result_lines); red when it failed."""
        for line in tool_result_lines(content, is_error=is_error):
            self.emit(line, RED if is_error else DIM)

    def emit(self, line: str, style: str | None = None) -> None:
        """Write a non-prose line (after ending any prose block), one call per line."""
        self.end_prose()
        for piece in line.split("\n"):
            if self._color and style is not None:
                self._write(f"\x1b[{style}m{piece}\x1b[0m")
            else:
                self._write(piece)
