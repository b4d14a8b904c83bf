"""The stream-json renderer: every event type, two whole transcripts, usage, and properties.

The transcripts in tests/fixtures/streamjson/ are not recordings: they were written by hand, one
event per line, in the shapes these sources document, with made-up ids and figures.

- claude (`claude -p --output-format stream-json --verbose --include-partial-messages`):
  Claude Code's headless docs and Agent SDK types (SDKSystemMessage init,
  SDKPartialAssistantMessage `stream_event` wrapping the Messages API stream events
  message_start / content_block_start / content_block_delta (text_delta, input_json_delta) /
  content_block_stop / message_delta / message_stop, SDKAssistantMessage, SDKUserMessage with
  tool_result blocks, SDKResultMessage with `subtype`, `is_error`, `total_cost_usd`, `usage`),
  https://docs.claude.com/en/docs/claude-code/sdk/sdk-headless and
  https://docs.claude.com/en/api/messages-streaming; `rate_limit_event` as captured in public
  parsers' test data (`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed",...}}`).
- opencode (`opencode run --format json`): packages/opencode/src/cli/cmd/run.ts in
  https://github.com/sst/opencode, which writes `{type, timestamp, sessionID, part}` for
  step_start / text / tool_use / step_finish and `{type: "error", error}`; the part shapes are
  its message-v2 parts (StepFinishPart: reason, cost, tokens {input, output, reasoning,
  cache {read, write}}; ToolPart: tool, callID, state {status, input, output | error}).
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.agent import AgentUsage
from app.runtime.streamjson import StreamJsonRenderer, compact_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "streamjson"


def render(
    *lines: str, color: bool = False, close: bool = True
) -> tuple[list[str], StreamJsonRenderer]:
    out: list[str] = []
    renderer = StreamJsonRenderer(out.append, color=color)
    for line in lines:
        renderer.feed(line)
    if close:
        renderer.close()
    return out, renderer


def j(value: object) -> str:
    return json.dumps(value)


def delta(text: str) -> str:
    return j(
        {
            "type": "stream_event",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        }
    )


def stream(kind: str, **fields: object) -> str:
    return j({"type": "stream_event", "event": {"type": kind, **fields}})


def message_start(message_id: str | None) -> str:
    message: dict[str, object] = {"type": "message", "role": "assistant", "content": []}
    if message_id is not None:
        message["id"] = message_id
    return stream("message_start", message=message)


def assistant(*content: object, message_id: str | None = None) -> str:
    message: dict[str, object] = {"role": "assistant", "content": list(content)}
    if message_id is not None:
        message["id"] = message_id
    return j({"type": "assistant", "message": message})


def text_item(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


def tool_use(name: str, **tool_input: object) -> dict[str, object]:
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": tool_input}


def tool_result(content: object, *, is_error: bool | None = None) -> str:
    item: dict[str, object] = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
    if is_error is not None:
        item["is_error"] = is_error
    return j({"type": "user", "message": {"role": "user", "content": [item]}})


def result(**fields: object) -> str:
    return j({"type": "result", **fields})


def oc(kind: str, **part: object) -> str:
    return j({"type": kind, "timestamp": 1, "sessionID": "ses_1", "part": {"id": "prt_1", **part}})


def step_finish(**part: object) -> str:
    return oc("step_finish", type="step-finish", **part)


OC_TOKENS = {"input": 1200, "output": 300, "reasoning": 50, "cache": {"read": 800, "write": 100}}
CLAUDE_USAGE = {
    "input_tokens": 18,
    "cache_creation_input_tokens": 4100,
    "cache_read_input_tokens": 51234,
    "output_tokens": 612,
}


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        # Control noise.
        pytest.param([j({"type": "system", "subtype": "init", "tools": []})], [], id="system"),
        pytest.param([j({"type": "system", "subtype": "api_retry"})], [], id="system-any-subtype"),
        pytest.param(
            [j({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}})],
            [],
            id="rate-limit-event",
        ),
        pytest.param([oc("step_start", type="step-start", snapshot="abc")], [], id="oc-step-start"),
        pytest.param(["", "   ", "\n"], [], id="blank-lines"),
        # stream_event.
        pytest.param([delta("Hello "), delta("world")], ["Hello world"], id="text-deltas"),
        pytest.param(
            [delta("one\ntw"), delta("o\nthree\n")], ["one", "two", "three"], id="deltas-lines"
        ),
        pytest.param([delta("a\n\nb\n")], ["a", "", "b"], id="delta-blank-line"),
        pytest.param(
            [
                message_start("m1"),
                stream("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                stream("ping"),
                stream(
                    "content_block_delta",
                    index=1,
                    delta={"type": "input_json_delta", "partial_json": '{"file_path":'},
                ),
                stream(
                    "content_block_delta",
                    index=2,
                    delta={"type": "thinking_delta", "thinking": "hm"},
                ),
                stream(
                    "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}
                ),
                stream("content_block_stop", index=0),
                stream("message_stop"),
                stream("something_new"),
            ],
            [],
            id="silent-stream-events",
        ),
        # assistant.
        pytest.param([assistant(text_item("Plain prose."))], ["Plain prose."], id="assistant-text"),
        pytest.param(
            [assistant(text_item("two\nlines\n"), text_item("more"))],
            ["two", "lines", "more"],
            id="assistant-text-items",
        ),
        pytest.param(
            [j({"type": "assistant", "message": {"content": "a string"}})],
            ["a string"],
            id="assistant-string-content",
        ),
        pytest.param(
            [
                assistant(
                    {"type": "thinking", "thinking": "secret"}, {"type": "redacted_thinking"}, "odd"
                )
            ],
            [],
            id="assistant-other-items",
        ),
        pytest.param(
            [assistant(tool_use("Read", file_path="/repo/a.py", offset=3))],
            ["▸ Read /repo/a.py"],
            id="tool-file-path",
        ),
        pytest.param(
            [assistant(tool_use("LS", path="/repo/src"))], ["▸ LS /repo/src"], id="tool-path"
        ),
        pytest.param(
            [assistant(tool_use("Bash", command="pytest -q", description="Run tests"))],
            ["▸ Bash pytest -q"],
            id="tool-command",
        ),
        pytest.param(
            [assistant(tool_use("Grep", pattern="def add", path="/repo"))],
            ["▸ Grep /repo"],
            id="tool-path-before-pattern",
        ),
        pytest.param(
            [assistant(tool_use("Glob", pattern="**/*.py"))], ["▸ Glob **/*.py"], id="tool-pattern"
        ),
        pytest.param(
            [assistant(tool_use("WebFetch", url="https://example.com", prompt="x"))],
            ["▸ WebFetch https://example.com"],
            id="tool-url",
        ),
        pytest.param(
            [assistant(tool_use("Write", file_path=7, path="", command="echo hi"))],
            ["▸ Write echo hi"],
            id="tool-skips-non-string-and-empty",
        ),
        pytest.param(
            [assistant(tool_use("TodoWrite", todos=[]))], ["▸ TodoWrite"], id="tool-no-target"
        ),
        pytest.param(
            [assistant({"type": "tool_use", "input": "not an object"})],
            ["▸ tool"],
            id="tool-no-name",
        ),
        pytest.param(
            [assistant(tool_use("Bash", command="set -e\nmake test"))],
            ["▸ Bash set -e…"],
            id="tool-multiline-command",
        ),
        pytest.param(
            [assistant(tool_use("Bash", command="x" * 130))],
            ["▸ Bash " + "x" * 120 + "…"],
            id="tool-long-command",
        ),
        pytest.param(
            [assistant(text_item("Reading."), tool_use("Read", file_path="a.py"))],
            ["Reading.", "▸ Read a.py"],
            id="assistant-text-then-tool",
        ),
        # user / tool_result.
        pytest.param([tool_result("ok\n")], ["  ⎿ ok"], id="result-string"),
        pytest.param(
            [
                tool_result(
                    [{"type": "text", "text": "a"}, {"type": "image", "source": {}}, {"n": 1}]
                )
            ],
            ["  ⎿ a", "    [image]", '    {"n": 1}'],
            id="result-blocks",
        ),
        pytest.param([tool_result({"n": 1})], ['  ⎿ {"n": 1}'], id="result-object"),
        pytest.param([tool_result("")], ["  ⎿ (no output)"], id="result-empty"),
        pytest.param([tool_result(None)], ["  ⎿ (no output)"], id="result-null"),
        pytest.param([tool_result("boom", is_error=True)], ["  ✗ boom"], id="result-error"),
        pytest.param([tool_result("fine", is_error=False)], ["  ⎿ fine"], id="result-not-error"),
        pytest.param(
            [tool_result("1\n2\n3\n4\n5")],
            ["  ⎿ 1", "    2", "    3…"],
            id="result-three-lines",
        ),
        pytest.param(
            [tool_result("1\n2\n3\n")], ["  ⎿ 1", "    2", "    3"], id="result-exactly-three"
        ),
        pytest.param([tool_result("y" * 250)], ["  ⎿ " + "y" * 200 + "…"], id="result-200-chars"),
        pytest.param([tool_result("y" * 200)], ["  ⎿ " + "y" * 200], id="result-exactly-200"),
        pytest.param(
            [tool_result("a" * 150 + "\n" + "b" * 100)],
            ["  ⎿ " + "a" * 150, "    " + "b" * 49 + "…"],
            id="result-chars-across-lines",
        ),
        pytest.param(
            [j({"type": "user", "message": {"role": "user", "content": "the prompt"}})],
            [],
            id="user-prompt-echo",
        ),
        pytest.param(
            [j({"type": "user", "message": {"content": [{"type": "text", "text": "hi"}, 3]}})],
            [],
            id="user-other-items",
        ),
        # result.
        pytest.param(
            [
                result(
                    subtype="success", is_error=False, total_cost_usd=0.048213, usage=CLAUDE_USAGE
                )
            ],
            ["✓ success · in 18 · out 612 · $0.0482"],
            id="result-success",
        ),
        pytest.param(
            [
                result(
                    subtype="error_max_turns", is_error=True, total_cost_usd=0.5, usage=CLAUDE_USAGE
                )
            ],
            ["✗ error (error_max_turns) · in 18 · out 612 · $0.5000"],
            id="result-error-subtype",
        ),
        pytest.param(
            [result(subtype="success", is_error=True, result="API Error: 429")],
            ["✗ error · in ? · out ? · $?"],
            id="result-is-error-wins",
        ),
        pytest.param(
            [result(subtype="error_during_execution")],
            ["✗ error (error_during_execution) · in ? · out ? · $?"],
            id="result-error-subtype-only",
        ),
        pytest.param([result()], ["✓ success · in ? · out ? · $?"], id="result-bare"),
        pytest.param(
            [
                result(
                    subtype="success",
                    usage={"input_tokens": 1234567, "output_tokens": 0},
                    cost_usd=1,
                )
            ],
            ["✓ success · in 1,234,567 · out 0 · $1.0000"],
            id="result-legacy-cost-field",
        ),
        # opencode.
        pytest.param([oc("text", type="text", text="Hello.")], ["Hello."], id="oc-text"),
        pytest.param([oc("text", type="text", text="a\nb\n")], ["a", "b"], id="oc-text-lines"),
        pytest.param(
            [oc("text", type="text", text="once"), oc("text", type="text", text="once")],
            ["once"],
            id="oc-text-same-part-once",
        ),
        pytest.param(
            [step_finish(reason="stop", cost=0.0031, tokens=OC_TOKENS)],
            ["✓ step finished (stop) · in 1,200 · out 350 (incl. 50 reasoning) · $0.0031"],
            id="oc-step-finish",
        ),
        pytest.param(
            [
                step_finish(
                    reason="tool-calls", cost=0, tokens={"input": 5, "output": 2, "reasoning": 0}
                )
            ],
            # opencode prices a step itself and writes 0 for a model with no price: unknown.
            ["✓ step finished (tool-calls) · in 5 · out 2 · $?"],
            id="oc-step-finish-tool-calls",
        ),
        pytest.param(
            [step_finish(reason="error", tokens={"input": 5})],
            ["✗ step failed (error) · in 5 · out ? · $?"],
            id="oc-step-finish-error",
        ),
        pytest.param(
            [step_finish()], ["✓ step finished · in ? · out ? · $?"], id="oc-step-finish-bare"
        ),
        pytest.param(
            [
                oc(
                    "tool_use",
                    type="tool",
                    tool="bash",
                    state={
                        "status": "completed",
                        "input": {"command": "ls"},
                        "output": "README.md\nsrc\n",
                    },
                )
            ],
            ["▸ bash ls", "  ⎿ README.md", "    src"],
            id="oc-tool-completed",
        ),
        pytest.param(
            [
                oc(
                    "tool_use",
                    type="tool",
                    tool="read",
                    state={
                        "status": "error",
                        "input": {"filePath": "/x"},
                        "error": "File not found",
                    },
                )
            ],
            ["▸ read /x", "  ✗ File not found"],
            id="oc-tool-error",
        ),
        pytest.param(
            [oc("tool_use", type="tool", tool="task", state={"status": "running"})],
            ["▸ task"],
            id="oc-tool-running",
        ),
        pytest.param([oc("tool_use", type="tool")], ["▸ tool"], id="oc-tool-no-state"),
        pytest.param(
            [
                j(
                    {
                        "type": "error",
                        "error": {"name": "APIError", "data": {"message": "Overloaded"}},
                    }
                )
            ],
            ["✗ error: APIError: Overloaded"],
            id="oc-error",
        ),
        pytest.param(
            [j({"type": "error", "error": {"name": "UnknownError"}})],
            ["✗ error: UnknownError"],
            id="oc-error-name-only",
        ),
        pytest.param(
            [j({"type": "error", "error": {"message": "bad"}})],
            ["✗ error: bad"],
            id="oc-error-message-only",
        ),
        pytest.param(
            [j({"type": "error", "error": {"code": 3}})],
            ['✗ error: {"code": 3}'],
            id="oc-error-unknown-shape",
        ),
    ],
)
def test_renders_event(lines: list[str], expected: list[str]) -> None:
    out, _ = render(*lines)

    assert out == expected


RAW_LINES = [
    pytest.param("not json at all", id="non-json"),
    pytest.param("{truncated", id="broken-json"),
    pytest.param("[1, 2]", id="array"),
    pytest.param('"a string"', id="string"),
    pytest.param("42", id="number"),
    pytest.param("null", id="null"),
    pytest.param('{"no": "type"}', id="no-type"),
    pytest.param('{"type": 7}', id="type-not-string"),
    pytest.param('{"type": "something_new", "x": 1}', id="unknown-type"),
    pytest.param('{"type": "stream_event", "event": "x"}', id="stream-event-not-object"),
    pytest.param('{"type": "assistant"}', id="assistant-no-message"),
    pytest.param('{"type": "assistant", "message": {"content": 3}}', id="assistant-bad-content"),
    pytest.param('{"type": "user", "message": []}', id="user-bad-message"),
    pytest.param('{"type": "user", "message": {}}', id="user-no-content"),
    pytest.param('{"type": "error", "error": "boom"}', id="error-not-object"),
    pytest.param(
        '{"type": "step_start", "part": {"type": "weird"}}', id="oc-step-start-bad-part-type"
    ),
    pytest.param('{"type": "step_start"}', id="oc-step-start-no-part"),
    pytest.param(
        '{"type": "text", "part": {"type": "reasoning", "text": "hm"}}', id="oc-text-reasoning"
    ),
    pytest.param('{"type": "text", "part": {"type": "text", "text": 5}}', id="oc-text-not-string"),
    pytest.param(
        '{"type": "step_finish", "part": {"type": "step-start"}}', id="oc-step-finish-bad"
    ),
    pytest.param('{"type": "tool_use", "part": {"type": "patch"}}', id="oc-tool-use-bad-part-type"),
    pytest.param('{"type": "tool_use", "part": 3}', id="oc-tool-use-part-not-object"),
    pytest.param(
        '{"type": "reasoning", "part": {"type": "reasoning", "text": "x"}}', id="oc-reasoning"
    ),
    pytest.param("[" * 100_000 + "]" * 100_000, id="nested-too-deep"),
    pytest.param("9" * 5000, id="int-too-long"),
]


@pytest.mark.parametrize("line", RAW_LINES)
def test_unrecognised_lines_are_printed_raw(line: str) -> None:
    out, renderer = render(line)

    assert out == [line]
    assert renderer.text == ""
    assert renderer.usage == AgentUsage()


def test_raw_line_loses_only_its_line_ending() -> None:
    assert render("plain\n")[0] == ["plain"]
    assert render("plain\r\n")[0] == ["plain"]


def test_raw_line_with_embedded_newline_is_written_as_separate_lines() -> None:
    assert render("a\nb")[0] == ["a", "b"]


# --- flushing -----------------------------------------------------------------------------------


def test_deltas_write_each_line_as_soon_as_it_completes() -> None:
    out: list[str] = []
    renderer = StreamJsonRenderer(out.append)

    renderer.feed(delta("first li"))
    assert out == []
    renderer.feed(delta("ne\nsecond"))
    assert out == ["first line"]
    renderer.feed(delta(" line\nthi"))
    assert out == ["first line", "second line"]
    renderer.close()
    assert out == ["first line", "second line", "thi"]
    renderer.close()
    assert out == ["first line", "second line", "thi"]


@pytest.mark.parametrize(
    "boundary",
    [
        pytest.param(stream("content_block_stop", index=0), id="content-block-stop"),
        pytest.param(stream("message_stop"), id="message-stop"),
        pytest.param(message_start("m2"), id="message-start"),
    ],
)
def test_a_block_boundary_writes_the_pending_tail(boundary: str) -> None:
    out, _ = render(delta("tail"), boundary, close=False)

    assert out == ["tail"]


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(assistant(tool_use("Read", file_path="a.py")), id="tool-use"),
        pytest.param(tool_result("ok"), id="tool-result"),
        pytest.param(result(subtype="success"), id="result"),
        pytest.param("not json", id="raw"),
    ],
)
def test_the_pending_tail_is_written_before_any_other_line(line: str) -> None:
    out, _ = render(delta("Let me check"), line, close=False)

    assert out[0] == "Let me check"
    assert len(out) > 1


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(stream("ping"), id="ping"),
        pytest.param(j({"type": "system", "subtype": "status"}), id="system"),
        pytest.param(j({"type": "rate_limit_event"}), id="rate-limit-event"),
        pytest.param(
            stream("content_block_delta", delta={"type": "input_json_delta", "partial_json": "{"}),
            id="input-json-delta",
        ),
    ],
)
def test_silent_events_do_not_split_a_line(line: str) -> None:
    out, renderer = render(delta("one "), line, delta("line"))

    assert out == ["one line"]
    assert renderer.text == "one line\n"


def test_a_partial_line_is_written_once_not_again_by_close() -> None:
    out, _ = render(delta("tail"), stream("content_block_stop", index=0))

    assert out == ["tail"]


# --- dedup of streamed text against the assistant snapshot -------------------------------------


def test_streamed_text_is_not_printed_again_from_the_snapshot() -> None:
    out, renderer = render(
        message_start("m1"),
        delta("Hello "),
        delta("world."),
        stream("content_block_stop", index=0),
        assistant(text_item("Hello world."), message_id="m1"),
        assistant(tool_use("Read", file_path="a.py"), message_id="m1"),
        stream("message_stop"),
    )

    assert out == ["Hello world.", "▸ Read a.py"]
    assert renderer.text == "Hello world.\n"


def test_snapshot_of_a_streamed_message_skips_text_but_keeps_tool_use() -> None:
    out, _ = render(
        message_start("m1"),
        delta("Reading."),
        assistant(text_item("Reading."), tool_use("Read", file_path="a.py"), message_id="m1"),
    )

    assert out == ["Reading.", "▸ Read a.py"]


def test_dedup_matches_by_id_even_after_a_later_message_started() -> None:
    out, _ = render(
        message_start("m1"),
        delta("one"),
        message_start("m2"),
        assistant(text_item("one"), message_id="m1"),
    )

    assert out == ["one"]


def test_without_ids_deltas_since_the_last_message_start_count() -> None:
    out, _ = render(
        message_start(None),
        delta("It prints 1."),
        assistant(text_item("It prints 1.")),
        message_start(None),
        assistant(text_item("Not streamed.")),
    )

    assert out == ["It prints 1.", "Not streamed."]


def test_deltas_without_any_message_start_dedup_an_id_less_snapshot() -> None:
    out, _ = render(delta("hi"), assistant(text_item("hi")))

    assert out == ["hi"]


def test_snapshot_id_matches_a_stream_that_had_no_id() -> None:
    out, _ = render(message_start(None), delta("hi"), assistant(text_item("hi"), message_id="m9"))

    assert out == ["hi"]


def test_a_message_that_was_not_streamed_is_printed() -> None:
    out, renderer = render(
        message_start("m1"),
        delta("streamed"),
        assistant(text_item("streamed"), message_id="m1"),
        assistant(text_item("snapshot only"), message_id="m2"),
    )

    assert out == ["streamed", "snapshot only"]
    assert renderer.text == "streamed\nsnapshot only\n"


def test_a_message_with_only_tool_input_deltas_still_prints_its_text() -> None:
    out, _ = render(
        message_start("m1"),
        stream("content_block_delta", delta={"type": "input_json_delta", "partial_json": "{}"}),
        stream("content_block_delta", delta={"type": "text_delta", "text": ""}),
        assistant(text_item("shown"), message_id="m1"),
    )

    assert out == ["shown"]


# --- color -------------------------------------------------------------------------------------


def test_color_marks_errors_red_and_plain_output_has_no_escapes() -> None:
    lines = [
        delta("prose\n"),
        assistant(tool_use("Bash", command="false")),
        tool_result("failed\nbadly", is_error=True),
        tool_result("fine"),
        result(subtype="error_max_turns", is_error=True),
        step_finish(reason="stop"),
        "raw",
    ]
    colored, _ = render(*lines, color=True)
    plain, _ = render(*lines)

    assert colored == [
        "prose",
        "\x1b[36m▸ Bash false\x1b[0m",
        "\x1b[31m  ✗ failed\x1b[0m",
        "\x1b[31m    badly\x1b[0m",
        "\x1b[2m  ⎿ fine\x1b[0m",
        "\x1b[31m✗ error (error_max_turns) · in ? · out ? · $?\x1b[0m",
        "\x1b[32m✓ step finished (stop) · in ? · out ? · $?\x1b[0m",
        "raw",
    ]
    assert not any("\x1b" in line for line in plain)


# --- usage -------------------------------------------------------------------------------------


def test_usage_is_unknown_when_no_figures_were_seen() -> None:
    _, renderer = render(
        delta("hi"), assistant(text_item("x")), "raw", oc("text", type="text", text="t")
    )

    assert renderer.usage == AgentUsage(input_tokens=None, output_tokens=None, cost_usd=None)


def test_usage_from_claude_result_excludes_cache_tokens() -> None:
    _, renderer = render(result(subtype="success", total_cost_usd=0.048213, usage=CLAUDE_USAGE))

    assert renderer.usage == AgentUsage(input_tokens=18, output_tokens=612, cost_usd=0.048213)


def test_usage_from_a_result_without_figures_stays_unknown() -> None:
    _, renderer = render(result(subtype="success", is_error=False))

    assert renderer.usage == AgentUsage()


def test_usage_sums_across_opencode_steps_with_reasoning_as_output() -> None:
    _, renderer = render(
        step_finish(reason="tool-calls", cost=0.0031, tokens=OC_TOKENS),
        step_finish(
            reason="tool-calls", cost=0.0045, tokens={"input": 1500, "output": 200, "reasoning": 0}
        ),
        step_finish(
            reason="stop", cost=0.0012, tokens={"input": 1800, "output": 90, "reasoning": 10}
        ),
    )

    usage = renderer.usage
    assert usage.input_tokens == 4500
    assert usage.output_tokens == 650
    assert usage.cost_usd == pytest.approx(0.0088)


@pytest.mark.parametrize(
    ("cost", "tokens", "expected"),
    [
        # opencode 1.18.33 prices a step from the model's configured cost, each missing price
        # read as 0: a model without pricing reports 0 however many tokens it spent.
        pytest.param(0, OC_TOKENS, None, id="zero-cost-for-tokens-is-unknown"),
        pytest.param(0, {"input": 0, "output": 0, "cache": {"read": 9}}, None, id="cache-only"),
        pytest.param(0, {"input": 0, "output": 0, "reasoning": 0}, 0.0, id="nothing-spent-is-0"),
        pytest.param(0, {}, 0.0, id="no-token-figures"),
        pytest.param(0.0031, OC_TOKENS, 0.0031, id="a-real-cost-stays"),
        pytest.param(1e-9, {"input": 1}, 1e-9, id="a-tiny-real-cost-stays"),
    ],
)
def test_opencode_cost_zero_for_spent_tokens_is_unknown(
    cost: float, tokens: dict[str, object], expected: float | None
) -> None:
    _, renderer = render(step_finish(reason="stop", cost=cost, tokens=tokens))

    assert renderer.usage.cost_usd == expected


def test_an_unpriced_opencode_step_makes_the_runs_cost_unknown_only_if_no_other_is_known() -> None:
    _, renderer = render(
        step_finish(reason="tool-calls", cost=0, tokens={"input": 10, "output": 2}),
        step_finish(reason="stop", cost=0, tokens={"input": 12, "output": 3}),
    )

    assert renderer.usage == AgentUsage(input_tokens=22, output_tokens=5, cost_usd=None)


def test_a_figure_missing_from_some_steps_sums_the_known_ones() -> None:
    _, renderer = render(
        step_finish(reason="tool-calls", tokens={"input": 10}),
        step_finish(reason="stop", cost=0.5, tokens={"input": 5, "output": 7}),
    )

    assert renderer.usage == AgentUsage(input_tokens=15, output_tokens=7, cost_usd=0.5)


def test_a_figure_missing_from_every_step_stays_unknown() -> None:
    _, renderer = render(
        step_finish(reason="stop", tokens={"input": 1}), step_finish(reason="stop")
    )

    assert renderer.usage == AgentUsage(input_tokens=1, output_tokens=None, cost_usd=None)


def test_reasoning_alone_does_not_make_output_known() -> None:
    _, renderer = render(step_finish(reason="stop", tokens={"reasoning": 40}))

    assert renderer.usage.output_tokens is None


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(-1, id="negative"),
        pytest.param(True, id="bool"),
        pytest.param("12", id="string"),
        pytest.param(1.5, id="float-tokens"),
        pytest.param(None, id="null"),
        pytest.param([3], id="list"),
    ],
)
def test_malformed_token_counts_are_unknown(bad: object) -> None:
    _, renderer = render(
        result(usage={"input_tokens": bad, "output_tokens": bad}),
        step_finish(tokens={"input": bad, "output": bad, "reasoning": bad}),
    )

    assert renderer.usage.input_tokens is None
    assert renderer.usage.output_tokens is None


@pytest.mark.parametrize(
    "line",
    [
        pytest.param('{"type": "result", "total_cost_usd": NaN}', id="nan"),
        pytest.param('{"type": "result", "total_cost_usd": Infinity}', id="infinity"),
        pytest.param('{"type": "result", "total_cost_usd": -0.5}', id="negative"),
        pytest.param('{"type": "result", "total_cost_usd": true}', id="bool"),
        pytest.param('{"type": "result", "total_cost_usd": "0.5"}', id="string"),
        pytest.param('{"type": "result", "total_cost_usd": 1' + "0" * 400 + "}", id="huge-int"),
        pytest.param(
            '{"type": "step_finish", "part": {"type": "step-finish", "cost": 1e999}}',
            id="oc-overflow",
        ),
    ],
)
def test_malformed_costs_are_unknown(line: str) -> None:
    out, renderer = render(line)

    assert renderer.usage.cost_usd is None
    assert out[0].endswith("$?")


def test_claude_and_opencode_figures_accumulate_together() -> None:
    _, renderer = render(
        result(total_cost_usd=0.25, usage={"input_tokens": 10, "output_tokens": 4}),
        step_finish(cost=0.25, tokens={"input": 1, "output": 1}),
    )

    assert renderer.usage == AgentUsage(input_tokens=11, output_tokens=5, cost_usd=0.5)


# --- whole transcripts -------------------------------------------------------------------------

CLAUDE_EXPECTED = [
    "I'll read the failing test first.",
    "▸ Read /repo/tests/test_calc.py",
    "  ⎿      1\tfrom calc import add",
    "         2\t",
    "         3\t…",
    "▸ Bash python -m pytest -q tests/test_calc.py",
    "  ✗ Exit code 1",
    "    F" + " " * 72 + "[100%]",
    "    " + "=" * 35 + " FAILURES " + "=" * 35 + "…",
    "`add` subtracts. Fixing it:",
    "▸ Edit /repo/calc.py",
    "  ⎿ The file /repo/calc.py has been updated."
    " Here's the result of running `cat -n` on a snippet of the edited file:",
    "         1\tdef add(a: int, b: int) -> int:",
    "         2\t    return a + b",
    "Fixed `add` in calc.py.",
    "",
    "The test passes now.",
    "✓ success · in 18 · out 612 · $0.0482",
]

OPENCODE_EXPECTED = [
    "I'll look at the failing test.",
    "▸ read /repo/tests/test_calc.py",
    "  ⎿ <file>",
    "    00001| from calc import add",
    "    00002| …",
    "✓ step finished (tool-calls) · in 1,200 · out 350 (incl. 50 reasoning) · $0.0031",
    "▸ bash pytest -q tests/test_calc.py",
    "  ✗ Error: command exited with code 1",
    "▸ edit /repo/calc.py",
    "  ⎿ (no output)",
    "✓ step finished (tool-calls) · in 1,500 · out 200 · $0.0045",
    "Fixed `add` in calc.py;",
    "the test passes now.",
    "✓ step finished (stop) · in 1,800 · out 100 (incl. 10 reasoning) · $0.0012",
]


def fixture_lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)


def test_claude_transcript_renders_exactly() -> None:
    out, renderer = render(*fixture_lines("claude_fix_test.jsonl"))

    assert out == CLAUDE_EXPECTED
    assert renderer.text == (
        "I'll read the failing test first.\n`add` subtracts. Fixing it:\n"
        "Fixed `add` in calc.py.\n\nThe test passes now.\n"
    )
    assert renderer.usage == AgentUsage(input_tokens=18, output_tokens=612, cost_usd=0.048213)


def test_opencode_transcript_renders_exactly() -> None:
    out, renderer = render(*fixture_lines("opencode_fix_test.jsonl"))

    assert out == OPENCODE_EXPECTED
    assert (
        renderer.text
        == "I'll look at the failing test.\nFixed `add` in calc.py;\nthe test passes now.\n"
    )
    assert renderer.usage.input_tokens == 4500
    assert renderer.usage.output_tokens == 650
    assert renderer.usage.cost_usd == pytest.approx(0.0088)


@pytest.mark.parametrize("name", ["claude_fix_test.jsonl", "opencode_fix_test.jsonl"])
def test_rendering_leaves_the_transcript_byte_identical(name: str) -> None:
    path = FIXTURES / name
    before = path.read_bytes()
    lines = fixture_lines(name)
    kept = list(lines)

    render(*lines)

    assert lines == kept
    assert "".join(lines).encode("utf-8") == before == path.read_bytes()


# --- properties --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)

TOP_TYPES = [
    "system",
    "rate_limit_event",
    "stream_event",
    "assistant",
    "user",
    "result",
    "step_start",
    "text",
    "step_finish",
    "tool_use",
    "error",
]
INNER_TYPES = [
    "message_start",
    "content_block_delta",
    "content_block_stop",
    "message_stop",
    "text_delta",
    "input_json_delta",
    "text",
    "tool_use",
    "tool_result",
    "image",
    "step-start",
    "step-finish",
    "tool",
    "completed",
    "error",
    "success",
]
KEYS = [
    "type",
    "event",
    "delta",
    "text",
    "message",
    "content",
    "id",
    "name",
    "input",
    "is_error",
    "subtype",
    "usage",
    "input_tokens",
    "output_tokens",
    "total_cost_usd",
    "part",
    "reason",
    "cost",
    "tokens",
    "reasoning",
    "output",
    "state",
    "status",
    "error",
    "data",
    "tool",
    "file_path",
    "filePath",
    "command",
]
# JSON shaped like the envelopes (known type names and keys at every depth), so the random
# values reach the handlers' inner branches rather than the raw fallback.
shaped_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(INNER_TYPES),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=6)
    ),
    max_leaves=40,
)
envelopes = st.builds(
    lambda kind, rest: {**rest, "type": kind},
    st.sampled_from(TOP_TYPES),
    st.dictionaries(st.sampled_from(KEYS), shaped_values, max_size=6),
)


def assert_renders_safely(lines: list[str]) -> None:
    out: list[str] = []
    renderer = StreamJsonRenderer(out.append, color=True)
    for line in lines:
        renderer.feed(line)
    renderer.close()
    _ = (renderer.usage, renderer.text)
    assert all(isinstance(line, str) and "\n" not in line for line in out)


@given(st.lists(st.text(), max_size=8))
def test_feed_never_raises_on_arbitrary_strings(lines: list[str]) -> None:
    assert_renders_safely(lines)


@given(st.lists(json_values, max_size=8))
def test_feed_never_raises_on_arbitrary_json(values: list[Any]) -> None:
    assert_renders_safely([json.dumps(value) for value in values])


@given(st.lists(envelopes, max_size=12))
def test_feed_never_raises_on_envelope_shaped_json(values: list[dict[str, Any]]) -> None:
    assert_renders_safely([json.dumps(value) for value in values])


@given(st.lists(envelopes | json_values, max_size=12))
def test_the_renderer_never_mutates_what_it_is_given(values: list[Any]) -> None:
    lines = [json.dumps(value) for value in values]
    kept_lines = list(lines)
    kept_values = copy.deepcopy(values)

    render(*lines)

    assert lines == kept_lines
    # json.loads builds fresh objects; NaN is the one value not equal to itself.
    assert [json.dumps(v) for v in values] == [json.dumps(v) for v in kept_values]


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"])), st.data())
def test_deltas_lose_and_double_nothing_however_they_are_split(
    text: str, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]

    out, renderer = render(*(delta(chunk) for chunk in chunks), assistant(text_item(text)))

    expected = text.removesuffix("\n").split("\n") if text else []
    assert out == expected
    assert renderer.text == (text if not text or text.endswith("\n") else text + "\n")
    assert renderer.text == "".join(line + "\n" for line in out)


@given(st.lists(st.text(max_size=20), max_size=6), st.text(max_size=20))
def test_prose_text_equals_the_prose_lines_written(blocks: list[str], tail: str) -> None:
    lines = [oc("text", id=f"prt_{i}", type="text", text=block) for i, block in enumerate(blocks)]
    lines.append(j({"type": "assistant", "message": {"content": [text_item(tail)]}}))

    out, renderer = render(*lines)

    assert renderer.text == "".join(line + "\n" for line in out)


def test_tool_result_blocks_may_be_bare_strings() -> None:
    out, _ = render(tool_result(["plain", {"type": "text", "text": "block"}]))

    assert out == ["  ⎿ plain", "    block"]


def test_opencode_text_without_a_part_id_is_always_written() -> None:
    line = j({"type": "text", "part": {"type": "text", "text": "again"}})

    assert render(line, line)[0] == ["again", "again"]


def test_compact_json_falls_back_to_repr_for_what_json_cannot_encode() -> None:
    marker = object()

    assert compact_json({"a": [1, None]}) == '{"a": [1, null]}'
    assert compact_json(marker) == repr(marker)
