"""gemini's events (`--output-format stream-json`, packages/core/src/output/types.ts in
google-gemini/gemini-cli).

    top-level type            what is written
    ------------------------  --------------------------------------------------------------
    init                      nothing
    message                   assistant content as prose (`delta: true` chunks streamed); the
                              user's own message nothing
    tool_use (with tool_name, no part)   "▸ <tool_name> <target>"
    tool_result               its output, or "✗" and error.message when status is "error"
    result (with stats or status, no subtype)   "✓ success · …" or "✗ error (<message>) · …"
                              from stats (input_tokens, cached, input, output_tokens; gemini
                              reports no cost)
    error (a `message` string, no `error` object)   "✗ error: <message>", or "warning:
                              <message>" for severity "warning"; codex's `error` has the
                              same shape without a severity and is read here too

`result`, `tool_use` and `error` are also claude's or opencode's types: the renderer asks this
vocabulary first, and each of these handlers declines (returns False) an event of the other
shape. Usage: gemini's `input` is the uncached input; otherwise `input_tokens` less `cached`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from app.engine.agent import AgentUsage
from app.runtime.streamjson.lines import tool_line
from app.runtime.streamjson.usage import count, figures, uncached
from app.runtime.streamjson.writer import CYAN, GREEN, RED, Handler, Writer

__all__ = ["GeminiEvents", "gemini_result_usage"]


def gemini_result_usage(event: Mapping[str, object]) -> AgentUsage:
    """Figures from gemini's `result`: stats.input (uncached input), else input_tokens less
    cached, and output_tokens; gemini reports no cost."""
    raw = event.get("stats")
    stats = raw if isinstance(raw, dict) else {}
    fresh = count(stats.get("input"))
    if fresh is None:
        fresh = uncached(stats.get("input_tokens"), stats.get("cached"))
    return AgentUsage(input_tokens=fresh, output_tokens=count(stats.get("output_tokens")))


class GeminiEvents:
    """gemini's vocabulary (and codex's `error`); it keeps no state."""

    SILENT: ClassVar[frozenset[str]] = frozenset({"init"})

    def __init__(self, out: Writer) -> None:
        self._out = out

    def handlers(self) -> Mapping[str, Handler]:
        """message, tool_use, tool_result, result and error."""
        return {
            "message": self._on_message,
            "tool_use": self._on_tool_use,
            "tool_result": self._on_tool_result,
            "result": self._on_result,
            "error": self._on_error,
        }

    def _on_message(self, event: dict[str, object]) -> bool:
        content = event.get("content")
        role = event.get("role")
        if not isinstance(content, str) or role not in ("user", "assistant"):
            return False
        if role == "assistant" and content:
            if event.get("delta") is True:
                self._out.prose(content)
            else:
                self._out.prose_block(content)
        return True

    def _on_tool_use(self, event: dict[str, object]) -> bool:
        if "part" in event or not isinstance(event.get("tool_name"), str):
            return False  # opencode's
        # {tool_name, tool_id, parameters}
        self._out.emit(tool_line(event["tool_name"], event.get("parameters")), CYAN)
        return True

    def _on_tool_result(self, event: dict[str, object]) -> bool:
        status = event.get("status")
        if status == "error":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self._out.tool_result(message if message is not None else error, is_error=True)
            return True
        if status == "success":
            self._out.tool_result(event.get("output"), is_error=False)
            return True
        return False

    def _on_result(self, event: dict[str, object]) -> bool:
        if "subtype" in event or ("stats" not in event and "status" not in event):
            return False  # claude's
        usage = gemini_result_usage(event)
        self._out.add_usage(usage)
        if event.get("status") == "success":
            self._out.emit(f"✓ success · {figures(usage)}", GREEN)
            return True
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        detail = f" ({message})" if isinstance(message, str) and message else ""
        self._out.emit(f"✗ error{detail} · {figures(usage)}", RED)
        return True

    def _on_error(self, event: dict[str, object]) -> bool:
        text = event.get("message")
        if isinstance(event.get("error"), dict) or not isinstance(text, str):
            return False  # opencode's
        # codex {message}, gemini {severity, message}
        if event.get("severity") == "warning":
            self._out.emit(f"warning: {text}")
        else:
            self._out.emit(f"✗ error: {text}", RED)
        return True
