"""The catch-up of lost GitHub deliveries: the App asks GitHub again for what it did not take.

    CatchUp(hooks, store=…, interval_s=…, window_s=…, cap=…)   started in the app's lifespan
    hook_deliveries(settings) -> AppHookDeliveries | None        the production source

GitHub never redelivers a failed delivery by itself: a command whose delivery the App answered
503 (the edge under a flood, a store outage), or never answered (the App down or restarting),
would be lost. So at start and then every PAIR_CATCHUP_S the App lists its own webhook
deliveries (a few seconds after start, so that the edge is listening when GitHub sends them
again; `GET /app/hook/deliveries` with its JWT, newest first, page by page until the
window PAIR_CATCHUP_WINDOW_S is covered) and asks GitHub to send again each one that
`app.domain.intake.catchup.plan_redeliveries` picks: no attempt of its guid succeeded, its
event is one the App acts on, its answer could change, at most PAIR_CATCHUP_MAX a pass, oldest
first (`POST /app/hook/deliveries/{id}/attempts`). The redelivery arrives at the webhook edge
like any delivery, with the same `X-GitHub-Delivery`, so the store's de-duplication holds: a
delivery the App did record (GitHub gave up waiting for its answer) is a "duplicate" there.
GitHub sends an accepted redelivery afterwards, so the pass remembers what it asked for and a
later pass does not ask again until `PENDING_S` has gone by without the new attempt listed.

Replicas sharing a store (PostgreSQL) take turns: one pass at a time across them
(`app.store.factory.alone_across_replicas`, under its own lock name). A pass that fails — GitHub
answers 5xx, a rate limit, the network — is one log line; nothing is lost, the next pass lists
again. A redelivery GitHub refused is one line too, and the pass goes on with the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from app.domain.intake.catchup import (
    GITHUB_KEEPS_S,
    PENDING_S,
    HookDelivery,
    Plan,
    plan_redeliveries,
    read_deliveries,
)
from app.store.base import Store
from app.store.factory import alone_across_replicas
from app.web.events import GITHUB_ROUTES
from app.web.settings import AppSettings
from hosts.errors import HostError, RateLimited
from hosts.github.deliveries import PAGE, AppHookDeliveries

log = logging.getLogger(__name__)

__all__ = ["ACTS_ON", "CatchUp", "HookDeliveries", "PassReport", "hook_deliveries"]

# The deliveries worth asking for again: those that can queue a job or change an installation
# (a ping changes nothing).
ACTS_ON: Final = frozenset(route for route in GITHUB_ROUTES if route[0] != "ping")
# A pass reads at most this many pages (GitHub's page is 100): a bound on one pass's reads.
MAX_PAGES: Final = 50


class HookDeliveries(Protocol):
    """Where the App's deliveries are listed and redelivered (`AppHookDeliveries`)."""

    async def page(
        self, cursor: str | None = None, per_page: int = PAGE
    ) -> tuple[list[dict[str, Any]], str | None]: ...

    async def redeliver(self, delivery_id: int) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class PassReport:
    """What one pass saw and did (its log line; tests read `CatchUp.last`)."""

    listed: int
    pages: int
    unreadable: int
    plan: Plan
    redelivered: tuple[str, ...]  # the guids GitHub accepted to send again
    refused: int  # redeliveries GitHub refused (logged each)


def hook_deliveries(settings: AppSettings) -> AppHookDeliveries | None:
    """The App's own deliveries on GitHub, or None when there is no catch-up to do: the local
    forge, no App credentials, or PAIR_CATCHUP_S=0."""
    if settings.forge != "github" or settings.catchup_s <= 0:
        return None
    if settings.app_id is None or settings.private_key is None:
        return None
    return AppHookDeliveries(
        settings.app_id,
        settings.private_key.get_secret_value(),
        base_url=settings.github_api_url,
    )


