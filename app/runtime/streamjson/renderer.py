"""`StreamJsonRenderer`: one stdout line of JSON in, readable lines out, by whichever agent's
vocabulary knows the event.

The dispatch is multi-schema, not agent-named: the vocabularies are read side by side, and
where two agents share a top-level type the event's shape decides. gemini's vocabulary is asked
first; where it shares `result` with claude and `tool_use` and `error` with opencode, its
handler declines an event of the other agent's shape, and the next vocabulary has it. A
top-level type some vocabulary lists as silent writes nothing. Anything else — an unknown
type, a known type whose shape no vocabulary recognises, a non-object, a line that is not
JSON — is written raw.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from app.engine.agent import AgentUsage
from app.runtime.streamjson.claude import ClaudeEvents
from app.runtime.streamjson.codex import CodexEvents
from app.runtime.streamjson.cursor import CursorEvents
from app.runtime.streamjson.gemini import GeminiEvents
from app.runtime.streamjson.opencode import OpencodeEvents
from app.runtime.streamjson.writer import Handler, Vocabulary, Writer

__all__ = ["StreamJsonRenderer"]


class StreamJsonRenderer:
    """Render claude, opencode, codex, gemini and cursor stream-json lines (see the package
    docstring and each vocabulary's module for every rule).

    `feed` takes one stdout line (a trailing newline is ignored), `close` writes a pending
    partial prose line. Neither raises on any input; only an exception from `write` escapes.
    """

    def __init__(self, write: Callable[[str], None], *, color: bool = False) -> None:
        self._out = Writer(write, color=color)
        vocabularies: tuple[Vocabulary, ...] = (
            GeminiEvents(self._out),  # first: see the module docstring
            ClaudeEvents(self._out),
            OpencodeEvents(self._out),
            CodexEvents(self._out),
            CursorEvents(self._out),
        )
        self._silent = frozenset[str]().union(*(v.SILENT for v in vocabularies))
        handlers: dict[str, list[Handler]] = {}
        for vocabulary in vocabularies:
            for kind, handler in vocabulary.handlers().items():
                handlers.setdefault(kind, []).append(handler)
        self._handlers = {kind: tuple(found) for kind, found in handlers.items()}

    @property
    def usage(self) -> AgentUsage:
        """Tokens and cost summed over every `result` / `step_finish` / `turn.completed`; None
        when never seen."""
        return self._out.usage

    @property
    def text(self) -> str:
        """The assistant prose so far (a pending partial line included); blocks end with "\\n"."""
        return self._out.text

    def feed(self, line: str) -> None:
        """Render one stdout line."""
        raw = line.rstrip("\r\n")
        if not raw.strip():
            return  # a blank line carries nothing
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
            self._out.emit(raw)
            return
        if not (isinstance(event, dict) and self._dispatch(event)):
            self._out.emit(raw)

    def close(self) -> None:
        """Write the pending partial prose line, if any."""
        self._out.end_prose()

    def _dispatch(self, event: dict[str, object]) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        if kind in self._silent:
            return True
        return any(handler(event) for handler in self._handlers.get(kind, ()))
