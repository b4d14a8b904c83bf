"""The stream-json renderer on codex's, gemini's and cursor's streams: text, tools, usage.

Event shapes, from each CLI's own source or output:

- codex (`codex exec --json`): `ThreadEvent` in codex-rs/exec/src/exec_events.rs of
  https://github.com/openai/codex (thread.started, turn.started, turn.completed {usage:
  input_tokens, cached_input_tokens, output_tokens}, turn.failed {error: {message}},
  item.started / item.updated / item.completed {item: {id, type, ...}}, error {message}); the
  lines marked "captured" were printed by codex 0.171.0 itself, offline.
- gemini (`gemini --output-format stream-json`): packages/core/src/output/types.ts of
  https://github.com/google-gemini/gemini-cli (init, message {role, content, delta},
  tool_use {tool_name, tool_id, parameters}, tool_result {tool_id, status, output, error},
  error {severity, message}, result {status, error, stats}) and `convertToStreamStats` in the
  0.61.0 bundle (stats: total_tokens, input_tokens, output_tokens, cached, input, duration_ms,
  tool_calls, models).
- cursor (`cursor-agent -p --output-format stream-json`): Cursor's headless docs (claude's
  envelope, plus `tool_call` {subtype started | completed, call_id, tool_call: {<name>ToolCall:
  {args, result}}}); not checked against a real binary.
"""

from __future__ import annotations

import json

import pytest

from app.engine.agent import AgentUsage
from app.runtime.streamjson import StreamJsonRenderer


def render(*events: object) -> tuple[list[str], StreamJsonRenderer]:
    out: list[str] = []
    renderer = StreamJsonRenderer(out.append)
    for event in events:
        renderer.feed(event if isinstance(event, str) else json.dumps(event))
    renderer.close()
    return out, renderer


# --- codex --------------------------------------------------------------------------------

CODEX_CAPTURED = [
    '{"type":"thread.started","thread_id":"01a233f1-c5b0-73e0-ab0d-a8a1adbf7621"}',
    '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata '
    "for `m1` not found. Defaulting to fallback metadata; this can degrade performance and "
    'cause issues."}}',
    '{"type":"turn.started"}',
    '{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion: '
    'Connection refused (os error 111))"}',
]


def test_codex_captured_offline_stream() -> None:
    out, renderer = render(*CODEX_CAPTURED)
    assert out == [
        "warning: Model metadata for `m1` not found. Defaulting to fallback metadata; this can "
        "degrade performance and cause issues.",
        "✗ error: Reconnecting... 2/5 (stream disconnected before completion: Connection "
        "refused (os error 111))",
    ]
    assert renderer.usage == AgentUsage()


def _item(kind: str, item: dict[str, object]) -> dict[str, object]:
    return {"type": kind, "item": item}


def test_codex_turn_text_tools_and_usage() -> None:
    command = {
        "id": "item_1",
        "type": "command_execution",
        "command": "bash -lc 'pytest -q'",
        "aggregated_output": "",
        "exit_code": None,
        "status": "in_progress",
    }
    out, renderer = render(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        _item("item.completed", {"id": "item_0", "type": "reasoning", "text": "**Planning**"}),
        _item("item.started", command),
        _item("item.updated", command),
        _item(
            "item.completed",
            {**command, "aggregated_output": "1 passed\n", "exit_code": 0, "status": "completed"},
        ),
        _item(
            "item.completed",
            {
                "id": "item_2",
                "type": "file_change",
                "changes": [{"path": "src/app.py", "kind": "update"}],
                "status": "completed",
            },
        ),
        _item(
            "item.started",
            {"id": "item_3", "type": "todo_list", "items": [{"text": "x", "completed": False}]},
        ),
        _item("item.completed", {"id": "item_4", "type": "agent_message", "text": "Done.\n"}),
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 200},
        },
    )
    assert out == [
        "▸ shell bash -lc 'pytest -q'",
        "  ⎿ 1 passed",
        "▸ update src/app.py",
        "Done.",
        "✓ turn completed · in 1,200 · out 200 · $?",
    ]
    assert renderer.text == "Done.\n"
    assert renderer.usage == AgentUsage(input_tokens=1200, output_tokens=200, cost_usd=None)


def test_codex_failures_are_marked() -> None:
    out, _ = render(
        _item(
            "item.completed",
            {
                "id": "c",
                "type": "command_execution",
                "command": "false",
                "aggregated_output": "boom",
                "exit_code": 1,
                "status": "failed",
            },
        ),
        _item(
            "item.completed",
            {
                "id": "d",
                "type": "command_execution",
                "command": "rm -rf /",
                "aggregated_output": "",
                "exit_code": None,
                "status": "declined",
            },
        ),
        _item(
            "item.completed",
            {"id": "f", "type": "file_change", "changes": "odd", "status": "failed"},
        ),
        {"type": "turn.failed", "error": {"message": "usage limit reached"}},
        {"type": "turn.failed", "error": "odd"},
    )
    assert out == [
        "▸ shell false",
        "  ✗ boom",
        "▸ shell rm -rf /",
        "  ✗ (no output)",
        "  ✗ patch failed",
        "✗ turn failed: usage limit reached",
        '✗ turn failed: "odd"',
    ]


