"""`create_app(settings)`: the webhook service as a Starlette app (served by `pairbot serve`).

Routes (explicit; Starlette's decorators are deprecated):

    POST /webhooks/github         GitHub App deliveries
    POST /webhooks/azure-devops   Azure DevOps service hooks
    GET  /healthz                 liveness (503 when the worker has died)
    GET  /                        the read-only status page

The GitHub edge, in this order, and thin (CONVENTIONS 7):

    read the raw body (streamed; past 25 MiB stop reading: 413)
    → X-Hub-Signature-256 over it (sha256 only, constant time): missing or wrong → 401
    → the body must be JSON (Content-Type and content): else 415
    → parse → route on (event, action) (app.web.events, pure)
    → pairbot's own and other bots' events: 2xx, one log line, nothing written
    → record the delivery id and queue its jobs in ONE transaction (Store.enqueue_delivery):
      a delivery seen before is a 2xx that does nothing; a crash before the commit loses
      nothing, because the redelivery then finds no record
    → 2xx at once; the worker (app.web.worker) runs the jobs out of band.

None of 401, 413, 415 or 400 writes anything. A signed delivery that is not for pairbot is a
2xx and one log line (GitHub retries anything else, and there is nothing to retry). The Azure
DevOps edge is the same with Basic auth (or a secret header) in place of the signature, the
notification id in place of the delivery id, and never a 410 (Azure DevOps disables a hook
that answers 410). No traceback ever reaches a response: an unexpected failure is a bare 500.

The two webhook routes are small raw ASGI endpoints (still in the explicit route list, behind
Starlette's error middleware): they read the body from the receive channel and the five headers
they need from the scope, and answer with two `send` calls. Starlette's Request, Headers and
JSONResponse cost more per delivery than everything the edge itself decides, and the edge is
what a burst of deliveries waits on (benchmarks/webhook_load.py). The body is parsed with
orjson; what orjson refuses but the standard library accepts is parsed by the latter, so the
line between a delivery and a 415 is where it always was. A queued delivery is logged by the
worker when its job ends (one line per delivery at INFO); the edge's own line about it is DEBUG.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.store.base import JobRecord, Store
from app.store.sqlite import SqliteStore
from app.web import dashboard
from app.web.events import AZURE, GITHUB, Policy, Routed, route_azure, route_github
from app.web.forge import AzureForges, Forges, GitHubForges, LocalForges
from app.web.handling import Executor, JobHandler, PermissionCache
from app.web.settings import AppSettings, parse_secret_header
from app.web.signature import SIGNATURE_HEADER, verify_azure, verify_github
from app.web.ticker import Tick, Ticker
from app.web.worker import Worker
from hosts.errors import HostError

log = logging.getLogger(__name__)

MAX_BODY = 25 * 1024 * 1024  # GitHub caps a delivery at 25 MB; nothing legitimate is larger
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _TooLarge(Exception):
    """The body passed MAX_BODY."""


class _Gone(Exception):
    """The client disconnected before the whole body arrived: nothing to answer."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer of the webhook edges: status, body (JSON unless `headers` say otherwise)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),)

    async def send(self, send: Send) -> None:
        headers = [*self.headers, (b"content-length", b"%d" % len(self.body))]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


_GITHUB_HEADERS: Final = frozenset(
    {
        b"content-length",
        b"content-type",
        SIGNATURE_HEADER.encode(),
        b"x-github-event",
        b"x-github-delivery",
    }
)


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


async def read_body(receive: Receive, declared: str | None, limit: int = MAX_BODY) -> bytes:
    """The raw body from the ASGI receive channel, read no further than `limit` bytes
    (`_TooLarge` past it, before reading anything when Content-Length already says so)."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Gone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        if not message.get("more_body", False):
            if not chunks:
                return chunk  # the whole body in one message: the usual case, no copy
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


def is_json_type(content_type: str | None) -> bool:
    """`application/json`, with or without parameters (GitHub and Azure DevOps send it)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


