"""claude's events (`-p --output-format stream-json --verbose --include-partial-messages`).

    top-level type            what is written
    ------------------------  --------------------------------------------------------------
    system, rate_limit_event  nothing (control noise)
    stream_event              text_delta prose, streamed line by line; every other partial
                              event is silent (the `assistant` snapshot carries it);
                              content_block_stop, message_start and message_stop end a prose
                              block
    assistant                 text items as prose, unless already streamed (see "Dedup");
                              tool_use items as "▸ <name> <target>"
    user                      tool_result items, cut to 200 characters / 3 lines; an error
                              result is marked "✗" (red with color)
    result                    "✓ success · in N · out N · $X" or "✗ error (<subtype>) · ..."
                              (a `result` with stats or status and no subtype is gemini's)

Dedup. With --include-partial-messages claude sends each text block twice: as deltas, then in
the `assistant` snapshot of the same message. The text items of an `assistant` message are
skipped when text deltas were seen for that message: its `message.id` matches the id announced
by a `message_start` whose deltas were streamed, or, when either side has no id, text deltas
were streamed since the latest `message_start`. Its tool_use items are always written.

Usage: input tokens exclude cache reads and writes (claude reports them apart); thinking tokens
count as output tokens. Sources: Claude Code's headless docs and Agent SDK message types
(SDKPartialAssistantMessage, SDKResultMessage: `total_cost_usd`, `usage`, `is_error`,
`subtype`). cursor (`-p --output-format stream-json`) shares this envelope (cursor.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from app.engine.agent import AgentUsage
from app.runtime.streamjson.lines import tool_line
from app.runtime.streamjson.usage import count, dollars, figures
from app.runtime.streamjson.writer import CYAN, GREEN, RED, Handler, Writer

__all__ = ["ClaudeEvents", "claude_result_usage"]

# Partial events that close a prose block.
_BLOCK_BOUNDARIES: Final = frozenset({"content_block_stop", "message_start", "message_stop"})


def claude_result_usage(event: Mapping[str, object]) -> AgentUsage:
    """Figures from claude's `result` event: usage.input_tokens/output_tokens, total_cost_usd."""
    usage = event.get("usage")
    tokens = usage if isinstance(usage, dict) else {}
    # Older claude releases named the cost `cost_usd`.
    cost = event["total_cost_usd"] if "total_cost_usd" in event else event.get("cost_usd")
    return AgentUsage(
        input_tokens=count(tokens.get("input_tokens")),
        output_tokens=count(tokens.get("output_tokens")),
        cost_usd=dollars(cost),
    )


class ClaudeEvents:
    """claude's vocabulary, with the dedup state of its partial messages."""

    SILENT: ClassVar[frozenset[str]] = frozenset({"system", "rate_limit_event"})

    def __init__(self, out: Writer) -> None:
        self._out = out
        self._current_id: str | None = None  # id from the latest message_start, if it had one
        self._current_streamed = False  # text deltas seen since the latest message_start
        self._streamed_ids: set[str] = set()  # message ids whose text was streamed as deltas

    def handlers(self) -> Mapping[str, Handler]:
        """stream_event, assistant, user and result."""
        return {
            "stream_event": self._on_stream_event,
            "assistant": self._on_assistant,
            "user": self._on_user,
            "result": self._on_result,
        }

    def _on_stream_event(self, event: dict[str, object]) -> bool:
        inner = event.get("event")
        if not isinstance(inner, dict):
            return False
        kind = inner.get("type")
        if isinstance(kind, str) and kind in _BLOCK_BOUNDARIES:  # any JSON value may arrive
            self._out.end_prose()
        if kind == "message_start":
            message = inner.get("message")
            message_id = message.get("id") if isinstance(message, dict) else None
            self._current_id = message_id if isinstance(message_id, str) else None
            self._current_streamed = False
        elif kind == "content_block_delta":
            delta = inner.get("delta")
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                chunk = delta.get("text")
                if isinstance(chunk, str) and chunk:
                    self._current_streamed = True
                    if self._current_id is not None:
                        self._streamed_ids.add(self._current_id)
                    self._out.prose(chunk)
        return True

    def _on_assistant(self, event: dict[str, object]) -> bool:
        message = event.get("message")
        if not isinstance(message, dict):
            return False
        content = message.get("content")
        items: list[object]
        if isinstance(content, str):
            items = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            items = content
        else:
            return False
        message_id = message.get("id")
        if isinstance(message_id, str) and message_id in self._streamed_ids:
            streamed = True
        else:
            unmatched = not isinstance(message_id, str) or self._current_id is None
            streamed = unmatched and self._current_streamed
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            text = item.get("text")
            if kind == "text" and isinstance(text, str) and not streamed:
                self._out.prose_block(text)
            elif kind == "tool_use":
                self._out.emit(tool_line(item.get("name"), item.get("input")), CYAN)
            # thinking, redacted_thinking, server tool blocks, ...: nothing to show
        return True

    def _on_user(self, event: dict[str, object]) -> bool:
        message = event.get("message")
        if not isinstance(message, dict):
            return False
        content = message.get("content")
        if isinstance(content, str):
            return True  # the prompt echoed back; already known to the reader
        if not isinstance(content, list):
            return False
        for item in content:
            if isinstance(item, dict) and item.get("type") == "tool_result":
                self._out.tool_result(item.get("content"), is_error=item.get("is_error") is True)
        return True

    def _on_result(self, event: dict[str, object]) -> bool:
        usage = claude_result_usage(event)
        self._out.add_usage(usage)
        subtype = event.get("subtype")
        # A usage-limit stop arrives as subtype "success" with is_error true: is_error wins.
        failed = event.get("is_error") is True or (
            isinstance(subtype, str) and subtype != "success"
        )
        if failed:
            detail = f" ({subtype})" if isinstance(subtype, str) and subtype != "success" else ""
            self._out.emit(f"✗ error{detail} · {figures(usage)}", RED)
        else:
            self._out.emit(f"✓ success · {figures(usage)}", GREEN)
        return True
