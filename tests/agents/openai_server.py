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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

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
