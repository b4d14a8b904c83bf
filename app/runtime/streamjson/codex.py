"""codex's events (`exec --json`, codex-rs/exec/src/exec_events.rs in openai/codex).

    top-level type            what is written
    ------------------------  --------------------------------------------------------------
    thread.started, turn.started, item.plan.delta   nothing
    item.started / .updated / .completed   by item.type: agent_message as prose (once, when
                              completed); command_execution "▸ shell <command>" when it starts,
                              its aggregated_output when it ends ("✗" for failed / declined or a
                              non-zero exit_code); file_change "▸ <kind> <path>" per change;
                              mcp_tool_call "▸ <server>.<tool> <target>" and its result or
                              error; web_search "▸ web_search <query>"; error items as
                              "warning: <message>"; reasoning, plan and todo_list nothing
    turn.completed            "✓ turn completed · in N · out N · $?" (usage: input_tokens,
                              cached_input_tokens, output_tokens; codex reports no cost)
    turn.failed               "✗ turn failed: <message>"
    error                     "✗ error: <message>": gemini's shape without its severity, read
                              by gemini.py

Usage: codex's `input_tokens` include the cached part, which is subtracted; its reasoning
tokens are already part of its output tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from app.engine.agent import AgentUsage
from app.runtime.streamjson.lines import compact_json, tool_line
from app.runtime.streamjson.usage import count, figures, uncached
from app.runtime.streamjson.writer import CYAN, GREEN, RED, Handler, Writer

__all__ = ["CODEX_FAILED", "CodexEvents", "codex_turn_usage"]

# codex command_execution statuses that mean the command did not succeed.
CODEX_FAILED: Final = frozenset({"failed", "declined"})


def codex_turn_usage(event: Mapping[str, object]) -> AgentUsage:
    """Figures from codex's `turn.completed`: usage.input_tokens (cached included),
    cached_input_tokens, output_tokens; codex reports no cost."""
    raw = event.get("usage")
    usage = raw if isinstance(raw, dict) else {}
    return AgentUsage(
        input_tokens=uncached(usage.get("input_tokens"), usage.get("cached_input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
    )


class CodexEvents:
    """codex's vocabulary, with the ids of the items whose start line was written."""

    SILENT: ClassVar[frozenset[str]] = frozenset(
        {"thread.started", "turn.started", "item.plan.delta"}
    )

    def __init__(self, out: Writer) -> None:
        self._out = out
        self._items_shown: set[str] = set()  # item ids whose start line was written

    def handlers(self) -> Mapping[str, Handler]:
        """item.started/.updated/.completed, turn.completed and turn.failed."""
        return {
            "item.started": self._on_item,
            "item.updated": self._on_item,
            "item.completed": self._on_item,
            "turn.completed": self._on_turn_completed,
            "turn.failed": self._on_turn_failed,
        }

    def _on_item(self, event: dict[str, object]) -> bool:
        item = event.get("item")
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            return False
        kind = item["type"]
        done = event.get("type") == "item.completed"
        item_id = item.get("id")
        key = item_id if isinstance(item_id, str) else None
        if kind == "agent_message":
            text = item.get("text")
            if done and isinstance(text, str):
                self._out.prose_block(text)
        elif kind == "command_execution":
            self._command(key, item, done=done)
        elif kind == "file_change":
            if done:
                self._file_change(item)
        elif kind == "mcp_tool_call":
            self._mcp_tool_call(key, item, done=done)
        elif kind == "web_search":
            self._start(key, tool_line("web_search", {"pattern": item.get("query")}))
        elif kind == "error":
            message = item.get("message")
            self._out.emit(
                f"warning: {message if isinstance(message, str) else compact_json(item)}"
            )
        # reasoning, plan, todo_list, collab tool calls: nothing to show
        return True

    def _command(self, key: str | None, item: dict[str, object], *, done: bool) -> None:
        self._start(key, tool_line("shell", {"command": item.get("command")}))
        status = item.get("status")
        if status in CODEX_FAILED or (done and status != "in_progress"):
            exit_code = item.get("exit_code")
            failed = status in CODEX_FAILED or (isinstance(exit_code, int) and exit_code != 0)
            self._out.tool_result(item.get("aggregated_output"), is_error=failed)

    def _mcp_tool_call(self, key: str | None, item: dict[str, object], *, done: bool) -> None:
        name = f"{item.get('server')}.{item.get('tool')}"
        self._start(key, tool_line(name, item.get("arguments")))
        error = item.get("error")
        result = item.get("result")
        if isinstance(error, dict):
            self._out.tool_result(error.get("message"), is_error=True)
        elif done and isinstance(result, dict):
            self._out.tool_result(result.get("content"), is_error=False)

    def _start(self, item_id: str | None, line: str) -> None:
        """Write an item's tool line once, however many of its events arrive."""
        if item_id is not None:
            if item_id in self._items_shown:
                return
            self._items_shown.add(item_id)
        self._out.emit(line, CYAN)

    def _file_change(self, item: dict[str, object]) -> None:
        changes = item.get("changes")
        for change in changes if isinstance(changes, list) else []:
            if isinstance(change, dict):
                self._out.emit(tool_line(change.get("kind"), {"path": change.get("path")}), CYAN)
        if item.get("status") == "failed":
            self._out.tool_result("patch failed", is_error=True)

    def _on_turn_completed(self, event: dict[str, object]) -> bool:
        usage = codex_turn_usage(event)
        self._out.add_usage(usage)
        self._out.emit(f"✓ turn completed · {figures(usage)}", GREEN)
        return True

    def _on_turn_failed(self, event: dict[str, object]) -> bool:
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        text = message if isinstance(message, str) else compact_json(error)
        self._out.emit(f"✗ turn failed: {text}", RED)
        return True
