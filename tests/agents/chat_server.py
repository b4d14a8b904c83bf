"""A scripted model behind the OpenAI Chat Completions API, on loopback, for the real `opencode`.

    model = ScriptedChat([("write", lambda body: {...}), ("bash", lambda body: {...})])
    with serve(model.answer, name="chat") as origin:   # provider baseURL "<origin>/v1"
        ...                                            # run opencode run --format json ...

It speaks enough of https://platform.openai.com/docs/api-reference/chat/create and its
streaming form (https://platform.openai.com/docs/api-reference/chat-streaming) for one agent
turn with scripted tool calls: the calls of tests/agents/script.py (edit, then report), after
any calls a test puts before them. Which call a request is at is its count of tool results, as
`script.stage` counts them:

    a request offering the scripted tools, with N `role: "tool"` results,
    N < len(calls)                      -> the call `calls[N]`, finish_reason "tool_calls"
    ... with every tool result          -> `final_text`, finish_reason "stop"
    any other request (a title)         -> a short text, finish_reason "stop"

Streamed (`stream: true`), an answer is `data: <chat.completion.chunk>` events: a first chunk
with `delta.role`, then either `delta.content` or `delta.tool_calls` (`index`, `id`, `type:
"function"`, `function.name`, then `function.arguments` as JSON text streamed in two pieces),
a chunk with the `finish_reason`, and when `stream_options.include_usage` is asked a last chunk
with empty `choices` and `usage` {prompt_tokens, completion_tokens, total_tokens,
prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens}; then
`data: [DONE]`. Unstreamed, it is one `chat.completion` object with the same `usage`.

Every answer reports `PROMPT` prompt tokens of which `CACHED` cached, and `COMPLETION`
completion tokens of which `REASONING` reasoning; the requests, the tools each offered and the
figures each answer reported are recorded for assertions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import Request, Response

PROMPT = 2000
CACHED = 300
COMPLETION = 40
REASONING = 6
MODEL = "m1"

ToolCall = tuple[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]


@dataclass(frozen=True)
class Answered:
    """One answer: whether it was the scripted session's (it offered the tools), its figures."""

    scripted: bool
    prompt: int
    cached: int
    completion: int
    reasoning: int


def tool_results(body: Mapping[str, Any]) -> int:
    """How many tool results (`role: "tool"` messages) the conversation carries."""
    return sum(
        isinstance(message, dict) and message.get("role") == "tool"
        for message in body.get("messages") or []
    )


def tool_outputs(body: Mapping[str, Any]) -> list[str]:
    """The text of each tool result the conversation carries, in order."""
    outputs = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        outputs.append(content if isinstance(content, str) else json.dumps(content))
    return outputs


def offered(body: Mapping[str, Any]) -> list[str]:
    """The names of the function tools a request offers."""
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


@dataclass
class ScriptedChat:
    """Answers Chat Completions calls from a script of tool calls, then a final text."""

    calls: Sequence[ToolCall]
    final_text: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)
    answered: list[Answered] = field(default_factory=list)
    _count: int = 0

    def _next_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count:04d}"

    @property
    def tools(self) -> list[str]:
        """The tools the first scripted request offered."""
        return next((offered(body) for body in self.requests if offered(body)), [])

    @property
    def results(self) -> list[str]:
        """The tool results the last scripted request carried (what each call came back as)."""
        scripted = [body for body in self.requests if offered(body)]
        return tool_outputs(scripted[-1]) if scripted else []

    def _reply(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], str, bool]:
        """The assistant message for `body`, its finish reason, and whether it is scripted."""
        names = offered(body)
        done = tool_results(body)
        if not names:
            return {"role": "assistant", "content": "pairbot step"}, "stop", False
        if done < len(self.calls):
            name, make = self.calls[done]
            if name not in names:
                text = f"the scripted tool {name!r} is not offered (offered: {names})"
                return {"role": "assistant", "content": text}, "stop", True
            call = {
                "id": self._next_id("call"),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(make(body)))},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", True
        return {"role": "assistant", "content": self.final_text}, "stop", True

    async def answer(self, request: Request) -> Response:
        """The loopback handler."""
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return Response.of(404, b'{"error":{"message":"not found","type":"invalid_request"}}')
        body = json.loads(request.body or b"{}")
        self.requests.append(body)
        message, finish, scripted = self._reply(body)
        self.answered.append(Answered(scripted, PROMPT, CACHED, COMPLETION, REASONING))
        usage = {
            "prompt_tokens": PROMPT,
            "completion_tokens": COMPLETION,
            "total_tokens": PROMPT + COMPLETION,
            "prompt_tokens_details": {"cached_tokens": CACHED},
            "completion_tokens_details": {"reasoning_tokens": REASONING},
        }
        answer_id = self._next_id("chatcmpl")
        if not body.get("stream"):
            completion = {
                "id": answer_id,
                "object": "chat.completion",
                "created": 1700000000,
                "model": body.get("model", MODEL),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            headers = {"content-type": "application/json"}
            return Response.of(200, json.dumps(completion).encode(), headers)
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        chunks = [_chunk(answer_id, body, delta) for delta in _deltas(message)]
        chunks.append(_chunk(answer_id, body, {}, finish))
        if include_usage:
            chunks.append({**_chunk(answer_id, body, {}), "choices": [], "usage": usage})
        events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        return Response.of(200, "".join(events).encode(), headers)


def _deltas(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `delta`s streaming `message`: its role, then its text or its tool calls."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
        }
        deltas.append({"tool_calls": [head]})
        deltas.append(
            {"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}
        )
    return deltas


def _chunk(
    answer_id: str, body: Mapping[str, Any], delta: Mapping[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": answer_id,
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": body.get("model", MODEL),
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }
