"""A scripted model behind the Anthropic Messages API, on loopback, for the real `claude` CLI.

    model = ScriptedModel(tool_name="Write", tool_input={"file_path": ..., "content": ...})
    with serve(model.answer, name="anthropic") as origin:    # ANTHROPIC_BASE_URL=origin
        ...                                                  # run claude -p ...

It speaks enough of https://docs.anthropic.com/en/api/messages and its streaming form
(https://docs.anthropic.com/en/api/messages-streaming) for one agent turn with one tool call:

    a request offering the scripted tool, with no tool_result yet  -> that tool_use
    ... with N tool_results, N < 1 + len(then)                     -> the call `then[N-1]`
    a request carrying every tool_result                            -> the final text, end_turn
    any other request (a title, a summary, a quota probe)           -> a short text, end_turn

Each answer is streamed as server-sent events when the request asks for `stream: true`
(message_start, content_block_start / _delta / _stop, message_delta with the output tokens,
message_stop) and is one JSON message otherwise; `count_tokens` answers a fixed count. Every
message reports `USAGE_IN` input tokens and `USAGE_OUT` output tokens, so a test can find the
figures the real stream reported (a subclass can vary them per request with `usage_for`). The
requests, and the figures each answer reported, are recorded for assertions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import Request, Response

USAGE_IN = 1234
USAGE_OUT = 56
MODEL = "claude-sonnet-4-5"


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


@dataclass
class ScriptedModel:
    """Answers claude's Messages API calls from a one-tool-call script."""

    tool_name: str
    tool_input: Mapping[str, Any]
    final_text: str = "Done: the file is written."
    # Tool calls after the first, each (name, input built from the request), one per answer.
    then: Sequence[tuple[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]] = ()
    requests: list[dict[str, Any]] = field(default_factory=list)
    # (input tokens, output tokens) of each message answered, in order, with its request.
    reported: list[tuple[dict[str, Any], int, int]] = field(default_factory=list)
    _count: int = 0

    def _next_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count:04d}"

    def _blocks(self, body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The content blocks to answer `body` with, and the stop reason."""
        tools = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
        messages = body.get("messages") or []
        results = sum(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for message in messages
            if isinstance(message, dict) and isinstance(message.get("content"), list)
            for block in message["content"]
        )
        calls = [(self.tool_name, lambda _body: self.tool_input), *self.then]
        if self.tool_name in tools and results < len(calls):
            name, make_input = calls[results]
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": self._next_id("toolu"),
                "name": name,
                "input": dict(make_input(body)),
            }
            return [block], "tool_use"
        text = self.final_text if results else "pairbot"
        return [{"type": "text", "text": text}], "end_turn"

    def usage_for(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """The (input, output) tokens the answer to `body` reports."""
        del body
        return USAGE_IN, USAGE_OUT

    async def answer(self, request: Request) -> Response:
        """The loopback handler."""
        if request.method != "POST" or not request.path.startswith("/v1/messages"):
            return Response.of(404, b'{"type":"error","error":{"type":"not_found_error"}}')
        body = json.loads(request.body or b"{}")
        self.requests.append({"path": request.path, "body": body})
        if request.path.endswith("/count_tokens"):
            return Response.of(200, json.dumps({"input_tokens": USAGE_IN}).encode())
        blocks, stop = self._blocks(body)
        usage_in, usage_out = self.usage_for(body)
        self.reported.append((body, usage_in, usage_out))
        message_id = self._next_id("msg")
        if not body.get("stream"):
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
            }
            headers = {"content-type": "application/json"}
            return Response.of(200, json.dumps(message).encode(), headers)
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage_in, "output_tokens": 1},
                },
            }
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                {"type": "content_block_start", "index": index, "content_block": start},
                {"type": "content_block_delta", "index": index, "delta": delta},
                {"type": "content_block_stop", "index": index},
            ]
        events += [
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage_out},
            },
            {"type": "message_stop"},
        ]
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        return Response.of(200, _sse(events), headers)
