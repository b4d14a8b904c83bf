"""Render an agent's stream-json stdout as readable lines (docs/runtime.md).

Agents whose adapter sets `emits_stream_json` print one JSON event per stdout line: claude with
`-p --output-format stream-json --verbose --include-partial-messages`, opencode with
`run --format json`, codex with `exec --json`, gemini with `--output-format stream-json`, and
cursor with `-p --output-format stream-json` (claude's envelope plus its own `tool_call`).
`StreamJsonRenderer` reads those lines and writes polished output through a line sink; the
runtime keeps the raw lines for `AgentSpawnResult.stdout` untouched (a `str` is immutable and
the renderer only reads JSON it parsed itself), so the transcript the engine maps to an
outcome is byte-identical with or without rendering.

The dispatch is multi-schema, not agent-named: the envelopes are read side by side, and where
two agents share a top-level type the event's shape decides (noted below).

    top-level type            what is written
    ------------------------  --------------------------------------------------------------
    system, rate_limit_event  nothing (claude control noise)
    stream_event              text_delta prose, streamed line by line; every other partial
                              event is silent (the `assistant` snapshot carries it)
    assistant                 text items as prose, unless already streamed (see "Dedup");
                              tool_use items as "▸ <name> <target>"
    user                      tool_result items, cut to 200 characters / 3 lines; an error
                              result is marked "✗" (red with color)
    result                    "✓ success · in N · out N · $X" or "✗ error (<subtype>) · ..."
    step_start                nothing (opencode control noise), when part.type is step-start
    text                      opencode prose (part.text), when part.type is text
    step_finish               "✓ step finished (<reason>) · in N · out N · $X"; the reason
                              "error" is flagged "✗ step failed (error)"
    tool_use                  opencode tool call (part.type tool): "▸ <tool> <target>" and its
                              output or error, like claude's tool_use + tool_result
    error                     opencode session error (an `error` object): "✗ error: <name>:
                              <message>"; codex or gemini error (a `message` string):
                              "✗ error: <message>", or "warning: <message>" for gemini's
                              severity "warning"
    --- codex (`exec --json`, codex-rs/exec/src/exec_events.rs in openai/codex)
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
    --- gemini (`--output-format stream-json`, packages/core/src/output/types.ts in
        google-gemini/gemini-cli)
    init                      nothing
    message                   assistant content as prose (`delta: true` chunks streamed); the
                              user's own message nothing
    tool_use (with tool_name) "▸ <tool_name> <target>"
    tool_result               its output, or "✗" and error.message when status is "error"
    result (with stats or status, no subtype)   "✓ success · …" or "✗ error (<message>) · …"
                              from stats (input_tokens, cached, input, output_tokens; gemini
                              reports no cost)
    --- cursor (`-p --output-format stream-json`, Cursor's headless docs; untested)
    tool_call                 "▸ <tool>" when started (the `<name>ToolCall` key, its args'
                              target), its result when completed
    anything else             the raw line; also a known opencode type whose part.type is
                              not the expected one, a non-object, or a shape not recognised

`tool_use` and `error` are not in the seed's table: they are the events `opencode run --format
json` emits for tool calls and session errors (packages/opencode/src/cli/cmd/run.ts in
sst/opencode), and printing them raw would bury the run in JSON.

The sink. `write` receives exactly one output line per call, without a trailing newline; a
line never contains "\\n" (a raw line holding one is written as several lines).

Flushing. Prose is buffered only up to the next newline: a text delta writes every line it
completes at once and keeps the unfinished tail. That tail is written as a line, never dropped
or written twice, when the prose block ends: at claude's content_block_stop, message_start or
message_stop, when another prose block starts (an `assistant` text item or an opencode `text`
part, each a whole block of its own), before any other line is written, and on `close()`.
Events that write nothing (system, ping, tool-input deltas, ...) leave the tail pending, so a
ping between two deltas does not split a line.

Dedup. With --include-partial-messages claude sends each text block twice: as deltas, then in
the `assistant` snapshot of the same message. The text items of an `assistant` message are
skipped when text deltas were seen for that message: its `message.id` matches the id announced
by a `message_start` whose deltas were streamed, or, when either side has no id, text deltas
were streamed since the latest `message_start`. Its tool_use items are always written. An
opencode text part is written once per part id.

`text` is the prose, exactly as written: each prose block ends with a newline (one is added
when the block did not end with one). `usage` sums every claude or gemini `result`, opencode
`step_finish` and codex `turn.completed` event; a figure never reported stays `None`
(unknown), never zero: codex and gemini report no cost, so theirs stays unknown, and an
opencode step that spent tokens at a cost of exactly 0 ran a model opencode has no price for
(see `opencode_step_usage`), so its cost is unknown too. Input tokens
exclude cache reads and writes: claude and opencode report them apart, codex's
`input_tokens` and gemini's `input_tokens` include the cached part, which is subtracted
(gemini's `input` is that figure already). opencode's reasoning tokens count as output
tokens, as claude's thinking tokens and codex's reasoning tokens already do. Numbers that are
not non-negative (finite) numbers are ignored as unknown.

Sources for the event shapes: Claude Code's headless docs and Agent SDK message types
(SDKPartialAssistantMessage, SDKResultMessage: `total_cost_usd`, `usage`, `is_error`,
`subtype`); opencode's run.ts (`emit("step_start" | "text" | "tool_use" | "step_finish" |
"error", ...)`) and its message part types (StepFinishPart.tokens: input, output, reasoning,
cache.read, cache.write; ToolPart.state: status, input, output, error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Final

from app.engine.agent import AgentUsage

# Keys naming what a tool acts on, in preference order. `filePath` is opencode's spelling of
# claude's `file_path` (opencode's read/edit/write tools).
TARGET_FIELDS: Final = ("file_path", "filePath", "path", "command", "pattern", "url")
RESULT_MAX_CHARS: Final = 200
RESULT_MAX_LINES: Final = 3
TARGET_MAX_CHARS: Final = 120
# opencode step-finish reasons are the AI SDK's finish reasons; only "error" is a failure
# ("length", "tool-calls", "stop", ... end a step normally).
OPENCODE_ERROR_REASONS: Final = frozenset({"error"})

TOOL_GLYPH: Final = "▸"
RESULT_GLYPH: Final = "  ⎿ "
ERROR_GLYPH: Final = "  ✗ "
RESULT_INDENT: Final = "    "
ELLIPSIS: Final = "…"

_RED: Final = "31"
_GREEN: Final = "32"
_CYAN: Final = "36"
_DIM: Final = "2"

# Control noise, skipped whatever its shape: claude's, codex's and gemini's.
_SILENT_TYPES: Final = frozenset(
    {"system", "rate_limit_event", "thread.started", "turn.started", "item.plan.delta", "init"}
)
# codex command_execution statuses that mean the command did not succeed.
CODEX_FAILED: Final = frozenset({"failed", "declined"})
# Partial events that close a prose block.
_BLOCK_BOUNDARIES: Final = frozenset({"content_block_stop", "message_start", "message_stop"})


# --- pure helpers: values in, values out -------------------------------------------------------


def count(value: object) -> int | None:
    """A token count, or None unless `value` is a non-negative integer (bool is not one)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def dollars(value: object) -> float | None:
    """A cost in USD, or None unless `value` is a finite non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        amount = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return amount if math.isfinite(amount) and amount >= 0 else None


def _plus_int(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


def _plus_float(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else a + b


def add_usage(a: AgentUsage, b: AgentUsage) -> AgentUsage:
    """Sum two usages field by field; unknown plus unknown stays unknown."""
    return AgentUsage(
        input_tokens=_plus_int(a.input_tokens, b.input_tokens),
        output_tokens=_plus_int(a.output_tokens, b.output_tokens),
        cost_usd=_plus_float(a.cost_usd, b.cost_usd),
    )


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


def _uncached(total: object, cached: object) -> int | None:
    """Input tokens without the cached part, when both figures are known and consistent."""
    whole = count(total)
    part = count(cached)
    if whole is None:
        return None
    if part is None:
        return whole if cached is None else None
    return whole - part if part <= whole else None


def codex_turn_usage(event: Mapping[str, object]) -> AgentUsage:
    """Figures from codex's `turn.completed`: usage.input_tokens (cached included),
    cached_input_tokens, output_tokens; codex reports no cost."""
    raw = event.get("usage")
    usage = raw if isinstance(raw, dict) else {}
    return AgentUsage(
        input_tokens=_uncached(usage.get("input_tokens"), usage.get("cached_input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
    )


def gemini_result_usage(event: Mapping[str, object]) -> AgentUsage:
    """Figures from gemini's `result`: stats.input (uncached input), else input_tokens less
    cached, and output_tokens; gemini reports no cost."""
    raw = event.get("stats")
    stats = raw if isinstance(raw, dict) else {}
    uncached = count(stats.get("input"))
    if uncached is None:
        uncached = _uncached(stats.get("input_tokens"), stats.get("cached"))
    return AgentUsage(input_tokens=uncached, output_tokens=count(stats.get("output_tokens")))


def figures(usage: AgentUsage, reasoning: int | None = None) -> str:
    """`in 1,200 · out 350 (incl. 50 reasoning) · $0.0031`; `?` marks an unknown figure."""

    def tokens(n: int | None) -> str:
        return "?" if n is None else f"{n:,}"

    out = tokens(usage.output_tokens)
    if reasoning:
        out += f" (incl. {reasoning:,} reasoning)"
    cost = "$?" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return f"in {tokens(usage.input_tokens)} · out {out} · {cost}"


def compact_json(value: object) -> str:
    """One-line JSON for a parsed value (never raises on what json.loads returns)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def tool_target(tool_input: object) -> str | None:
    """The first of TARGET_FIELDS holding a non-empty string: its first line, shortened."""
    if not isinstance(tool_input, dict):
        return None
    for key in TARGET_FIELDS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            lines = value.strip().splitlines()
            first = lines[0]
            if len(first) > TARGET_MAX_CHARS or len(lines) > 1:
                return first[:TARGET_MAX_CHARS] + ELLIPSIS
            return first
    return None


