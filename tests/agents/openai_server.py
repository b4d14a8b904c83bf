"""A scripted model behind the OpenAI Responses API, on loopback, for the real `codex` CLI.

    model = ScriptedResponses(text="...")
    with serve(model.answer, name="openai") as origin:   # openai_base_url = "<origin>/v1"
        ...                                              # run codex exec --json ...

`POST /v1/responses` is answered as server-sent events in the Responses streaming shape
(https://platform.openai.com/docs/api-reference/responses-streaming): response.created,
response.output_item.added, response.output_text.delta, response.output_item.done and
response.completed with `usage` (input_tokens with input_tokens_details.cached_tokens,
output_tokens with output_tokens_details.reasoning_tokens). codex first tries the same path as
a WebSocket; that upgrade is answered 404, and codex falls back to HTTPS by itself.

`ScriptedSteps` plays a whole step (tests/agents/script.py) the way codex 0.171 offers its
tools. codex sends no top-level `tools`: its first input item is `additional_tools`, whose
`functions` namespace offers one tool that acts, the freeform (`custom`) tool `exec`: the model
writes JavaScript that codex runs in an isolate, calling the nested tools on `tools` —
`tools.apply_patch(<patch text>)` (freeform: `*** Begin Patch` / `*** Add File: <path>` /
`+<line>`… / `*** End Patch`) and `tools.exec_command({cmd})` (its shell, run in codex's
sandbox). So each step is one `custom_tool_call` output item named `exec` (with a `call_id`);
its result comes back in the next request's input as a `custom_tool_call_output` with that
`call_id`:

    no tool output yet     -> exec: apply_patch adding `target` with `content`
    one tool output        -> exec: exec_command running the prompt's report line
    two                    -> the final text

Each answer reports its own usage (`usage_for`), recorded in `reported` for assertions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.agents.script import FINAL_TEXT, report_command, stage
from tests.support.loopback import Request, Response

INPUT = 1000
CACHED = 200
OUTPUT = 50
REASONING = 10


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


@dataclass
class ScriptedResponses:
    """Answers every Responses call with one assistant message."""

    text: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def answer(self, request: Request) -> Response:
        """The loopback handler."""
        if request.method != "POST" or not request.path.endswith("/responses"):
            return Response.of(404, b'{"error":{"message":"not found"}}')
        self.requests.append(json.loads(request.body or b"{}"))
        number = len(self.requests)
        item_id = f"msg_{number}"
        done = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": self.text, "annotations": []}],
        }
        usage = {
            "input_tokens": INPUT,
            "input_tokens_details": {"cached_tokens": CACHED},
            "output_tokens": OUTPUT,
            "output_tokens_details": {"reasoning_tokens": REASONING},
            "total_tokens": INPUT + OUTPUT,
        }
        events = [
            {"type": "response.created", "response": {"id": f"resp_{number}"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**done, "status": "in_progress", "content": []},
            },
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": self.text,
            },
            {"type": "response.output_item.done", "output_index": 0, "item": done},
            {"type": "response.completed", "response": {"id": f"resp_{number}", "usage": usage}},
        ]
        return Response.of(200, _sse(events), {"content-type": "text/event-stream"})


# The input item types that carry a tool's result back to the model.
_TOOL_OUTPUTS = frozenset({"custom_tool_call_output", "function_call_output"})


def usage_for(number: int) -> tuple[int, int, int]:
    """(input, cached, output) reported for the `number`th request, distinct per request."""
    return INPUT + number, CACHED + number, OUTPUT + number


def _offers_exec(body: dict[str, Any]) -> bool:
    """Whether the request offers codex's freeform `exec` tool, at the top or in an
    `additional_tools` input item (namespaces included)."""

    def named(tools: list[Any]) -> bool:
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "custom" and tool.get("name") == "exec":
                return True
            if named(tool.get("tools") or []):
                return True
        return False

    extra = [i for i in body.get("input") or [] if i.get("type") == "additional_tools"]
    return named(body.get("tools") or []) or any(named(i.get("tools") or []) for i in extra)


def patch_script(path: str, content: str) -> str:
    """The `exec` JavaScript that adds `path` with `content` through `tools.apply_patch`."""
    lines = "".join(f"+{line}\n" for line in content.splitlines())
    patch = f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"
    return f"const r = await tools.apply_patch({json.dumps(patch)});\ntext(JSON.stringify(r));\n"


def command_script(command: str) -> str:
    """The `exec` JavaScript that runs `command` through `tools.exec_command`."""
    call = json.dumps({"cmd": command})
    return f"const r = await tools.exec_command({call});\ntext(JSON.stringify(r));\n"


@dataclass
class ScriptedSteps:
    """Edits `target` with `content`, runs the prompt's report line, then ends the turn."""

    target: str
    content: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    reported: list[tuple[int, int, int]] = field(default_factory=list)  # (input, cached, out)
    tool_outputs: list[dict[str, Any]] = field(default_factory=list)  # the last request's

    async def answer(self, request: Request) -> Response:
        """The loopback handler."""
        if request.method != "POST" or not request.path.endswith("/responses"):
            return Response.of(404, b'{"error":{"message":"not found"}}')
        body = json.loads(request.body or b"{}")
        self.requests.append(body)
        number = len(self.requests)
        outputs = [i for i in body.get("input") or [] if i.get("type") in _TOOL_OUTPUTS]
        self.tool_outputs = outputs
        step = stage(len(outputs))
        if step == "end":
            item: dict[str, Any] = {
                "type": "message",
                "id": f"msg_{number}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}],
            }
        else:
            assert _offers_exec(body), "codex no longer offers its freeform `exec` tool"
            script = (
                patch_script(self.target, self.content)
                if step == "edit"
                else command_script(report_command(body))
            )
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_{number}",
                "call_id": f"call_{number}",
                "name": "exec",
                "input": script,
                "status": "completed",
            }
        sent_in, cached, sent_out = usage_for(number)
        self.reported.append((sent_in, cached, sent_out))
        usage = {
            "input_tokens": sent_in,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": sent_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sent_in + sent_out,
        }
        events = [
            {"type": "response.created", "response": {"id": f"resp_{number}"}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": f"resp_{number}", "usage": usage}},
        ]
        return Response.of(200, _sse(events), {"content-type": "text/event-stream"})
