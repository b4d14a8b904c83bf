"""The step under the `pair-state` lock, for both CI entries.

    prepare the checkout        `.pair/` for the run-state; persisted credentials removed
                                before any agent can read `.git/config`; pairbot's own git
                                authenticated through this process's environment
    an idle tick                of every batch: judged from the state branch without the lock,
                                and answered without loading the manifest; the catch-up's one
                                listing first (`action.run.catchup`): a command whose own run
                                never happened is handled instead of the tick
    take the lock               `action.statebranch.run_locked`: the pull, the checkpoints, the
                                push (even of a failed step) and the release are its
    act                         `action.run.act`, in the agent's log group
    the next run                decided under the lock (`action.run.next_run`: counted on
                                the state branch), asked of the CI after the release

A tick that finds the lock taken skips: the next tick comes. A command must not be lost
(GitHub keeps one pending run per concurrency group and cancels the rest; Azure DevOps hands a
notification once), so it waits for the running step, up to `lock_wait_s`, and says so when it
did not run.

An idle tick and a held lock never load the card cycle: `action.run.act` (the engine, the
hosts, the manifest's models) loads once the run has a step to take — this module's one seam.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from action.acks import read_pending
from action.credentials import drop_persisted_credentials
from action.run.catchup import Choice, look, write_cursor
from action.run.continuation import Plan
from action.run.next_run import continue_after, plan_continuation
from action.run.outcome import Outcome, lock_held
from action.run.platform import CiPlatform
from action.statebranch import DELIVERIES_FILE, StateBranch, run_locked
from app.cycle.schedule import IDLE_MESSAGE, tick_candidates
from app.domain.intake.intent import Intent, Tick
from hosts.git import run_git

__all__ = ["run_step"]


def run_step(platform: CiPlatform, intent: Intent, env: dict[str, str]) -> Outcome:
    """Take the lock, act on `intent`, push and release; the run's outcome."""
    return asyncio.run(_locked(platform, intent, env))


async def _locked(platform: CiPlatform, intent: Intent, env: dict[str, str]) -> Outcome:
    settings = platform.settings
    root = settings.workspace
    # A repository that only adds the workflow (docs/action.md, docs/azure-pipelines.md) has no
    # `.pair/`: every default applies, and the run-state still needs its directory.
    (root / ".pair").mkdir(exist_ok=True)
    drop_persisted_credentials(root)  # before any agent can read .git/config
    _authenticate_git(platform, root)
    branch = StateBranch(
        root,
        # The real clock, not the engine's `utc_now`: its module loads the step machinery.
        clock=lambda: datetime.now(UTC),
        host_id=platform.lock_owner,
        stale_after_s=settings.stale_after_s,
    )
    every_batch = isinstance(intent, Tick) and intent.batch is None
    choice = None
    if every_batch:
        idle, choice = await _peek(platform, branch, root)
        if idle and (choice is None or (choice.pick is None and not choice.push)):
            return Outcome(status="nothing-ready", message=IDLE_MESSAGE)
    wait = 0.0 if isinstance(intent, Tick) else settings.lock_wait_s
    if choice is not None and choice.pick is not None:
        intent = platform.catch_up(choice.pick)  # this run is the comment's own run now
    ticking = isinstance(intent, Tick) and intent.batch is None

    plan = Plan()

    async def act(save: Callable[[], Awaitable[None]]) -> Outcome:
        nonlocal plan
        if choice is not None and choice.cursor is not None:
            write_cursor(root, choice.cursor)  # pushed with the run-state, whatever follows
        if ticking and _idle(root):
            return Outcome(status="nothing-ready", message=IDLE_MESSAGE)
        from action.run.act import act_on  # noqa: PLC0415  # the seam: the card cycle loads here

        with platform.log.agent_log("pairbot: agent output") as log:
            done = await act_on(platform, intent, env, log, save)
        # A tick that ran no transition took no step; a command moved its card either way.
        stepped = bool(done.transition) or not isinstance(intent, Tick)
        today = datetime.now(UTC).date().isoformat()
        more = choice is not None and choice.more > 0  # missed commands still waiting
        plan = plan_continuation(
            root, done, platform.continuation, today, stepped=stepped, pending=more
        )
        return done

    run_id = f"{platform.run_id}-{uuid.uuid4().hex[:8]}"
    outcome = await run_locked(branch, root, run_id, act, lambda o: o.status, wait_s=wait)
    if outcome is None:
        return lock_held(intent, wait)
    # After the release: the run it starts must find the lock free.
    return await continue_after(platform, plan, outcome)


def _authenticate_git(platform: CiPlatform, root: Path) -> None:
    """pairbot's own git (the state branch, card-branch fetches) authenticates with the job's
    token through environment configuration, so a checkout needs no persisted credential
    (`persist-credentials: false`, `persistCredentials: false`) that an agent could read.

    Set in this process's environment only: the agent's environment is built from the
    snapshot taken before, and `agent_environment` strips `GIT_CONFIG_*` besides.
    """
    url = run_git(["remote", "get-url", "origin"], cwd=root, check=False).stdout.strip()
    if url.startswith(("http://", "https://")):
        os.environ.update(platform.git_credentials(url, os.environ))


async def _peek(
    platform: CiPlatform, branch: StateBranch, root: Path
) -> tuple[bool, Choice | None]:
    """Whether a tick of every batch has nothing to do, judged without the lock, and what the
    catch-up found (`action.run.catchup`: None when it is off or could not list).

    An idle tick writes nothing, so it needs no lock: the state branch is read (one fetch,
    no push) into a scratch directory, never into the checkout — a file another run deletes
    before this one takes the lock must not come back with its push. Idle means: no batch on
    the checkout's branch or the state branch that a tick would look at, no acknowledgement
    owed, and no lock on the branch (a lock, even a dead run's, takes the locked path, which
    reclaims a stale one). Anything else takes the locked path, which judges again. The
    catch-up's one listing is judged against the same scratch copy (its cursor, the handled
    comments).
    """
    with tempfile.TemporaryDirectory(prefix="pairbot-peek-") as scratch:
        state = Path(scratch)
        peek = branch.pull(state)
        idle = not (
            tick_candidates(root) or peek.locked or read_pending(state) or tick_candidates(state)
        )
        settings = platform.catchup
        if not settings.enabled:
            return idle, None
        source = platform.catchup_source()
        if source is None:
            return idle, None
        choice = await look(source, state, settings, DELIVERIES_FILE, platform.log.say)
        return idle, choice


def _idle(root: Path) -> bool:
    """Whether the pulled run-state leaves a tick of every batch nothing to do.

    The candidates are the card cycle's own (`app.cycle.schedule.tick_candidates`, which the
    full tick walks too); with none, and no acknowledgement owed from an earlier run, the tick
    would build its hosts, say the binding and answer nothing-ready without an API call.
    """
    return not (read_pending(root) or tick_candidates(root))
