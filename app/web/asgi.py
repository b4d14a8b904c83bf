"""The webhook edges' raw ASGI: a request's headers read from its scope, an `Answer` sent in
two messages, the endpoint that answers an unexpected failure with a bare 500, and the app that
hands a webhook POST to its endpoint before Starlette's middleware and router.

Starlette's Request, Headers and JSONResponse cost more per delivery than everything the edge
itself decides, and the edge is what a burst of deliveries waits on
(benchmarks/webhook_load.py): these are what the edges use instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

# The edge's own logger: operators' filters (and tests) know the edge's lines by this name.
log = logging.getLogger("app.web.app")


class Answer:
    """An HTTP answer of the webhook edges: status, body (JSON unless `headers` say otherwise).

    Its two ASGI messages are built once, when the answer is: the constant answers (duplicate,
    the refusals, each ignored reason and queued count, cached) cost nothing per request but
    the two `send` calls. Nothing between the route and uvicorn changes a message it is sent
    (no middleware here rewrites headers), so the same two dicts serve every request.
    """

    __slots__ = ("_body", "_start", "body", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),),
    ) -> None:
        self.status, self.body, self.headers = status, body, headers
        self._start = {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", b"%d" % len(body))],
        }
        self._body = {"type": "http.response.body", "body": body}

    async def send(self, send: Send) -> None:
        await send(self._start)
        await send(self._body)


def headers_of(scope: Scope, wanted: frozenset[bytes] | None = None) -> dict[str, str]:
    """The request's headers by lower-case name (the first of repeated ones, as Starlette's
    `Headers.get`), only `wanted` ones when given. ASGI header names are lower-case bytes."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        if wanted is not None and name not in wanted:
            continue
        key = name.decode("latin-1")
        if key not in found:
            found[key] = value.decode("latin-1")
    return found


SERVER_ERROR: Final = Answer(
    500, b"Internal Server Error", ((b"content-type", b"text/plain; charset=utf-8"),)
)


class Endpoint:
    """A raw ASGI endpoint: called by `WebhooksFirst` before Starlette's stack, and in the
    route list for what that does not take (Starlette serves an object that is neither a
    function nor a method as ASGI as it is; a function would be wrapped in Request/Response).

    An unexpected failure is logged for the operator and answered with a bare 500: Starlette's
    error middleware, which did that before, is not in front of it any more.
    """

    __slots__ = ("_handle",)

    def __init__(self, handle: Callable[[Scope, Receive], Awaitable[Answer | None]]) -> None:
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            answer = await self._handle(scope, receive)
        except Exception:
            log.exception("the webhook edge failed on POST %s", scope.get("path"))
            answer = SERVER_ERROR  # nothing was sent yet: an answer is sent whole, at the end
        if answer is not None:
            await answer.send(send)


class WebhooksFirst(Starlette):
    """Starlette, except that `POST` to a webhook path goes straight to its endpoint.

    Webhook deliveries are the requests that come in bursts, and none of the stack in front
    of the routes is theirs: the sign-in middleware (sessions, CSRF, security headers) guards
    the pages, Starlette's error middleware is replaced by `Endpoint`'s, and the router would
    match the path against every page's pattern. One dict lookup replaces all of it. The
    routes stay in the route list too, so anything else sent to those paths (another method,
    the app mounted under a root path) gets Starlette's answer as before.
    """

    def __init__(self, *, webhooks: Mapping[str, Endpoint], **options: Any) -> None:
        super().__init__(**options)
        self._webhooks = dict(webhooks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self._webhooks.get(scope["path"])
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