def test_codex_mcp_web_search_and_odd_items() -> None:
    call = {
        "id": "m",
        "type": "mcp_tool_call",
        "server": "docs",
        "tool": "lookup",
        "arguments": {"pattern": "retry"},
        "result": None,
        "error": None,
        "status": "in_progress",
    }
    out, _ = render(
        _item("item.started", call),
        _item(
            "item.completed",
            {
                **call,
                "result": {"content": [{"type": "text", "text": "found"}]},
                "status": "completed",
            },
        ),
        _item(
            "item.completed",
            {**call, "id": "m2", "error": {"message": "no server"}, "status": "failed"},
        ),
        _item("item.started", {"id": "w", "type": "web_search", "query": "codex exec json"}),
        _item("item.completed", {"id": "e", "type": "error"}),
        _item("item.completed", {"type": "agent_message", "text": "no id"}),
        _item("item.completed", {"id": "x"}),
        {"type": "item.completed", "item": "odd"},
    )
    assert out == [
        "▸ docs.lookup retry",
        "  ⎿ found",
        "▸ docs.lookup retry",
        "  ✗ no server",
        "▸ web_search codex exec json",
        'warning: {"id": "e", "type": "error"}',
        "no id",
        '{"type": "item.completed", "item": {"id": "x"}}',
        '{"type": "item.completed", "item": "odd"}',
    ]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        pytest.param({"input_tokens": 10, "output_tokens": 2}, AgentUsage(10, 2), id="no-cache"),
        pytest.param(
            {"input_tokens": 5, "cached_input_tokens": 9, "output_tokens": 2},
            AgentUsage(None, 2),
            id="inconsistent-cache",
        ),
        pytest.param(
            {"input_tokens": 5, "cached_input_tokens": "x", "output_tokens": 2},
            AgentUsage(None, 2),
            id="bad-cache",
        ),
        pytest.param({}, AgentUsage(), id="empty"),
    ],
)
def test_codex_usage_edges(usage: dict[str, object], expected: AgentUsage) -> None:
    _, renderer = render({"type": "turn.completed", "usage": usage})
    assert renderer.usage == expected


# --- gemini -------------------------------------------------------------------------------

TS = "2026-12-01T23:30:00.000Z"


def test_gemini_stream_text_tools_and_usage() -> None:
    out, renderer = render(
        {"type": "init", "timestamp": TS, "session_id": "s", "model": "gemini-2.5-pro"},
        {"type": "message", "timestamp": TS, "role": "user", "content": "the prompt"},
        {"type": "message", "role": "assistant", "content": "Writing ", "delta": True},
        {"type": "message", "role": "assistant", "content": "the plan.", "delta": True},
        {
            "type": "tool_use",
            "timestamp": TS,
            "tool_name": "write_file",
            "tool_id": "t1",
            "parameters": {"file_path": "plan.md", "content": "x"},
        },
        {"type": "tool_result", "tool_id": "t1", "status": "success", "output": "ok"},
        {
            "type": "tool_result",
            "timestamp": TS,
            "tool_id": "t2",
            "status": "error",
            "error": {"type": "denied", "message": "not allowed"},
        },
        {"type": "error", "timestamp": TS, "severity": "warning", "message": "loop detected"},
        {"type": "message", "timestamp": TS, "role": "assistant", "content": "Done."},
        {
            "type": "result",
            "timestamp": TS,
            "status": "success",
            "stats": {
                "total_tokens": 1700,
                "input_tokens": 1500,
                "output_tokens": 200,
                "cached": 300,
                "input": 1200,
                "duration_ms": 10,
                "tool_calls": 2,
                "models": {},
            },
        },
    )  # fmt: skip
    assert out == [
        "Writing the plan.",
        "▸ write_file plan.md",
        "  ⎿ ok",
        "  ✗ not allowed",
        "warning: loop detected",
        "Done.",
        "✓ success · in 1,200 · out 200 · $?",
    ]
    assert renderer.text == "Writing the plan.\nDone.\n"
    assert renderer.usage == AgentUsage(input_tokens=1200, output_tokens=200, cost_usd=None)


