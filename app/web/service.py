"""The App's parts, built once by `create_app` and shared by its routes and its lifespan: the
store, the forges, the policy, the job handler, the worker, the ticker and the catch-up of lost
deliveries (app.web.catchup), and the edge's budget of body bytes and memory of recent
deliveries.

The lifespan opens the store, learns the App's slug when it is not configured, starts the
worker, the ticker and the catch-up, and stops them all in the reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.store.base import JobRecord, Store
from app.web.catchup import CatchUp, HookDeliveries
from app.web.events import Payload, Policy, Routed, route_azure
from app.web.forge import Forges, GitHubForges
from app.web.handling import Executor, JobHandler, PermissionCache
from app.web.limits import BodyBudget
from app.web.recent import RecentDeliveries
from app.web.settings import AppSettings, parse_secret_header
from app.web.ticker import Tick, Ticker
from app.web.worker import Worker
from app.web.worker_process import WorkerProcess, describe
from hosts.errors import HostError

# The edge's logger name: operators' filters (and tests) know the service's lines by it.
log = logging.getLogger("app.web.app")

GitHubRouter = Callable[[str, str | None, Payload, Policy, str], Routed]
AzureRouter = Callable[[Payload, Policy, str], Routed]


class Service:
    """The app's parts, built once in `create_app` and shared by the routes and the lifespan
    (the webhook edges read theirs here: app.web.app.WebhookEdges)."""

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
        poll_s: float,
        tick: Tick | None,
        github_router: GitHubRouter,
        hook_deliveries: HookDeliveries | None = None,
        worker_process: WorkerProcess | None = None,
        role: str = "serves webhooks",
    ) -> None:
        self.settings = settings
        self.role = role  # the start-up line's words: the edge's, or the worker's process's
        self.secret = settings.require_webhook_secret()
        self.store = store
        self.github = github
        self.azure = azure
        self.after_body = after_body
        self.limits = settings.limits
        self.budget = BodyBudget(settings.limits)
        self.parse_limiter = anyio.CapacityLimiter(settings.limits.parse_threads)
        self.recent = RecentDeliveries(settings.limits.recent_deliveries)
        self.route_github = github_router
        self.route_azure: AzureRouter = route_azure
        self.policy = _policy(settings)
        self.ado_header = (
            parse_secret_header(settings.ado_secret_header.get_secret_value())
            if settings.ado_secret_header is not None
            else None
        )
        # With `worker_process` (`pairbot serve`'s default) the jobs run in a process of their
        # own (app.web.worker_process) and this one only wakes it: measured with
        # benchmarks/command_path.py, the App then answers commands at about 1.5x the rate it
        # does with the jobs on this loop (docs/app.md, the command path). Without it, they
        # share the edge's loop; on their own loop in a thread (`own_loop`) they cost more
        # still: their work is Python (httpx, githubkit, JSON) under the one GIL.
        self.worker: Worker | WorkerProcess
        if worker_process is None:
            self.worker = Worker(
                store,
                self._handle,
                concurrency=settings.worker_concurrency,
                poll_s=poll_s,
                own_loop=False,
            )
            self.worker.on_stop = github.aclose  # on the worker's loop, which its pools belong to
        else:
            self.worker = worker_process
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
        self.catchup = _catchup(settings, hook_deliveries, store)
        self._background: set[asyncio.Task[None]] = set()

    async def _handle(self, job: JobRecord) -> None:
        await self.handler(job)
        if self.ticker is not None:
            # The card this job touched may have its next step to run.
            self.ticker.wake()

    # -- lifespan -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        await self.store.open()
        if self.policy.app_slug is None and isinstance(self.github, GitHubForges):
            task = asyncio.create_task(self._learn_slug())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        # The worker's and the ticker's hosts, built per job, join the App's GitHub sessions:
        # one warm pool and token per installation (app.web.forge.GitHubForges.shared).
        with self._hosts_shared():
            await self.worker.start()
            if self.ticker is not None:
                await self.ticker.start()
        if self.catchup is not None:
            await self.catchup.start()
        log.info(
            "pairbot %s (execution: %s, store: %s)",
            self.role,
            self.settings.execution,
            self.settings.store_label,
        )
        try:
            yield
        finally:
            for task in list(self._background):
                task.cancel()
            if self.catchup is not None:
                await self.catchup.stop()
            if self.ticker is not None:
                await self.ticker.stop()
            await self.worker.stop()
            await self.github.aclose()
            if self.azure is not None:
                await self.azure.aclose()
            await self.store.close()

    def _hosts_shared(self) -> contextlib.AbstractContextManager[None]:
        if isinstance(self.github, GitHubForges):
            return self.github.shared()
        return contextlib.nullcontext()

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
                identity_allowlist=self.policy.identity_allowlist,
            )
            log.info("the App is @%s[bot]", slug)

    # -- reading --------------------------------------------------------------------------------

    async def healthz(self, _request: Request) -> Response:
        if not self.worker.healthy:
            return JSONResponse({"status": "unhealthy", **describe(self.worker)}, status_code=503)
        return JSONResponse({"status": "ok", **describe(self.worker)})


def _policy(settings: AppSettings) -> Policy:
    """Who may command the App and how it is addressed, from its settings."""
    return Policy(
        trigger=settings.trigger,
        app_slug=settings.app_slug,
        app_id=settings.app_id,
        allowlist=settings.allowlist,
        identity_allowlist=settings.azure_allowlist,
    )


def _catchup(
    settings: AppSettings, hook_deliveries: HookDeliveries | None, store: Store
) -> CatchUp | None:
    """GitHub's lost deliveries, asked for again (app.web.catchup): with the App's own only."""
    if hook_deliveries is None or settings.catchup_s <= 0:
        return None
    return CatchUp(
        hook_deliveries,
        store=store,
        interval_s=settings.catchup_s,
        window_s=settings.catchup_window_s,
        cap=settings.catchup_max,
        start_delay_s=min(5.0, settings.catchup_s),
    )
