"""cursor's events (`-p --output-format stream-json`, Cursor's headless docs; untested).

cursor's envelope is claude's (system, assistant, user, result: claude.py) plus its own:

    top-level type            what is written
    ------------------------  --------------------------------------------------------------
    tool_call                 "▸ <tool>" when started (the `<name>ToolCall` key, its args'
                              target), its result when completed
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from app.runtime.streamjson.lines import tool_line
from app.runtime.streamjson.writer import CYAN, Handler, Writer

__all__ = ["CursorEvents"]


class CursorEvents:
    """cursor's own `tool_call`; it keeps no state."""

    SILENT: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, out: Writer) -> None:
        self._out = out

    def handlers(self) -> Mapping[str, Handler]:
        """tool_call."""
        return {"tool_call": self._on_tool_call}

    def _on_tool_call(self, event: dict[str, object]) -> bool:
        call = event.get("tool_call")
        if not isinstance(call, dict) or len(call) != 1:
            return False
        ((key, body),) = call.items()
        if not isinstance(body, dict):
            return False
        name = key.removesuffix("ToolCall") or key
        if event.get("subtype") == "started":
            self._out.emit(tool_line(name, body.get("args")), CYAN)
            return True
        result = body.get("result")
        if isinstance(result, dict) and isinstance(result.get("success"), dict):
            self._out.tool_result(result["success"].get("content"), is_error=False)
        elif isinstance(result, dict) and "error" in result:
            error = result["error"]
            message = error.get("message") if isinstance(error, dict) else error
            self._out.tool_result(message, is_error=True)
        return True