class CatchUp:
    """At start and every `interval_s`: list, decide, redeliver (see the module docstring)."""

    def __init__(
        self,
        hooks: HookDeliveries,
        *,
        store: Store,
        interval_s: float,
        window_s: float = GITHUB_KEEPS_S,
        cap: int = 20,
        per_page: int = PAGE,
        start_delay_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("a catch-up needs a positive interval (0 turns it off upstream)")
        self._hooks = hooks
        self._interval_s = interval_s
        self._window_s = min(window_s, GITHUB_KEEPS_S)
        self._cap = cap
        self._per_page = per_page
        self._start_delay_s = start_delay_s
        self._clock = clock
        self._pass = alone_across_replicas(store, self._run, name="catchup")
        self._task: asyncio.Task[None] | None = None
        # Attempt ids whose redelivery GitHub accepted → when (this replica's clock): not asked
        # for again while GitHub's new attempt is on its way (`plan_redeliveries`' `asked`).
        self._asked: dict[int, float] = {}
        self.passes = 0  # passes attempted (tests wait on it)
        self.last: PassReport | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="pairbot-catchup")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._hooks.aclose()

    async def _loop(self) -> None:
        # The first pass a moment after start: the edge is listening when GitHub redelivers.
        await asyncio.sleep(self._start_delay_s)
        while True:
            try:
                await self._pass()
            except HostError as error:  # GitHub's 5xx, a rate limit, the network: next pass
                log.warning(
                    "catch-up of lost deliveries failed: %s (the next pass is in %gs)",
                    error,
                    self._interval_s,
                )
            except Exception:  # a bug: the traceback is what a report needs; the loop goes on
                log.exception("catch-up of lost deliveries failed")
            self.passes += 1
            await asyncio.sleep(self._interval_s)

    async def _run(self) -> bool:
        """One pass: list the window, plan, redeliver. True when it asked for any."""
        now = self._clock()
        listed, pages, unreadable = await self._list(now - self._window_s)
        self._asked = {i: at for i, at in self._asked.items() if now - at < PENDING_S}
        plan = plan_redeliveries(
            listed, ACTS_ON, now=now, window_s=self._window_s, cap=self._cap, asked=self._asked
        )
        redelivered, refused = await self._redeliver(plan.redeliver, now)
        report = PassReport(len(listed), pages, unreadable, plan, redelivered, refused)
        self.last = report
        _log(report)
        return bool(redelivered)

    async def _list(self, since: float) -> tuple[list[HookDelivery], int, int]:
        """Every delivery since `since` (newest first, page by page), the pages read, and how
        many items were unreadable."""
        listed: list[HookDelivery] = []
        unreadable = pages = 0
        cursor: str | None = None
        while pages < MAX_PAGES:
            items, cursor = await self._hooks.page(cursor, self._per_page)
            pages += 1
            read, bad = read_deliveries(items)
            listed += read
            unreadable += bad
            if cursor is None or not read or min(d.delivered_at for d in read) < since:
                break
        return listed, pages, unreadable

    async def _redeliver(
        self, wanted: tuple[HookDelivery, ...], now: float
    ) -> tuple[tuple[str, ...], int]:
        done: list[str] = []
        refused = 0
        for delivery in wanted:
            try:
                await self._hooks.redeliver(delivery.id)
            except RateLimited:
                raise  # the rest wait for the next pass; the loop logs it once
            except HostError as error:
                refused += 1
                log.warning(
                    "catch-up: GitHub did not redeliver %s (%s %s): %s",
                    delivery.guid,
                    delivery.event,
                    delivery.action or "-",
                    error,
                )
                continue
            done.append(delivery.guid)
            self._asked[delivery.id] = now
        return tuple(done), refused


def _log(report: PassReport) -> None:
    plan = report.plan
    if not report.redelivered and not report.refused and not plan.deferred and not plan.pending:
        log.debug("catch-up: %d deliveries listed, none lost", report.listed)
        return
    log.info(
        "catch-up: %d deliveries listed (%d pages), %d lost; asked GitHub to redeliver %d "
        "(%s), %d refused, %d left for the next pass; not asked: %d not the App's, "
        "%d answered for good, %d tried too often, %d already asked for and on their way",
        report.listed,
        report.pages,
        plan.failed,
        len(report.redelivered),
        ", ".join(report.redelivered) or "-",
        report.refused,
        plan.deferred,
        plan.not_ours,
        plan.final,
        plan.exhausted,
        plan.pending,
    )
