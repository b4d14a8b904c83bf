"""Worker mode's schedule: cards advance between commands, one step per tick.

With `execution: actions` a repository's scheduled workflow ticks (`pairbot tick` in the
Action); with `execution: worker` nothing else would, and a `/pair implement` would run its
first step and stop there. So the App ticks itself:

    Ticker(tick, interval_s)               started in the app's lifespan when a tick is given
    checkout_tick(root, env, …, hosts=…)   the production tick: `CardCycle.tick` on each
                                           checkout, built from the App's `HostSettings`

A tick is exactly what the Action's scheduled run is — one step of the batch that has waited
longest (`CardCycle.tick`; a card waiting for a person costs no API call) — on the root
and on each checkout under PAIR_WORKER_CHECKOUTS in turn, stopping at the first that ran a
step. After a step the next tick follows at once (a card goes from refinement to a reviewed
pull request without anyone commenting again), at most `chain` in a row before the interval
is waited out; after an idle tick the interval is waited, or until `wake()` (a job finished:
the card it touched may have a step to run). A tick that fails is logged and retried after the
interval. Ticks and jobs may meet on one card: the cycle's batch lock lets one of them run and
the other skip (the tick) or retry (the job).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cycle.card_cycle import CardCycle, CardStep
from app.failures import explain
from app.web.checkouts import acting_as, checkout_dirs, checkout_repo

if TYPE_CHECKING:
    from app.hosting import HostSettings

log = logging.getLogger(__name__)

Tick = Callable[[], Awaitable[bool]]  # True when a step ran


class Ticker:
    """Runs `tick` every `interval_s`, back to back while it keeps running steps."""

    def __init__(self, tick: Tick, *, interval_s: float, chain: int = 20) -> None:
        if interval_s <= 0:
            raise ValueError("a ticker needs a positive interval (0 turns ticking off upstream)")
        if chain < 1:
            raise ValueError("a ticker chains at least one step")
        self._tick = tick
        self._interval_s = interval_s
        self._chain = chain
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.ticks = 0  # how many ticks ran (the status page and tests read it)

    def wake(self) -> None:
        self._wakeup.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="pairbot-ticker")

    async def stop(self) -> None:
        # A step cancelled midway is what a killed process leaves: the cycle is built to
        # resume it (its journal and its pushes are crash-safe).
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        chained = 0
        while True:
            self._wakeup.clear()  # before ticking: a wake() during the tick is not lost
            try:
                ran = await self._tick()
            except Exception as error:
                explained = explain(error)
                if explained is None:  # a bug: the traceback is what a report needs
                    log.exception(
                        "a scheduled tick failed; the next one is in %.0fs", self._interval_s
                    )
                else:  # a host's, git's or pairbot's own failure: one line with its remedy
                    log.error(
                        "a scheduled tick failed: %s (the next one is in %.0fs)",
                        explained.line,
                        self._interval_s,
                    )
                ran = False
            self.ticks += 1
            if ran and chained + 1 < self._chain:
                chained += 1
                await asyncio.sleep(0)  # let the edge and the jobs in between two steps
                continue
            chained = 0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._interval_s)


def checkout_tick(
    root: Path,
    env: Mapping[str, str],
    deps_for: Callable[[Path], Any],
    *,
    hosts: HostSettings,
    checkouts: Path | None,
    installation_of: Callable[[str], Awaitable[int | None]],
) -> Tick:
    """The production tick: `CardCycle.tick` on the root, then on each checkout under
    `checkouts` (`<owner>/<name>`), until one runs a step.

    A checkout's cycle is built from `hosts` (`AppSettings.hosts`) acting as its repository
    (`app.web.checkouts.checkout_repo`; `env` names the root's when its `origin` does not): a
    GitHub checkout as the installation its last job came from (`installation_of(repo)`, from
    the store), an Azure DevOps checkout as its project and repository. A checkout with no
    batch is skipped before anything is built, so an idle tick reads a directory listing and
    journals only.
    """
    known: dict[str, int] = {}  # an installation of a repository changes only on reinstall

    async def installation(repo: str) -> int | None:
        if repo not in known and (found := await installation_of(repo)) is not None:
            known[repo] = found
        return known.get(repo)

    async def tick() -> bool:
        for path in await asyncio.to_thread(_candidates, root, checkouts):
            acting = await _acting_as(path, env, hosts, installation)
            step = await CardCycle.for_checkout(path, acting, deps_for(path)).tick()
            result = step.result if isinstance(step, CardStep) else step
            if result.state != "nothing-ready":
                log.info(
                    "tick on %s: %s %s → %s",
                    path,
                    result.change or "?",
                    result.transition or "-",
                    result.state,
                )
                return True
        return False

    return tick


def _candidates(root: Path, checkouts: Path | None) -> list[Path]:
    """The root and each `<owner>/<name>` checkout that holds a batch (blocking reads)."""
    paths = [root, *(checkout_dirs(checkouts) if checkouts is not None else [])]
    return [p for p in paths if (p / ".pair" / "batches").is_dir()]


async def _acting_as(
    path: Path,
    env: Mapping[str, str],
    hosts: HostSettings,
    installation_of: Callable[[str], Awaitable[int | None]],
) -> HostSettings:
    """The hosts' settings a step on `path` acts with (as `cycle_executor` builds for a job)."""
    # checkout_repo runs git: in a thread, off the event loop that serves webhooks.

    repo = await asyncio.to_thread(checkout_repo, path, env)
    if repo is None:
        return hosts  # the local-forge root: its config names everything
    installation = await installation_of(repo.name) if repo.host == "github" else None
    return acting_as(hosts, repo, installation)
