"""The App's background worker: drains the store's job queue, out of band of the webhook edge.

    Worker(store, handle, concurrency=4)        started in the app's lifespan
    cycle_executor(root, env, deps, hosts=…)    the production `Executor` for `execution:
                                                worker`: each job on the checkout of its own
                                                repository, its hosts acting as that repository

The edge answers GitHub as soon as a delivery's jobs are committed and wakes the worker; the
worker claims due jobs (at most one per card or pull at a time — the store guarantees it — and
at most `concurrency` overall) and runs each through the `JobHandler`. Jobs a dead process left
running are queued again on start (`Store.recover`), so nothing committed is ever lost.
A poll every `poll_s` catches jobs whose retry time has come. With a store shared by replicas
(PostgreSQL), a replica whose slots are all taken when a job is queued announces it, and the
others' workers wake at once (LISTEN/NOTIFY) instead of at their next poll.

`pairbot serve` runs this worker in a process of its own (app.web.worker_process: there it is
the process's one loop). With `own_loop=True` (an option, measured worse than both in
app.web.service: one GIL), the claims and the jobs run on the worker's own event loop,
in a thread of its own (`WorkerLoop`): a job's HTTP calls, its JSON and githubkit's models
never run between the edge's requests, so the edge's loop only parses, verifies, stores and
wakes. The store stays on the loop that opened it: every store call the worker and its jobs
make is sent there (`HomeStore`), so a store bound to its loop (PostgreSQL's pools) serves
both. The two threads still share the GIL; what runs on the worker's is I/O-bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from app.cycle.card_cycle import CardCycle
from app.domain.intake.pair_request import PairRequest
from app.store.base import JobRecord, Store
from app.web.checkouts import RepoId, acting_as, find_checkout
from app.web.handling import Executor
from app.web.jobs import Job, ScopeDecisionJob
from hosts.pacer import waiting_for_turn

if TYPE_CHECKING:
    from app.hosting import HostSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

DELIVERY_RETENTION_S = 30 * 24 * 3600.0  # GitHub redelivers for days; keep a month
# A job's dedupe key keeps a comment from being queued twice through two delivery ids. A
# finished job is forgotten this long after it was last updated, which is never before its
# delivery was received (both stamped by the store's clock), so the key outlives its delivery's
# record: never shorter than the deliveries' own window. Keep it >= DELIVERY_RETENTION_S.
JOB_RETENTION_S = DELIVERY_RETENTION_S
PRUNE_EVERY_S = 3600.0
# A job waiting for its turn to write (hosts.pacer) is parked: it holds no slot, so the next
# job (the next command's 👀) starts. At most this many times `concurrency` are parked.
PARKED_PER_SLOT = 8


class WorkerLoop:
    """An event loop in its own (daemon) thread, for the worker's claims and jobs."""

    def __init__(self, name: str = "pairbot-worker-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the worker's loop is not started")
        return self._loop

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            ready.set()
            try:
                loop.run_forever()
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        ready.wait()

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on this loop; await its result from any other loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def call(self, fn: Callable[[], object]) -> None:
        """Call `fn` on this loop's thread, soon (from any thread)."""
        self.loop.call_soon_threadsafe(fn)

    async def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 30)
        self._loop = None


