"""A scripted model behind the Gemini API, on loopback, for the real `gemini` CLI.

    model = ScriptedGemini(call={"name": "write_file", "args": {...}})
    with serve(model.answer, name="gemini") as origin:       # GOOGLE_GEMINI_BASE_URL=origin
        ...                                                  # run gemini ... (see settings())

It answers `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (server-sent events,
one `GenerateContentResponse` each; https://ai.google.dev/api/generate-content): the scripted
`functionCall` while the request carries no `functionResponse`, then a closing text. With
`then`, a request carrying N `functionResponse` parts, N < 1 + len(then), gets the call
`then[N-1]` (its args built from the request, e.g. tests/agents/script.py `report_command`).
Every answer reports `PROMPT` prompt tokens, `CACHED` of them cached, and `CANDIDATES` output
tokens; `reported` counts the answers, for the usage a test expects.

gemini 0.61 reads GOOGLE_GEMINI_BASE_URL as its "gateway" auth type, which its own auth check
then refuses ("Invalid auth method selected."), so the tests select the API-key auth in the
user settings (`settings()`) and pass GEMINI_API_KEY; the base URL still points the client at
the loopback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
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
    """Answers gemini's streamGenerateContent calls from a function-call script."""

    call: Mapping[str, Any]
    # Function calls after the first, each (name, args built from the request), one per answer.
    then: Sequence[tuple[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]] = ()
    final_text: str = FINAL_TEXT
    requests: list[dict[str, Any]] = field(default_factory=list)
    reported: int = 0  # the answers given, each PROMPT in (CACHED cached) and CANDIDATES out

    def _part(self, body: Mapping[str, Any]) -> dict[str, Any]:
        answered = sum(
            isinstance(part, dict) and "functionResponse" in part
            for content in body.get("contents", [])
            for part in content.get("parts", [])
        )
        if answered == 0:
            return {"functionCall": dict(self.call)}
        if answered <= len(self.then):
            name, make_args = self.then[answered - 1]
            return {"functionCall": {"name": name, "args": dict(make_args(body))}}
        return {"text": self.final_text}

    async def answer(self, request: Request) -> Response:
        """The loopback handler."""
        if request.method != "POST" or not request.path.endswith(":streamGenerateContent"):
            return Response.of(404, b'{"error":{"code":404,"status":"NOT_FOUND"}}')
        body = json.loads(request.body or b"{}")
        self.requests.append(body)
        part = self._part(body)
        self.reported += 1
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
