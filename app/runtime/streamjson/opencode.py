"""opencode's events (`run --format json`).

    top-level type            what is written
    ------------------------  --------------------------------------------------------------
    step_start                nothing (control noise), when part.type is step-start
    text                      prose (part.text), when part.type is text; once per part id
    step_finish               "✓ step finished (<reason>) · in N · out N · $X"; the reason
                              "error" is flagged "✗ step failed (error)"
    tool_use                  a tool call (part.type tool): "▸ <tool> <target>" and its
                              output or error, like claude's tool_use + tool_result
                              (a `tool_use` with tool_name and no part is gemini's)
    error                     a session error (an `error` object): "✗ error: <name>:
                              <message>" (an `error` with a `message` string is gemini's or
                              codex's)

A known type whose part.type is not the expected one is written raw. `tool_use` and `error`
are the events `opencode run --format json` emits for tool calls and session errors
(packages/opencode/src/cli/cmd/run.ts in sst/opencode); printing them raw would bury the run in
JSON. Usage: input tokens exclude cache reads and writes (opencode reports them apart);
reasoning tokens count as output tokens; a cost of exactly 0 for a step that spent tokens is
unknown (`opencode_step_usage`). Sources: run.ts (`emit("step_start" | "text" | "tool_use" |
"step_finish" | "error", ...)`) and its message part types (StepFinishPart.tokens: input,
output, reasoning, cache.read, cache.write; ToolPart.state: status, input, output, error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from app.engine.agent import AgentUsage
from app.runtime.streamjson.lines import compact_json, tool_line
from app.runtime.streamjson.usage import count, dollars, figures
from app.runtime.streamjson.writer import CYAN, GREEN, RED, Handler, Writer

__all__ = ["OPENCODE_ERROR_REASONS", "OpencodeEvents", "opencode_step_usage"]

# opencode step-finish reasons are the AI SDK's finish reasons; only "error" is a failure
# ("length", "tool-calls", "stop", ... end a step normally).
OPENCODE_ERROR_REASONS: Final = frozenset({"error"})


def _tokens_spent(tokens: Mapping[str, object]) -> bool:
    """Whether an opencode step's token counts (input, output, reasoning, cache) add up to >0."""
    raw_cache = tokens.get("cache")
    cache = raw_cache if isinstance(raw_cache, dict) else {}
    counts = [tokens.get(k) for k in ("input", "output", "reasoning")]
    counts += [cache.get("read"), cache.get("write")]
    return any((count(n) or 0) > 0 for n in counts)


def opencode_step_usage(part: Mapping[str, object]) -> tuple[AgentUsage, int | None]:
    """Figures from an opencode step-finish part, and its reasoning tokens (part of output).

    A cost of 0 for a step that spent tokens is unknown, not free. opencode 1.18.33 prices a
    step itself, from the model's configured `cost` (its binary: the provider loader turns a
    missing `cost.input`/`output`/`cache_read`/`cache_write` into 0, and the session's usage
    is tokens x those prices / 1e6), and its step-finish part has no field saying the model
    had no price. So a provider without pricing (an OpenAI-compatible gateway, a local model)
    reports exactly 0 for any number of tokens; a priced model cannot, as its tokens cost
    something. A 0 for a step that spent no token is exact whatever the prices, and stays.
    """
    raw = part.get("tokens")
    tokens = raw if isinstance(raw, dict) else {}
    output = count(tokens.get("output"))
    reasoning = count(tokens.get("reasoning"))
    if output is not None and reasoning is not None:
        output += reasoning
    cost = dollars(part.get("cost"))
    if cost == 0 and _tokens_spent(tokens):
        cost = None
    return (
        AgentUsage(
            input_tokens=count(tokens.get("input")),
            output_tokens=output,
            cost_usd=cost,
        ),
        reasoning,
    )


def _part(event: dict[str, object], part_type: str) -> dict[str, object] | None:
    """opencode's `part` when it is an object of the expected part.type, else None."""
    part = event.get("part")
    if isinstance(part, dict) and part.get("type") == part_type:
        return part
    return None


class OpencodeEvents:
    """opencode's vocabulary, with the ids of the text parts already written."""

    SILENT: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, out: Writer) -> None:
        self._out = out
        self._seen_parts: set[str] = set()  # text part ids already written

    def handlers(self) -> Mapping[str, Handler]:
        """step_start, text, step_finish, tool_use and error."""
        return {
            "step_start": self._on_step_start,
            "text": self._on_text,
            "step_finish": self._on_step_finish,
            "tool_use": self._on_tool_use,
            "error": self._on_error,
        }

    def _on_step_start(self, event: dict[str, object]) -> bool:
        return _part(event, "step-start") is not None

    def _on_text(self, event: dict[str, object]) -> bool:
        part = _part(event, "text")
        text = None if part is None else part.get("text")
        if part is None or not isinstance(text, str):
            return False
        part_id = part.get("id")
        if isinstance(part_id, str):
            if part_id in self._seen_parts:
                return True
            self._seen_parts.add(part_id)
        self._out.prose_block(text)
        return True

    def _on_step_finish(self, event: dict[str, object]) -> bool:
        part = _part(event, "step-finish")
        if part is None:
            return False
        usage, reasoning = opencode_step_usage(part)
        self._out.add_usage(usage)
        reason = part.get("reason")
        detail = f" ({reason})" if isinstance(reason, str) and reason else ""
        if reason in OPENCODE_ERROR_REASONS:
            self._out.emit(f"✗ step failed{detail} · {figures(usage, reasoning)}", RED)
        else:
            self._out.emit(f"✓ step finished{detail} · {figures(usage, reasoning)}", GREEN)
        return True

    def _on_tool_use(self, event: dict[str, object]) -> bool:
        part = _part(event, "tool")
        if part is None:
            return False
        raw_state = part.get("state")
        state = raw_state if isinstance(raw_state, dict) else {}
        self._out.emit(tool_line(part.get("tool"), state.get("input")), CYAN)
        status = state.get("status")
        if status == "completed":
            self._out.tool_result(state.get("output"), is_error=False)
        elif status == "error":
            self._out.tool_result(state.get("error"), is_error=True)
        return True

    def _on_error(self, event: dict[str, object]) -> bool:
        error = event.get("error")
        if not isinstance(error, dict):
            return False
        name = error.get("name")
        data = error.get("data")
        message = data.get("message") if isinstance(data, dict) else None
        if message is None:
            message = error.get("message")
        words = [w for w in (name, message) if isinstance(w, str) and w]
        self._out.emit("✗ error: " + (": ".join(words) if words else compact_json(error)), RED)
        return True