class HomeStore:
    """The store as another loop sees it: each coroutine method runs on the store's own loop
    (`home`), awaited from the caller's; anything else is the store's attribute as is."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._home: asyncio.AbstractEventLoop | None = None

    def bind(self, home: asyncio.AbstractEventLoop | None) -> None:
        self._home = home

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        home = self._home
        if home is None or not asyncio.iscoroutinefunction(attr):
            return attr

        async def at_home(*args: Any, **kwargs: Any) -> Any:
            if asyncio.get_running_loop() is home:
                return await attr(*args, **kwargs)
            future = asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), home)
            return await asyncio.wrap_future(future)

        return at_home


class Worker:
    """Claims and runs jobs until stopped; `wake()` after queueing to skip the poll wait.

    `own_loop`: claims and jobs on a `WorkerLoop` (see the module docstring); `jobs_store` is
    then the store the handler must use (`HomeStore`), and `on_stop` runs on that loop before
    it ends (the App closes its GitHub pools there: they belong to that loop).
    """

    def __init__(
        self,
        store: Store,
        handle: Callable[[JobRecord], Awaitable[None]],
        *,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
        poll_s: float = 1.0,
        drain_s: float = 10.0,
        own_loop: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("the worker needs a concurrency of at least 1")
        self._home_store = HomeStore(store) if own_loop else None
        self.jobs_store = cast(Store, self._home_store) if own_loop else store
        self._store = self.jobs_store
        self._thread = WorkerLoop() if own_loop else None
        self._home: asyncio.AbstractEventLoop | None = None
        self.on_stop: Callable[[], Coroutine[Any, Any, None]] | None = None
        self._handle = handle
        self._concurrency = concurrency
        self._clock = clock
        self._poll_s = poll_s
        self._drain_s = drain_s
        self._wakeup = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._last_prune = float("-inf")
        # The queue may hold jobs this worker has not claimed: set by wake(), another
        # replica's announcement, a claim that filled every slot; cleared by a claim that did
        # not. While it is clear, a job's end claims nothing (the poll still looks).
        self._more = True
        self._stopping = False
        self._parked = 0  # running jobs waiting for a write turn (they hold no slot)
        self.max_parallel = 0  # the most jobs that ran at once (for tests and the status page)

    @property
    def healthy(self) -> bool:
        """Started and not dead."""
        return self._loop_task is not None and not self._loop_task.done()

    @property
    def busy(self) -> int:
        return len(self._running)

    def wake(self) -> None:
        """A job was queued here. When every slot is taken, a store shared by replicas is
        asked to tell the others (`announce`), so an idle one runs it now, not at its poll."""
        self._here(self._others_queued)
        if self._free() <= 0:
            announce = getattr(self._store, "announce", None)
            if announce is not None:
                announce()

    def at_home(self, fn: Callable[[], object]) -> None:
        """Call `fn` on the loop that started the worker (from a job, on the worker's own)."""
        if self._home is None or self._thread is None:
            fn()
        else:
            self._home.call_soon_threadsafe(fn)

    def _here(self, fn: Callable[[], object]) -> None:
        """Call `fn` on the worker's loop (its event and its sets are not thread-safe)."""
        if self._thread is None:
            fn()
        else:
            self._thread.call(fn)

    async def start(self) -> None:
        self._home = asyncio.get_running_loop()
        recovered = await self._store.recover()
        if recovered:
            log.warning("queued again %d job(s) a previous process left running", recovered)
        if self._thread is not None and self._home_store is not None:
            self._thread.start()
            self._home_store.bind(self._home)
        listen = getattr(self._store, "listen", None)
        if listen is not None:
            # Another replica's announcement only wakes this loop (never announces again).
            await listen(lambda: self._here(self._others_queued))
        if self._thread is None:
            self._loop_task = asyncio.create_task(self._loop(), name="pairbot-worker")
        else:
            self._loop_task = await self._thread.run(self._begin())

    async def _begin(self) -> asyncio.Task[None]:
        return asyncio.create_task(self._loop(), name="pairbot-worker")

    async def stop(self) -> None:
        """Stop claiming; let running jobs finish for up to `drain_s`, then cancel them."""
        if self._thread is None:
            await self._stop()
            if self.on_stop is not None:
                await self.on_stop()
            return
        try:
            await self._thread.run(self._stop())
            if self.on_stop is not None:
                await self._thread.run(self.on_stop())
        finally:
            await self._thread.stop()
            if self._home_store is not None:
                self._home_store.bind(None)

    async def _stop(self) -> None:
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._running:
            _, pending = await asyncio.wait(self._running, timeout=self._drain_s)
            for task in pending:
                task.cancel()  # left `running` in the store: the next start queues it again
            if pending:
                await asyncio.wait(pending)

    def _others_queued(self) -> None:
        self._more = True
        self._wakeup.set()

    async def _loop(self) -> None:
        # Checked as well as cancelled: on Python 3.11 a wait_for whose wait ends as the
        # cancellation arrives (a wake() just before stop()) returns instead of raising.
        while not self._stopping:
            self._wakeup.clear()  # before claiming: a wake() during the claim is not lost
            free = self._free()
            claimed: list[JobRecord] = []
            if free > 0:
                busy = len(self._running)
                self._more = False  # before the claim: a wake() during it sets it again
                try:
                    claimed = await self._store.claim(free, self._clock())
                    await self._prune()
                except Exception:
                    log.exception("the worker could not read the job queue; retrying")
                # More may wait: the slots ran out, or a job running here holds back the next
                # of its card (its end lets that one run).
                if len(claimed) == free or busy:
                    self._more = True
            for job in claimed:
                task = asyncio.create_task(self._run(job), name=f"pairbot-job-{job.id}")
                self._running.add(task)
                task.add_done_callback(self._done)
            self.max_parallel = max(self.max_parallel, len(self._running))
            if claimed and len(claimed) == free:
                continue  # the queue may hold more than there were slots
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._poll_s)

    def _free(self) -> int:
        """Slots to claim into: the parked jobs hold none, within their own bound."""
        active = len(self._running) - self._parked
        bound = PARKED_PER_SLOT * self._concurrency - len(self._running)
        return max(0, min(self._concurrency - active, bound))

    def _park(self, parked: bool) -> None:
        self._parked += 1 if parked else -1
        if parked and self._more:
            self._wakeup.set()  # a slot is free while this job waits: claim into it

    async def _run(self, job: JobRecord) -> None:
        parked = False

        def park(waiting: bool) -> None:
            nonlocal parked
            if waiting != parked:
                parked = waiting
                self._park(waiting)

        waiting_for_turn.set(park)  # this task's own context: its writes report here
        try:
            await self._handle(job)
        except Exception:
            # The handler records every outcome itself; this is a store failure while doing so.
            log.exception("job %s: its outcome could not be recorded", job.id)
        finally:
            park(False)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        # A freed slot is worth a claim only when jobs may be waiting: at a quiet rate, each
        # job's end would otherwise cost a claim that finds nothing.
        if self._more:
            self._wakeup.set()

    async def _prune(self) -> None:
        now = self._clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        pruned = await self._store.prune_deliveries(now - DELIVERY_RETENTION_S)
        if pruned:
            log.info("forgot %d deliveries older than 30 days", pruned)
        # Finished jobs only (the store keeps queued and running ones whatever their age);
        # without this the table, and the status page's scans of it, grow without bound.
        jobs = await self._store.prune_jobs(now - JOB_RETENTION_S)
        if jobs.jobs:
            log.info(
                "forgot %d finished jobs (%d command records) older than 30 days",
                jobs.jobs,
                jobs.commands,
            )