def parse_json(body: bytes) -> Any:
    """The body's JSON value; ValueError or RecursionError when it is not JSON.

    orjson parses a delivery about three times faster than `json` (a comment delivery is 7-15 KB,
    and the edge parses every one). It is stricter in a few corners the standard library
    accepts — NaN and Infinity, a byte-order mark, UTF-16/32, a lone surrogate escape, nesting
    past 1024 — so whatever it refuses goes to `json.loads` before it counts as "not JSON":
    the 415 line does not move. (One difference remains: orjson reads an integer past 64 bits
    as a float; no webhook field is one.)
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def _reply(status: int, outcome: str, **extra: Any) -> Answer:
    return Answer(status, orjson.dumps({"status": outcome, **extra}))


class _Endpoint:
    """A raw ASGI endpoint for the route list: Starlette serves an object that is neither a
    function nor a method as ASGI as it is (a function would be wrapped in Request/Response)."""

    def __init__(self, handle: Callable[[Scope, Receive], Awaitable[Answer | None]]) -> None:
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = await self._handle(scope, receive)
        if answer is not None:
            await answer.send(send)


class _Service:
    """The app's parts, built once in `create_app` and shared by the routes and the lifespan."""

    def __init__(
        self,
        settings: AppSettings,
        *,
        store: Store,
        github: Forges,
        azure: Forges | None,
        executor: Executor | None,
        clock: Callable[[], float],
        after_body: Callable[[], Awaitable[None]] | None,
        batches: Callable[[], list[dashboard.BatchView]] | None,
        poll_s: float,
        tick: Tick | None,
    ) -> None:
        self.settings = settings
        self.secret = settings.require_webhook_secret()
        self.store = store
        self.github = github
        self.azure = azure
        self.after_body = after_body
        self.batches = batches
        self.policy = Policy(
            trigger=settings.trigger,
            app_slug=settings.app_slug,
            app_id=settings.app_id,
            allowlist=settings.allowlist,
        )
        self.ado_header = (
            parse_secret_header(settings.ado_secret_header.get_secret_value())
            if settings.ado_secret_header is not None
            else None
        )
        self.handler = JobHandler(
            store=store,
            github=github,
            azure=azure,
            executor=executor,
            execution=settings.execution,
            policy=lambda: self.policy,
            permissions=PermissionCache(settings.permission_ttl_s, clock),
        )
        self.ticker = (
            Ticker(tick, interval_s=settings.tick_s)
            if tick is not None and settings.tick_s > 0
            else None
        )
        self.worker = Worker(
            store, self._handle, concurrency=settings.worker_concurrency, poll_s=poll_s
        )
        self._background: set[asyncio.Task[None]] = set()

    async def _handle(self, job: JobRecord) -> None:
        await self.handler(job)
        if self.ticker is not None:
            self.ticker.wake()  # the card this job touched may have its next step to run

    # -- lifespan -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        await self.store.open()
        if self.policy.app_slug is None and isinstance(self.github, GitHubForges):
            task = asyncio.create_task(self._learn_slug())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        await self.worker.start()
        if self.ticker is not None:
            await self.ticker.start()
        log.info(
            "pairbot serves webhooks (execution: %s, store: %s)",
            self.settings.execution,
            self.settings.store,
        )
        try:
            yield
        finally:
            for task in list(self._background):
                task.cancel()
            if self.ticker is not None:
                await self.ticker.stop()
            await self.worker.stop()
            await self.github.aclose()
            if self.azure is not None:
                await self.azure.aclose()
            await self.store.close()

    async def _learn_slug(self) -> None:
        """`@<slug>[bot]` addressing and own-login detection need the slug: ask GitHub once."""
        assert isinstance(self.github, GitHubForges)  # noqa: S101 - checked by the caller
        try:
            slug = await self.github.app_slug()
        except HostError as err:
            log.warning("could not read the App's slug (set PAIR_APP_SLUG): %s", err)
            return
        if slug:
            self.policy = Policy(
                trigger=self.policy.trigger,
                app_slug=slug,
                app_id=self.policy.app_id,
                allowlist=self.policy.allowlist,
            )
            log.info("the App is @%s[bot]", slug)

    # -- the edges ------------------------------------------------------------------------------

    async def github_webhook(self, scope: Scope, receive: Receive) -> Answer | None:
        headers = headers_of(scope, _GITHUB_HEADERS)
        try:
            body = await read_body(receive, headers.get("content-length"))
        except _TooLarge:
            log.warning("refused a GitHub delivery over %d bytes (413)", MAX_BODY)
            return _reply(413, "refused", reason="the body is over 25 MiB")
        except _Gone:
            return None
        if self.after_body is not None:
            await self.after_body()
        signature = headers.get(SIGNATURE_HEADER)
        if not verify_github(self.secret, body, signature):
            why = "wrong" if signature else "missing"
            log.warning("refused a GitHub delivery with a %s X-Hub-Signature-256 (401)", why)
            return _reply(401, "refused", reason=f"{why} X-Hub-Signature-256")
        payload = _json_object(headers.get("content-type"), body)
        if isinstance(payload, Answer):
            return payload
        event = headers.get("x-github-event", "")
        delivery = headers.get("x-github-delivery", "")
        if not event or not delivery:
            return _reply(400, "refused", reason="X-GitHub-Event and X-GitHub-Delivery needed")
        action = payload.get("action")
        if not isinstance(action, str):
            action = None
        routed = route_github(event, action, payload, self.policy, delivery)
        return await self._accept(
            source=GITHUB, delivery=delivery, event=event, action=action, routed=routed
        )

    async def azure_webhook(self, scope: Scope, receive: Receive) -> Answer | None:
        headers = headers_of(scope)  # all of them: the secret header's name is configured
        try:
            body = await read_body(receive, headers.get("content-length"))
        except _TooLarge:
            log.warning("refused an Azure DevOps notification over %d bytes (413)", MAX_BODY)
            return _reply(413, "refused", reason="the body is over 25 MiB")
        except _Gone:
            return None
        if self.after_body is not None:
            await self.after_body()
        settings = self.settings
        if not verify_azure(
            headers,
            username=settings.ado_username,
            password=settings.ado_password.get_secret_value() if settings.ado_password else None,
            secret_header=self.ado_header,
        ):
            # 401, never 410: Azure DevOps disables a subscription that is answered 410.
            log.warning("refused an Azure DevOps notification without valid credentials (401)")
            return Answer(401, headers=((b"www-authenticate", b'Basic realm="pairbot"'),))
        payload = _json_object(headers.get("content-type"), body)
        if isinstance(payload, Answer):
            return payload
        notification = payload.get("id")
        if not isinstance(notification, str) or not notification:
            return _reply(400, "refused", reason="a service hook notification has an id")
        routed = route_azure(payload, self.policy, notification)
        event = str(payload.get("eventType") or "")
        return await self._accept(
            source=AZURE, delivery=notification, event=event, action=None, routed=routed
        )

    async def _accept(
        self, *, source: str, delivery: str, event: str, action: str | None, routed: Routed
    ) -> Answer:
        name = f"{event}.{action}" if action else event
        if routed.silent:
            log.info("%s %s %s: ignored: %s", source, name, delivery, routed.reason)
            return _reply(200, "ignored", reason=routed.reason)
        try:
            fresh = await self.store.enqueue_delivery(
                delivery,
                event,
                action,
                routed.jobs,
                source=source,
                status=routed.reason,
                installation=routed.installation,
            )
        except Exception:
            # Nothing was recorded: a redelivery will be processed. Operator-facing.
            log.exception("%s %s %s: could not record the delivery", source, name, delivery)
            return _reply(503, "unavailable", reason="the store is unavailable; redeliver later")
        if not fresh:
            log.info("%s %s %s: already received; nothing to do", source, name, delivery)
            return _DUPLICATE
        if routed.jobs:
            self.worker.wake()
            # DEBUG: the worker logs the delivery's one INFO line when its job ends.
            log.debug("%s %s %s: queued: %s", source, name, delivery, routed.reason)
            return _reply(202, "queued", jobs=len(routed.jobs))
        log.info("%s %s %s: ignored: %s", source, name, delivery, routed.reason)
        return _reply(200, "ignored", reason=routed.reason)

    # -- reading --------------------------------------------------------------------------------

    async def healthz(self, _request: Request) -> Response:
        if not self.worker.healthy:
            return JSONResponse({"status": "unhealthy", "worker": "stopped"}, status_code=503)
        return JSONResponse({"status": "ok", "worker": "running"})

    async def status_page(self, _request: Request) -> Response:
        batches = await asyncio.to_thread(self.batches) if self.batches is not None else []
        snapshot = dashboard.Snapshot(
            now=time.time(),
            execution=self.settings.execution,
            worker_healthy=self.worker.healthy,
            counts=await self.store.counts(),
            installations=await self.store.installations(),
            batches=batches,
            jobs=await self.store.jobs(200),
            deliveries=await self.store.deliveries(50),
        )
        return HTMLResponse(dashboard.render(snapshot), headers=_PAGE_HEADERS)


