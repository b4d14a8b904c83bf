"""`create_app(settings)`: the webhook service as a Starlette app (served by `pairbot serve`).

Routes (explicit; Starlette's decorators are deprecated):

    POST /webhooks/github         GitHub App deliveries
    POST /webhooks/azure-devops   Azure DevOps service hooks
    GET  /healthz                 liveness (503 when the worker has died)
    GET  /, /cards/…, /batches, /jobs, /api/v1/…, POST /jobs/{id}/retry
                                  the status pages and their JSON API (app.web.pages.routes),
                                  filtered by who is looking (app.web.viewer)
    GET  /signin, POST /signin, GET /oauth/callback, POST /signout
                                  sign-in (app.web.signin)

Every route but the webhooks, /healthz, the sign-in pages and /static/ is guarded by the
sign-in middleware (app.web.signin): it decides the request's viewer (app.web.viewer), and
redirects or refuses whoever is not signed in. A webhook POST never reaches it: the app
(`WebhooksFirst`, app.web.asgi) hands it to its endpoint before Starlette's middleware and router.

The GitHub edge, in this order, and thin:

    no X-Hub-Signature-256 that could be one (`sha256=` and 64 hex digits) → 401, unread
    → an X-GitHub-Delivery this process verified lately (app.web.recent, memory): 2xx
      "duplicate", the body unread. Only verified deliveries are remembered, so a forged
      header earns this answer and nothing else; an unknown id goes on to the checks below
    → read the raw body under the edge's limits (app.web.limits): past PAIR_MAX_BODY_BYTES
      stop reading: 413 (before reading, when Content-Length says so); no room left in the
      budget of body bytes held by all requests: 503 with Retry-After; not all there within
      PAIR_READ_TIMEOUT_S: 408 — each closes the connection
    → X-Hub-Signature-256 over it (sha256 only, constant time): wrong → 401
    → the cheap checks: Content-Type must be JSON (else 415), X-GitHub-Event and
      X-GitHub-Delivery present (else 400)
    → an event no route of pairbot's takes (app.web.events.GITHUB_EVENTS): 2xx, unparsed
    → parse → route on (event, action) (app.web.events, pure). A comment is only screened
      (`screen_comment`: own, bots, scope decisions, no trigger anywhere in it); one that may
      hold a command is queued unread, and the worker reads its command lines (the grammar
      costs more than the rest of the edge, and nothing it decides must precede the answer)
    → an identifier no host would send (app.domain.intake.identifiers: an installation id,
      an owner/name, a number, a commit, an Azure DevOps name): 422 naming the field and what
      is allowed, one log line, nothing written
    → pairbot's own and other bots' events: 2xx, one log line, nothing written
    → a delivery that queues no job and changes no installation: 2xx, nothing written (its
      redelivery would queue nothing either)
    → record the delivery id and queue its jobs in ONE transaction (Store.enqueue_delivery):
      a delivery seen before is a 2xx "duplicate" that does nothing, and so is one whose every
      job was already queued (its key exists: another delivery of the same comment queued it
      first); a crash before the commit loses nothing, because the redelivery then finds no
      record
    → 2xx at once; the worker (app.web.worker) runs the jobs out of band.

None of 401, 408, 413, 415, 400 or 503 writes anything. A signed delivery that is not for
pairbot is a 2xx and one log line (GitHub retries anything else, and there is nothing to
retry). The Azure DevOps edge is the same with Basic auth (or a secret header), checked
before the body is read, in place of the signature, the notification id in place of the
delivery id, and never a 410 (Azure DevOps disables a hook that answers 410). No traceback
ever reaches a response: an unexpected failure is a bare 500.

Nothing expensive runs on the event loop, so /healthz and every other request are answered
while a delivery is being read or parsed: a body over 64 KiB is verified in a worker thread
(hashlib releases the GIL on it), and a body over 32 KiB is parsed and routed (which reads a
comment's text, whatever its author put in it) in one, a bounded number at a time
(`parse_threads`). A smaller body is parsed and routed on the loop: its worst case costs
about a millisecond, and the hop to a thread cost an ordinary delivery more than its parse.
Below the app, `app.web.protocol` drops connections whose headers or body
do not arrive in time and `pairbot serve` caps the connections (app.web.serve).

The two webhook routes are small raw ASGI endpoints, called for a POST before Starlette's
stack (still in the explicit route list, for whatever else reaches those paths; an unexpected
failure is logged and answered with a bare 500 by `Endpoint`, as Starlette's error middleware
did): they read the body from the receive channel and the five headers they need from the
scope, and answer with two `send` calls. Starlette's Request, Headers and
JSONResponse cost more per delivery than everything the edge itself decides, and the edge is
what a burst of deliveries waits on (benchmarks/webhook_load.py). The body is parsed with
orjson; what orjson refuses but the standard library accepts is parsed by the latter, so the
line between a delivery and a 415 is where it always was. Each answer's two ASGI messages are
built once (constant answers are module constants or cached). Every delivery gets at most one
log line at INFO, `key=value` (app.web.recent.Line): a refusal's, an installation change's, or
for a queued delivery the worker's when its job ends; deliveries that queue nothing and
duplicates — most of what arrives — log at DEBUG only, and their line is not even built
unless DEBUG is on. uvicorn's access log is off unless PAIR_ACCESS_LOG asks for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import anyio.to_thread
import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import Receive, Scope

from app.store.base import Store
from app.store.factory import make_store
from app.web.answers import (
    DUPLICATE,
    NOT_JSON_TYPE,
    closing,
    ignored,
    is_json_type,
    json_object,
    not_for_pairbot,
    parse_json,
    queued,
    refusal,
    reply,
)
from app.web.asgi import Answer, Endpoint, WebhooksFirst, headers_of
from app.web.catchup import HookDeliveries
from app.web.catchup import hook_deliveries as catchup_source
from app.web.events import AZURE, GITHUB, GITHUB_EVENTS, Routed, route_github
from app.web.forge import AzureForges, Forges, GitHubForges, LocalForges
from app.web.handling import Executor
from app.web.limits import Gone, Hold, Refused, read_body
from app.web.pages.actions import Commands
from app.web.pages.read import Local
from app.web.pages.remote_state import RemoteState, remote_state_for
from app.web.pages.routes import Pages
from app.web.recent import Line
from app.web.service import GitHubRouter, Service
from app.web.settings import AppSettings, EdgeLimits
from app.web.signature import SIGNATURE_HEADER, verify_azure, verify_github, well_formed
from app.web.signin import SignIn, SignInService
from app.web.ticker import Tick
from app.web.worker_process import WorkerProcess

# What the benchmarks and tests reach here, beside `create_app`.
__all__ = [
    "MAX_BODY",
    "Answer",
    "create_app",
    "github_forges",
    "headers_of",
    "is_json_type",
    "parse_json",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

MAX_BODY = EdgeLimits().max_body_bytes  # the default cap (GitHub caps a delivery at 25 MB)
_VERIFY_INLINE = 64 * 1024  # a smaller body's HMAC costs less than a hop to a thread
# A body at most this long is parsed and routed on the loop: a 32 KiB delivery whose comment is
# all nested HTML comments and deep lists routes in about 1.5 ms; an ordinary 16 KB
# `issue_comment` in a tenth of that, less than the hop to a thread costs.
_ROUTE_INLINE = 32 * 1024

_GITHUB_HEADERS: Final = frozenset(
    {
        b"content-length",
        b"content-type",
        SIGNATURE_HEADER.encode(),
        b"x-github-event",
        b"x-github-delivery",
    }
)


class WebhookEdges:
    """The GitHub and Azure DevOps edges (the module docstring walks them), over the service's
    parts: its store, its policy (which learns the App's slug at start-up), its worker."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def github_webhook(self, scope: Scope, receive: Receive) -> Answer | None:
        headers = headers_of(scope, _GITHUB_HEADERS)
        signature = headers.get(SIGNATURE_HEADER)
        if not well_formed(signature):  # no body is worth reading without one
            why = "malformed" if signature else "missing"
            return self._unsigned(why, read=False)
        event = headers.get("x-github-event", "")
        delivery = headers.get("x-github-delivery", "")
        if delivery and self.service.recent.seen(GITHUB, delivery):
            # Before the body is read or verified: only verified deliveries are remembered, so
            # a forged header earns this answer and nothing else. The unread body is dropped
            # by the server (the connection stays usable).
            return self._duplicate(event, delivery)
        with self.service.budget.hold() as hold:
            body = await self._read(receive, headers, hold, GITHUB)
            if not isinstance(body, bytes):
                return body
            if not await self._verified_github(body, signature):
                return self._unsigned("wrong", read=True)
            if not is_json_type(headers.get("content-type")):
                return NOT_JSON_TYPE
            if not event or not delivery:
                return reply(400, "refused", reason="X-GitHub-Event and X-GitHub-Delivery needed")
            if event not in GITHUB_EVENTS:
                # Verified, and of an event pairbot never acts on: its body is not even parsed.
                return self._ignored(GITHUB, event, delivery, not_for_pairbot(event))
            read = await self._parsed(self._route_github_body, body, event, delivery, body)
            del body  # what the routing kept is all the rest needs
            if isinstance(read, Answer):
                return read
            action, routed = read
            return await self._accept(
                source=GITHUB, delivery=delivery, event=event, action=action, routed=routed
            )

    def _duplicate(self, name: str, delivery: str, source: str = GITHUB) -> Answer:
        if log.isEnabledFor(logging.DEBUG):  # a redelivery's line was logged the first time
            log.debug("delivery %s", _line(source, name, delivery, "duplicate", seen="memory"))
        return DUPLICATE

    def _ignored(self, source: str, name: str, delivery: str, reason: str) -> Answer:
        """A verified delivery that queues nothing and changes no installation: nothing is
        written (its redelivery is routed the same way and queues nothing either); remembered,
        so that a redelivery is answered before its body is read. DEBUG only: most deliveries
        are these, and a line each would cost more than answering them."""
        self.service.recent.remember(source, delivery)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("delivery %s", _line(source, name, delivery, "ignored", reason=reason))
        return ignored(reason)

    def _unsigned(self, why: str, *, read: bool) -> Answer:
        log.warning(
            "delivery %s",
            Line(source=GITHUB, outcome="refused", status=401, reason=f"{why} signature"),
        )
        answer = reply(401, "refused", reason=f"{why} X-Hub-Signature-256")
        return answer if read else closing(answer)

    def _route_github_body(
        self, event: str, delivery: str, body: bytes
    ) -> Answer | tuple[str | None, Routed]:
        """In a worker thread: the body's JSON, routed (the comment text is parsed here)."""
        payload = json_object(body)
        if isinstance(payload, Answer):
            return payload
        action = payload.get("action")
        if not isinstance(action, str):
            action = None
        return action, self.service.route_github(
            event, action, payload, self.service.policy, delivery
        )

    async def azure_webhook(self, scope: Scope, receive: Receive) -> Answer | None:
        headers = headers_of(scope)  # all of them: the secret header's name is configured
        settings = self.service.settings
        # The credentials travel in headers: checked before a byte of the body is read.
        if not verify_azure(
            headers,
            username=settings.ado_username,
            password=settings.ado_password.get_secret_value() if settings.ado_password else None,
            secret_header=self.service.ado_header,
        ):
            # 401, never 410: Azure DevOps disables a subscription that is answered 410.
            log.warning(
                "delivery %s",
                Line(source=AZURE, outcome="refused", status=401, reason="no valid credentials"),
            )
            return closing(Answer(401, headers=((b"www-authenticate", b'Basic realm="pairbot"'),)))
        with self.service.budget.hold() as hold:
            body = await self._read(receive, headers, hold, AZURE)
            if not isinstance(body, bytes):
                return body
            if not is_json_type(headers.get("content-type")):
                return NOT_JSON_TYPE
            read = await self._parsed(self._route_azure_body, body, body)
            del body
            if isinstance(read, Answer):
                return read
            notification, event, routed = read
            return await self._accept(
                source=AZURE, delivery=notification, event=event, action=None, routed=routed
            )

    def _route_azure_body(self, body: bytes) -> Answer | tuple[str, str, Routed]:
        """In a worker thread: the notification's JSON, routed."""
        payload = json_object(body)
        if isinstance(payload, Answer):
            return payload
        notification = payload.get("id")
        if not isinstance(notification, str) or not notification:
            return reply(400, "refused", reason="a service hook notification has an id")
        routed = self.service.route_azure(payload, self.service.policy, notification)
        return notification, str(payload.get("eventType") or ""), routed

    async def _read(
        self, receive: Receive, headers: Mapping[str, str], hold: Hold, source: str
    ) -> bytes | Answer | None:
        """The body under the edge's limits, or the refusal to answer (None: the client left)."""
        try:
            body = await read_body(
                receive, headers.get("content-length"), hold, self.service.limits
            )
        except Refused as refused:
            log.warning(
                "delivery %s",
                Line(
                    source=source, outcome="refused", status=refused.status, reason=refused.reason
                ),
            )
            return refusal(refused)
        except Gone:
            return None
        if self.service.after_body is not None:
            await self.service.after_body()
        return body

    async def _verified_github(self, body: bytes, signature: str | None) -> bool:
        if len(body) <= _VERIFY_INLINE:
            return verify_github(self.service.secret, body, signature)
        return await self._off_loop(verify_github, self.service.secret, body, signature)

    async def _parsed(self, work: Callable[..., _T], body: bytes, *args: Any) -> _T:
        """`work(*args)` — a body's parse and routing — on the loop for a small body (its worst
        case, a hostile comment, costs about a millisecond; the hop to a thread would cost more
        than an ordinary delivery's parse), in a worker thread past `_ROUTE_INLINE`."""
        if len(body) <= _ROUTE_INLINE:
            return work(*args)
        return await self._off_loop(work, *args)

    async def _off_loop(self, work: Callable[..., _T], *args: Any) -> _T:
        """`work(*args)` in a worker thread, at most `parse_threads` at a time."""
        return await anyio.to_thread.run_sync(work, *args, limiter=self.service.parse_limiter)

    async def _accept(
        self, *, source: str, delivery: str, event: str, action: str | None, routed: Routed
    ) -> Answer:
        name = f"{event}.{action}" if action else event
        # Azure DevOps' id is in the body: known only here. A GitHub delivery was checked before
        # its body was read; this catches its twin answered while its body was being read.
        if self.service.recent.seen(source, delivery):
            return self._duplicate(name, delivery, source)
        if routed.refused:  # an identifier no host would send: one line, nothing written
            log.warning(
                "delivery %s", _line(source, name, delivery, "refused", reason=routed.reason)
            )
            return reply(422, "refused", reason=routed.reason)
        if not routed.jobs and routed.installation is None:
            return self._ignored(source, name, delivery, routed.reason)
        try:
            queued_jobs = await self.service.store.enqueue_delivery(
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
            log.exception(
                "delivery %s", _line(source, name, delivery, "unavailable", reason="store error")
            )
            return reply(503, "unavailable", reason="the store is unavailable; redeliver later")
        self.service.recent.remember(source, delivery)
        if queued_jobs is None:
            log.info("delivery %s", _line(source, name, delivery, "duplicate", seen="store"))
            return DUPLICATE
        if routed.jobs and not queued_jobs:  # every job's key exists: nothing new to run
            log.info("delivery %s", _line(source, name, delivery, "duplicate", seen="job"))
            return DUPLICATE
        if routed.jobs:
            self.service.worker.wake()
            # DEBUG: the worker logs the delivery's one INFO line when its job ends.
            log.debug("delivery %s", _line(source, name, delivery, "queued", jobs=queued_jobs))
            return queued(queued_jobs)
        log.info("delivery %s", _line(source, name, delivery, "recorded", reason=routed.reason))
        return ignored(routed.reason)


def _line(source: str, name: str, delivery: str, outcome: str, **extra: object) -> Line:
    """The delivery's one log line (key=value; see app.web.recent)."""
    return Line(source=source, event=name, id=delivery, outcome=outcome, **extra)


def create_app(
    settings: AppSettings,
    *,
    store: Store | None = None,
    github: Forges | None = None,
    azure: Forges | None = None,
    executor: Executor | None = None,
    clock: Callable[[], float] = time.monotonic,
    after_body: Callable[[], Awaitable[None]] | None = None,
    local: Callable[[], Local] | None = None,
    root_repo: str = "",
    poll_s: float = 1.0,
    tick: Tick | None = None,
    github_router: GitHubRouter = route_github,
    oauth_transport: httpx.AsyncBaseTransport | None = None,
    wallclock: Callable[[], float] = time.time,
    hook_deliveries: HookDeliveries | None = None,
    remote: RemoteState | None = None,
    worker_process: WorkerProcess | None = None,
) -> Starlette:
    """The webhook service. Raises ConfigError without a webhook secret (it never serves
    unsigned).

    Seams, with production defaults: `store` (make_store, per PAIR_STORE), `github` (the App's
    forges, or the local forge under `forge: local`), `azure` (Azure DevOps from the host
    credentials), `executor` (what runs a job under `execution: worker`), `clock` (the
    permission cache's), `after_body` (awaited right after a body is read: a test uses it to
    stop a process there), `local` (what reads the run-state on this machine for the status
    pages: `app.web.pages.read.LocalReader`), `root_repo` (the repository the served project's
    own cards are listed under), `tick` (what
    the worker runs every PAIR_TICK_S to advance cards between commands: `execution: worker`),
    `github_router` (what reads a verified GitHub delivery, in a worker thread: a test slows
    it down to show the event loop does not wait on it), `oauth_transport` (the httpx transport
    of GitHub sign-in's OAuth and API calls), `wallclock` (the sign-in sessions' clock),
    `hook_deliveries` (where the catch-up of lost deliveries lists and redelivers them,
    app.web.catchup; by default the App's own on GitHub when `github` is the default too),
    `remote` (what reads the installed repositories' `pair-state` for the status pages,
    app.web.pages.remote_state; by default the App's own under `execution: actions` on GitHub
    when `github` is the default too), `worker_process` (the worker in a process of its own,
    app.web.worker_process, as `pairbot serve` runs it: this process then only wakes it, and
    `executor` and `tick` are the child's; None: the worker runs on this process's loop).
    """
    settings.require_webhook_secret()
    default_github = github is None
    github = github if github is not None else github_forges(settings)
    service = Service(
        settings,
        store=store if store is not None else _store(settings),
        github=github,
        azure=azure if azure is not None else AzureForges(settings.hosts, settings.root),
        executor=executor,
        clock=clock,
        after_body=after_body,
        poll_s=poll_s,
        tick=tick,
        github_router=github_router,
        hook_deliveries=(
            hook_deliveries
            if hook_deliveries is not None or not default_github
            else catchup_source(settings)
        ),
        worker_process=worker_process,
    )
    pages = Pages(
        service.store,
        local=local,
        root_repo=root_repo or f"local/{settings.root.name}",
        clock=time.time,
        wake=service.worker.wake,
        remote=(
            remote
            if remote is not None or not default_github
            else remote_state_for(settings.execution, github, service.store)
        ),
        # A card page's buttons: the comment path's forges, permission cache and policy.
        commands=Commands(
            service.store, github, service.handler.permissions, lambda: service.policy
        ),
    )
    signin = SignInService(settings, transport=oauth_transport, clock=wallclock)
    app = _starlette(service, pages, signin)
    app.state.service = service  # tests and the benchmark reach the worker and the store here
    return app


def _store(settings: AppSettings) -> Store:
    """The store PAIR_STORE names."""
    return make_store(
        settings.store,
        settings.store_url.get_secret_value() if settings.store_url else None,
        lease_s=settings.store_lease_s,
    )


def github_forges(settings: AppSettings) -> Forges:
    """The local forge under `forge: local`, else the GitHub App's (which answers nothing
    without the App's id and key: said once, at start-up)."""
    if settings.forge == "local":
        return LocalForges.for_root(settings.root, settings.hosts)
    if settings.app_id is None or settings.private_key is None:
        log.warning(
            "PAIR_APP_ID / PAIR_PRIVATE_KEY are not set: deliveries are verified and "
            "queued, but the jobs cannot answer on GitHub"
        )
    return GitHubForges(
        app_id=settings.app_id,
        private_key=(settings.private_key.get_secret_value() if settings.private_key else None),
        base_url=settings.github_api_url,
        host_options={"write_spacing_s": settings.hosts.github_write_spacing_s},
    )


def _starlette(service: Service, pages: Pages, signin: SignInService) -> Starlette:
    """The routes (explicit; the webhooks also taken first, before the middleware), the sign-in
    middleware and the lifespan."""
    edges = WebhookEdges(service)
    github_edge, azure_edge = Endpoint(edges.github_webhook), Endpoint(edges.azure_webhook)
    routes = [
        Route("/webhooks/github", github_edge, methods=["POST"]),
        Route("/webhooks/azure-devops", azure_edge, methods=["POST"]),
        Route("/healthz", service.healthz, methods=["GET"]),
    ]
    return WebhooksFirst(
        webhooks={"/webhooks/github": github_edge, "/webhooks/azure-devops": azure_edge},
        routes=[*routes, *signin.routes(), *pages.routes()],
        middleware=[Middleware(SignIn, service=signin)],
        lifespan=service.lifespan,
    )
