"""A scripted model behind the Gemini API, on loopback, for the real `gemini` CLI.

    model = ScriptedGemini(call={"name": "write_file", "args": {...}})
    with serve(model.answer, name="gemini") as origin:       # GOOGLE_GEMINI_BASE_URL=origin
        ...                                                  # run gemini ... (see settings())

It answers `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (server-sent events,
one `GenerateContentResponse` each; https://ai.google.dev/api/generate-content): the scripted
`functionCall` while the request carries no `functionResponse`, then a closing text. Every
answer reports `PROMPT` prompt tokens, `CACHED` of them cached, and `CANDIDATES` output tokens.

gemini 0.61 reads GOOGLE_GEMINI_BASE_URL as its "gateway" auth type, which its own auth check
then refuses ("Invalid auth method selected."), so the tests select the API-key auth in the
user settings (`settings()`) and pass GEMINI_API_KEY; the base URL still points the client at
the loopback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import Request, Response

PROMPT = 1000
CACHED = 200
CANDIDATES = 50
FINAL_TEXT = "Done: the file is written."


def settings() -> str:
    """The user settings.json that selects API-key auth."""
    return json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})


@dataclass
class ScriptedGemini:
    """Answers gemini's streamGenerateContent calls from a one-function-call script."""

    call: Mapping[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def answer(self, request: Request) -> Response:
        """The loopback handler."""
        if request.method != "POST" or not request.path.endswith(":streamGenerateContent"):
            return Response.of(404, b'{"error":{"code":404,"status":"NOT_FOUND"}}')
        body = json.loads(request.body or b"{}")
        self.requests.append(body)
        answered = any(
            isinstance(part, dict) and "functionResponse" in part
            for content in body.get("contents", [])
            for part in content.get("parts", [])
        )
        part = {"text": FINAL_TEXT} if answered else {"functionCall": dict(self.call)}
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": PROMPT,
                "cachedContentTokenCount": CACHED,
                "candidatesTokenCount": CANDIDATES,
                "totalTokenCount": PROMPT + CANDIDATES,
            },
            "modelVersion": "gemini-2.5-pro",
        }
        sse = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
        return Response.of(200, sse, {"content-type": "text/event-stream"})