_DUPLICATE: Final = _reply(200, "duplicate")


def _json_object(content_type: str | None, body: bytes) -> Mapping[str, Any] | Answer:
    """The body as a JSON object, or the 415 / 400 answer."""
    if not is_json_type(content_type):
        return _reply(415, "refused", reason="send application/json (the webhook's content type)")
    try:
        payload = parse_json(body)
    except (ValueError, RecursionError):
        return _reply(415, "refused", reason="the body is not JSON")
    if not isinstance(payload, dict):
        return _reply(400, "refused", reason="the body is not a JSON object")
    return payload


def create_app(
    settings: AppSettings,
    *,
    store: Store | None = None,
    github: Forges | None = None,
    azure: Forges | None = None,
    executor: Executor | None = None,
    clock: Callable[[], float] = time.monotonic,
    after_body: Callable[[], Awaitable[None]] | None = None,
    batches: Callable[[], list[dashboard.BatchView]] | None = None,
    poll_s: float = 1.0,
    tick: Tick | None = None,
) -> Starlette:
    """The webhook service. Raises ConfigError without a webhook secret (it never serves
    unsigned).

    Seams, with production defaults: `store` (SqliteStore at PAIR_STORE), `github` (the App's
    forges, or the local forge under `forge: local`), `azure` (Azure DevOps from the host
    credentials), `executor` (what runs a job under `execution: worker`), `clock` (the
    permission cache's), `after_body` (awaited right after a body is read: a test uses it to
    stop a process there), `batches` (the local batches the status page lists), `tick` (what
    the worker runs every PAIR_TICK_S to advance cards between commands: `execution: worker`).
    """
    settings.require_webhook_secret()
    if github is None:
        if settings.forge == "local":
            github = LocalForges.for_root(settings.root, settings.hosts)
        else:
            if settings.app_id is None or settings.private_key is None:
                log.warning(
                    "PAIR_APP_ID / PAIR_PRIVATE_KEY are not set: deliveries are verified and "
                    "queued, but the jobs cannot answer on GitHub"
                )
            github = GitHubForges(
                app_id=settings.app_id,
                private_key=(
                    settings.private_key.get_secret_value() if settings.private_key else None
                ),
                base_url=settings.github_api_url,
                host_options={"write_spacing_s": settings.hosts.github_write_spacing_s},
            )
    service = _Service(
        settings,
        store=store if store is not None else SqliteStore(settings.store),
        github=github,
        azure=azure if azure is not None else AzureForges(settings.hosts, settings.root),
        executor=executor,
        clock=clock,
        after_body=after_body,
        batches=batches,
        poll_s=poll_s,
        tick=tick,
    )
    routes = [
        Route("/webhooks/github", _Endpoint(service.github_webhook), methods=["POST"]),
        Route("/webhooks/azure-devops", _Endpoint(service.azure_webhook), methods=["POST"]),
        Route("/healthz", service.healthz, methods=["GET"]),
        Route("/", service.status_page, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=service.lifespan)
    app.state.service = service  # tests and the benchmark reach the worker and the store here
    return app