def cycle_executor(
    root: Path,
    env: Mapping[str, str],
    deps: Callable[[], Any],
    *,
    hosts: HostSettings,
    checkouts: Path | None = None,
    deps_for: Callable[[Path], Any] | None = None,
    any_repository: bool = False,
    run_url: str | None = None,
) -> Executor:
    """The production executor: one step of the card cycle (`app.cycle.card_cycle.CardCycle`)
    on the checkout of the job's repository, its hosts `hosts` (`AppSettings.hosts`) acting as
    that repository (`app.web.checkouts.acting_as`).

    Which checkout is `app.web.checkouts.find_checkout`'s decision: `root` or one under the
    `checkouts` directory (`PAIR_WORKER_CHECKOUTS`) whose `origin` is the job's repository. A
    job for a repository this worker has no checkout of raises a `UserError` (answered on the
    comment) before anything runs; `env` names the root's repository when its `origin` does
    not (`app.web.checkouts.configured_repo`). `deps()` are the engine's deps for `root`,
    `deps_for(path)` those for another checkout (an agent's runtime is bound to the tree it
    works in).
    `any_repository`: the App answers on the root's local forge (`pairbot serve --dev`), so
    the root serves every repository no checkout claims.
    `run_url`: the App's status page (`PAIR_PUBLIC_URL`), linked from every tracking comment a
    job writes; each job logs its host binding line, as a CLI run prints it.

    The engine is imported on the first job, so a webhook-only deployment never loads it.
    Each kind of job goes to the cycle's own entry for it: a command to `handle_request`, a
    scope decision to `handle_scope_decision` (which reads that comment back and validates it),
    a moved head to `handle_head_moved` (which ignores pairbot's own push). A plain `tick` would
    run whichever batch waited longest — not necessarily the pull the event was about.
    """
    if checkouts is not None and deps_for is None:
        raise ValueError("a checkouts directory needs deps_for: the deps of each checkout")

    async def execute(job: Job, repo: str, installation_id: int | None) -> None:
        # Reading the candidates' remotes runs git: off the event loop, which serves webhooks.
        checkout = await asyncio.to_thread(
            find_checkout,
            repo,
            installation_id,
            root=root,
            directory=checkouts,
            env=env,
            any_repository=any_repository,
        )
        if checkout.repo is not None and checkout.repo.host == "azure-devops":
            acting = acting_as(hosts, checkout.repo, None)  # the checkout names the repository
        else:
            # The job names its repository and installation: the hosts act as that installation.
            acting = acting_as(hosts, RepoId("github", repo), installation_id)
        same = checkout.path == root
        engine_deps = deps() if same or deps_for is None else deps_for(checkout.path)
        log.debug("a job for %s runs on the checkout at %s", repo, checkout.path)
        # Each job says its binding in the log, as a CLI run does on stderr; its tracking
        # comment links `run_url` (the App's status page).
        cycle = CardCycle.for_checkout(
            checkout.path, acting, engine_deps, say=log.info, run_url=run_url
        )
        if isinstance(job, PairRequest):
            await cycle.handle_request(job)
        elif isinstance(job, ScopeDecisionJob):
            await cycle.handle_scope_decision(job.pull, job.comment_id)
        else:
            await cycle.handle_head_moved(job.pull, job.head_sha)

    return execute