def test_gemini_failures_and_odd_shapes() -> None:
    out, renderer = render(
        {"type": "error", "timestamp": TS, "severity": "error", "message": "quota exceeded"},
        {
            "type": "result",
            "timestamp": TS,
            "status": "error",
            "error": {"type": "FatalError", "message": "quota exceeded"},
            "stats": {"input_tokens": 50, "cached": 10, "output_tokens": 0},
        },
        {"type": "result", "timestamp": TS, "status": "error"},
        {"type": "tool_result", "timestamp": TS, "tool_id": "t", "status": "error", "error": "x"},
        {"type": "tool_result", "timestamp": TS, "tool_id": "t", "status": "running"},
        {"type": "message", "role": "system", "content": "?"},
        {"type": "message", "role": "assistant", "content": ""},
    )
    assert out == [
        "✗ error: quota exceeded",
        "✗ error (quota exceeded) · in 40 · out 0 · $?",
        "✗ error · in ? · out ? · $?",
        "  ✗ x",
        '{"type": "tool_result", "timestamp": "2026-12-01T23:30:00.000Z", "tool_id": "t", '
        '"status": "running"}',
        '{"type": "message", "role": "system", "content": "?"}',
    ]
    assert renderer.usage == AgentUsage(input_tokens=40, output_tokens=0)


def test_claude_result_is_still_read_as_claude() -> None:
    # A claude result carries `subtype`; its usage and cost are read the claude way.
    _, renderer = render(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "total_cost_usd": 0.5,
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }
    )
    assert renderer.usage == AgentUsage(3, 4, 0.5)


# --- cursor -------------------------------------------------------------------------------


def test_cursor_tool_calls() -> None:
    out, _ = render(
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m"},
        {
            "type": "tool_call",
            "subtype": "started",
            "call_id": "c1",
            "tool_call": {"readToolCall": {"args": {"path": "src/main.rs"}}},
        },
        {
            "type": "tool_call",
            "subtype": "completed",
            "call_id": "c1",
            "tool_call": {
                "readToolCall": {
                    "args": {"path": "src/main.rs"},
                    "result": {"success": {"content": "fn main() {}"}},
                }
            },
        },
        {
            "type": "tool_call",
            "subtype": "completed",
            "call_id": "c2",
            "tool_call": {"shellToolCall": {"result": {"error": {"message": "denied"}}}},
        },
        {"type": "tool_call", "subtype": "completed", "tool_call": {"a": 1, "b": 2}},
        {"type": "tool_call", "subtype": "completed", "tool_call": {"a": 1}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "ok"},
    )
    assert out == [
        "▸ read src/main.rs",
        "  ⎿ fn main() {}",
        "  ✗ denied",
        '{"type": "tool_call", "subtype": "completed", "tool_call": {"a": 1, "b": 2}}',
        '{"type": "tool_call", "subtype": "completed", "tool_call": {"a": 1}}',
        "✓ success · in ? · out ? · $?",
    ]


def test_codex_captured_turn_against_a_scripted_model() -> None:
    # Printed by codex 0.171.0 against tests/agents/openai_server.py.
    out, renderer = render(
        '{"type":"item.completed","item":{"id":"item_1","type":"agent_message",'
        '"text":"Hello from loopback."}}',
        '{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":200,'
        '"cache_write_input_tokens":0,"output_tokens":50,"reasoning_output_tokens":10}}',
    )
    assert out == ["Hello from loopback.", "✓ turn completed · in 800 · out 50 · $?"]
    assert renderer.usage == AgentUsage(input_tokens=800, output_tokens=50)


def test_gemini_captured_turn_against_a_scripted_model() -> None:
    # Printed by gemini 0.61.0 against tests/agents/gemini_server.py.
    out, renderer = render(
        '{"type":"init","timestamp":"2026-12-02T00:06:30.005Z","session_id":"2b52","model":'
        '"gemini-2.5-pro"}',
        '{"type":"message","timestamp":"2026-12-02T00:06:30.007Z","role":"user","content":'
        '"Say hi.\\n"}',
        '{"type":"tool_use","timestamp":"2026-12-02T00:06:30.271Z","tool_name":"write_file",'
        '"tool_id":"write_file_0","parameters":{"file_path":"/tmp/r/hello.txt","content":"hi\\n"}}',
        '{"type":"tool_result","timestamp":"2026-12-02T00:06:30.526Z","tool_id":"write_file_0",'
        '"status":"success"}',
        '{"type":"message","timestamp":"2026-12-02T00:06:30.598Z","role":"assistant","content":'
        '"Hello from the loopback.","delta":true}',
        '{"type":"result","timestamp":"2026-12-02T00:06:30.625Z","status":"success","stats":'
        '{"total_tokens":2100,"input_tokens":2000,"output_tokens":100,"cached":400,"input":1600,'
        '"duration_ms":620,"tool_calls":1,"models":{"gemini-2.5-pro":{"total_tokens":2100,'
        '"input_tokens":2000,"output_tokens":100,"cached":400,"input":1600}}}}',
    )
    assert out == [
        "▸ write_file /tmp/r/hello.txt",
        "  ⎿ (no output)",
        "Hello from the loopback.",
        "✓ success · in 1,600 · out 100 · $?",
    ]
    assert renderer.usage == AgentUsage(input_tokens=1600, output_tokens=100)