def tool_line(name: object, tool_input: object) -> str:
    """`▸ Read src/app.py`: glyph, tool name and its target when one is found."""
    label = name if isinstance(name, str) and name else "tool"
    target = tool_target(tool_input)
    return f"{TOOL_GLYPH} {label}" if target is None else f"{TOOL_GLYPH} {label} {target}"


def result_text(content: object) -> str:
    """The text of a tool result: a string, or a list of text (and image) blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for block in content:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str):
                pieces.append(text)
            elif isinstance(block, dict) and block.get("type") == "image":
                pieces.append("[image]")
            elif isinstance(block, str):
                pieces.append(block)
            else:
                pieces.append(compact_json(block))
        return "\n".join(pieces)
    return compact_json(content)


def tool_result_lines(content: object, *, is_error: bool) -> list[str]:
    """A tool result cut to RESULT_MAX_CHARS characters and RESULT_MAX_LINES lines."""
    text = result_text(content).strip("\n")
    all_lines = text.splitlines()
    lines = text[:RESULT_MAX_CHARS].splitlines()[:RESULT_MAX_LINES]
    if not lines:
        lines = ["(no output)"]
    elif len(text) > RESULT_MAX_CHARS or len(all_lines) > RESULT_MAX_LINES:
        lines[-1] += ELLIPSIS
    first = ERROR_GLYPH if is_error else RESULT_GLYPH
    return [first + lines[0]] + [RESULT_INDENT + line for line in lines[1:]]


# --- the renderer: a thin stateful shell over the helpers above -------------------------------


class StreamJsonRenderer:
    """Render claude / opencode stream-json lines; see the module docstring for every rule.

    `feed` takes one stdout line (a trailing newline is ignored), `close` writes a pending
    partial prose line. Neither raises on any input; only an exception from `write` escapes.
    """

    def __init__(self, write: Callable[[str], None], *, color: bool = False) -> None:
        self._write = write
        self._color = color
        self._pending = ""  # the unfinished last line of the current prose block
        self._text: list[str] = []
        self._usage = AgentUsage()
        # Dedup state for claude's partial messages.
        self._current_id: str | None = None  # id from the latest message_start, if it had one
        self._current_streamed = False  # text deltas seen since the latest message_start
        self._streamed_ids: set[str] = set()  # message ids whose text was streamed as deltas
        self._seen_parts: set[str] = set()  # opencode text part ids already written
        self._items_shown: set[str] = set()  # codex item ids whose start line was written

    @property
    def usage(self) -> AgentUsage:
        """Tokens and cost summed over every `result` / `step_finish`; None when never seen."""
        return self._usage

    @property
    def text(self) -> str:
        """The assistant prose so far (a pending partial line included); blocks end with "\n"."""
        return "".join(self._text)

    def feed(self, line: str) -> None:
        """Render one stdout line."""
        raw = line.rstrip("\r\n")
        if not raw.strip():
            return  # a blank line carries nothing
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
            self._raw(raw)
            return
        if not (isinstance(event, dict) and self._dispatch(event)):
            self._raw(raw)

    def close(self) -> None:
        """Write the pending partial prose line, if any."""
        self._end_prose()

    # -- dispatch: each handler returns False when it does not recognise the shape ------------

    def _dispatch(self, event: dict[str, object]) -> bool:
        kind = event.get("type")
        if not isinstance(kind, str):
            return False
        if kind in _SILENT_TYPES:
            return True
        handler = self._HANDLERS.get(kind)
        return handler is not None and handler(self, event)

    def _on_stream_event(self, event: dict[str, object]) -> bool:
        inner = event.get("event")
        if not isinstance(inner, dict):
            return False
        kind = inner.get("type")
        if isinstance(kind, str) and kind in _BLOCK_BOUNDARIES:  # any JSON value may arrive
            self._end_prose()
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
                    self._prose(chunk)
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
                self._prose_block(text)
            elif kind == "tool_use":
                self._emit(tool_line(item.get("name"), item.get("input")), _CYAN)
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
                self._tool_result(item.get("content"), is_error=item.get("is_error") is True)
        return True

    def _on_result(self, event: dict[str, object]) -> bool:
        if "subtype" not in event and ("stats" in event or "status" in event):
            return self._on_gemini_result(event)
        usage = claude_result_usage(event)
        self._usage = add_usage(self._usage, usage)
        subtype = event.get("subtype")
        # A usage-limit stop arrives as subtype "success" with is_error true: is_error wins.
        failed = event.get("is_error") is True or (
            isinstance(subtype, str) and subtype != "success"
        )
        if failed:
            detail = f" ({subtype})" if isinstance(subtype, str) and subtype != "success" else ""
            self._emit(f"✗ error{detail} · {figures(usage)}", _RED)
        else:
            self._emit(f"✓ success · {figures(usage)}", _GREEN)
        return True

    def _on_step_start(self, event: dict[str, object]) -> bool:
        return self._part(event, "step-start") is not None

    def _on_text(self, event: dict[str, object]) -> bool:
        part = self._part(event, "text")
        text = None if part is None else part.get("text")
        if part is None or not isinstance(text, str):
            return False
        part_id = part.get("id")
        if isinstance(part_id, str):
            if part_id in self._seen_parts:
                return True
            self._seen_parts.add(part_id)
        self._prose_block(text)
        return True

    def _on_step_finish(self, event: dict[str, object]) -> bool:
        part = self._part(event, "step-finish")
        if part is None:
            return False
        usage, reasoning = opencode_step_usage(part)
        self._usage = add_usage(self._usage, usage)
        reason = part.get("reason")
        detail = f" ({reason})" if isinstance(reason, str) and reason else ""
        if reason in OPENCODE_ERROR_REASONS:
            self._emit(f"✗ step failed{detail} · {figures(usage, reasoning)}", _RED)
        else:
            self._emit(f"✓ step finished{detail} · {figures(usage, reasoning)}", _GREEN)
        return True

    def _on_tool_use(self, event: dict[str, object]) -> bool:
        if "part" not in event and isinstance(event.get("tool_name"), str):
            # gemini: {tool_name, tool_id, parameters}
            self._emit(tool_line(event["tool_name"], event.get("parameters")), _CYAN)
            return True
        part = self._part(event, "tool")
        if part is None:
            return False
        raw_state = part.get("state")
        state = raw_state if isinstance(raw_state, dict) else {}
        self._emit(tool_line(part.get("tool"), state.get("input")), _CYAN)
        status = state.get("status")
        if status == "completed":
            self._tool_result(state.get("output"), is_error=False)
        elif status == "error":
            self._tool_result(state.get("error"), is_error=True)
        return True

    def _on_error(self, event: dict[str, object]) -> bool:
        error = event.get("error")
        text = event.get("message")
        if not isinstance(error, dict) and isinstance(text, str):
            # codex {message}, gemini {severity, message}
            if event.get("severity") == "warning":
                self._emit(f"warning: {text}")
            else:
                self._emit(f"✗ error: {text}", _RED)
            return True
        if not isinstance(error, dict):
            return False
        name = error.get("name")
        data = error.get("data")
        message = data.get("message") if isinstance(data, dict) else None
        if message is None:
            message = error.get("message")
        words = [w for w in (name, message) if isinstance(w, str) and w]
        self._emit("✗ error: " + (": ".join(words) if words else compact_json(error)), _RED)
        return True

    # -- gemini ----------------------------------------------------------------------------

    def _on_message(self, event: dict[str, object]) -> bool:
        content = event.get("content")
        role = event.get("role")
        if not isinstance(content, str) or role not in ("user", "assistant"):
            return False
        if role == "assistant" and content:
            if event.get("delta") is True:
                self._prose(content)
            else:
                self._prose_block(content)
        return True

    def _on_tool_result(self, event: dict[str, object]) -> bool:
        status = event.get("status")
        if status == "error":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self._tool_result(message if message is not None else error, is_error=True)
            return True
        if status == "success":
            self._tool_result(event.get("output"), is_error=False)
            return True
        return False

    def _on_gemini_result(self, event: dict[str, object]) -> bool:
        usage = gemini_result_usage(event)
        self._usage = add_usage(self._usage, usage)
        if event.get("status") == "success":
            self._emit(f"✓ success · {figures(usage)}", _GREEN)
            return True
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        detail = f" ({message})" if isinstance(message, str) and message else ""
        self._emit(f"✗ error{detail} · {figures(usage)}", _RED)
        return True

    # -- codex -----------------------------------------------------------------------------

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
                self._prose_block(text)
        elif kind == "command_execution":
            self._codex_start(key, tool_line("shell", {"command": item.get("command")}))
            status = item.get("status")
            if status in CODEX_FAILED or (done and status != "in_progress"):
                exit_code = item.get("exit_code")
                failed = status in CODEX_FAILED or (isinstance(exit_code, int) and exit_code != 0)
                self._tool_result(item.get("aggregated_output"), is_error=failed)
        elif kind == "file_change":
            if done:
                self._codex_file_change(item)
        elif kind == "mcp_tool_call":
            name = f"{item.get('server')}.{item.get('tool')}"
            self._codex_start(key, tool_line(name, item.get("arguments")))
            error = item.get("error")
            result = item.get("result")
            if isinstance(error, dict):
                self._tool_result(error.get("message"), is_error=True)
            elif done and isinstance(result, dict):
                self._tool_result(result.get("content"), is_error=False)
        elif kind == "web_search":
            self._codex_start(key, tool_line("web_search", {"pattern": item.get("query")}))
        elif kind == "error":
            message = item.get("message")
            self._emit(f"warning: {message if isinstance(message, str) else compact_json(item)}")
        # reasoning, plan, todo_list, collab tool calls: nothing to show
        return True

    def _codex_start(self, item_id: str | None, line: str) -> None:
        """Write an item's tool line once, however many of its events arrive."""
        if item_id is not None:
            if item_id in self._items_shown:
                return
            self._items_shown.add(item_id)
        self._emit(line, _CYAN)

    def _codex_file_change(self, item: dict[str, object]) -> None:
        changes = item.get("changes")
        for change in changes if isinstance(changes, list) else []:
            if isinstance(change, dict):
                self._emit(tool_line(change.get("kind"), {"path": change.get("path")}), _CYAN)
        if item.get("status") == "failed":
            self._tool_result("patch failed", is_error=True)

    def _on_turn_completed(self, event: dict[str, object]) -> bool:
        usage = codex_turn_usage(event)
        self._usage = add_usage(self._usage, usage)
        self._emit(f"✓ turn completed · {figures(usage)}", _GREEN)
        return True

    def _on_turn_failed(self, event: dict[str, object]) -> bool:
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        text = message if isinstance(message, str) else compact_json(error)
        self._emit(f"✗ turn failed: {text}", _RED)
        return True

    # -- cursor ----------------------------------------------------------------------------

    def _on_tool_call(self, event: dict[str, object]) -> bool:
        call = event.get("tool_call")
        if not isinstance(call, dict) or len(call) != 1:
            return False
        ((key, body),) = call.items()
        if not isinstance(body, dict):
            return False
        name = key.removesuffix("ToolCall") or key
        if event.get("subtype") == "started":
            self._emit(tool_line(name, body.get("args")), _CYAN)
            return True
        result = body.get("result")
        if isinstance(result, dict) and isinstance(result.get("success"), dict):
            self._tool_result(result["success"].get("content"), is_error=False)
        elif isinstance(result, dict) and "error" in result:
            error = result["error"]
            message = error.get("message") if isinstance(error, dict) else error
            self._tool_result(message, is_error=True)
        return True

    _HANDLERS: Final[Mapping[str, Callable[[StreamJsonRenderer, dict[str, object]], bool]]] = {
        "stream_event": _on_stream_event,
        "assistant": _on_assistant,
        "user": _on_user,
        "result": _on_result,
        "step_start": _on_step_start,
        "text": _on_text,
        "step_finish": _on_step_finish,
        "tool_use": _on_tool_use,
        "error": _on_error,
        "message": _on_message,
        "tool_result": _on_tool_result,
        "item.started": _on_item,
        "item.updated": _on_item,
        "item.completed": _on_item,
        "turn.completed": _on_turn_completed,
        "turn.failed": _on_turn_failed,
        "tool_call": _on_tool_call,
    }

    # -- output -----------------------------------------------------------------------------

    @staticmethod
    def _part(event: dict[str, object], part_type: str) -> dict[str, object] | None:
        """opencode's `part` when it is an object of the expected part.type, else None."""
        part = event.get("part")
        if isinstance(part, dict) and part.get("type") == part_type:
            return part
        return None

    def _prose(self, chunk: str) -> None:
        """Add prose: write every line it completes, keep the unfinished tail pending."""
        self._text.append(chunk)
        *complete, self._pending = (self._pending + chunk).split("\n")
        for line in complete:
            self._write(line)

    def _prose_block(self, text: str) -> None:
        """A whole prose block: it starts on a line of its own and ends its last line."""
        self._end_prose()
        self._prose(text)
        self._end_prose()

    def _end_prose(self) -> None:
        """End the prose block: write its unfinished tail as a line of its own."""
        if self._pending:
            self._write(self._pending)
            self._text.append("\n")
            self._pending = ""

    def _tool_result(self, content: object, *, is_error: bool) -> None:
        for line in tool_result_lines(content, is_error=is_error):
            self._emit(line, _RED if is_error else _DIM)

    def _emit(self, line: str, style: str | None = None) -> None:
        """Write a non-prose line (after ending any prose block), one call per line."""
        self._end_prose()
        for piece in line.split("\n"):
            if self._color and style is not None:
                self._write(f"\x1b[{style}m{piece}\x1b[0m")
            else:
                self._write(piece)

    def _raw(self, raw: str) -> None:
        self._emit(raw)
