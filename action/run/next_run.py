"""Keeping cards moving between CI runs: whether this run asks its CI for the next one.

Each run still takes exactly one step. After a run that took one, and while the run-state
leaves a batch a scheduled tick would run, the run asks its CI for another run of the same
workflow or pipeline (GitHub: a `workflow_dispatch`, `action.continuation`; Azure Pipelines: a
queued run, `action.azure.continuation`) instead of leaving the card to the cron:

    plan = plan_continuation(root, outcome, settings, today, stepped=…)   under the lock
    outcome = await continue_after(platform, plan, outcome)              after the release

- The next run is a tick of every batch, not of the card this run stepped: the tick takes the
  batch whose step waited longest (`app.cycle.schedule.tick_candidates`, oldest first, as
  `app.cycle.driver.tick` walks them), so several active cards share the chained runs.
- A card at a gate (awaiting approval, an answer or a scope decision, ready for merge, merged,
  failed, blocked, escalated, parked) is no tick candidate: when every card is at one, no run
  is asked for. A run that took no step (nothing ready, ignored, a duplicate, an error, a
  blocked step, a tick that ran no transition) asks for none either, so a chain always ends.
- Missed commands (`action.run.catchup`): while more wait behind the one a tick caught up
  on, the next run is asked for whatever this run's outcome was, one command a run.
- A runaway loop is bounded: the chained runs each card's steps asked for today (UTC) are
  counted in `.pair/continuation.json` on the state branch; a card at its `daily_limit` asks
  for no more today, and its next step waits for the schedule.
- The request is made after the `pair-state` lock is released, so the run it starts finds the
  lock free; a CI that refuses it (a missing permission) costs nothing but the wait for the
  schedule, and the log and summary say what to grant.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Final

from action.run.continuation import Continuation, ContinuationSettings, Plan
from action.run.outcome import Outcome
from action.run.platform import CiPlatform
from action.statefiles import CONTINUATION_FILE, write_bytes_atomic
from app.cycle.schedule import card_key, tick_candidates

__all__ = ["NO_STEP", "continue_after", "plan_continuation"]

# A run with one of these statuses took no step: it asks for no next run.
NO_STEP: Final = frozenset({"nothing-ready", "ignored", "duplicate", "error"})
PLAIN_BATCHES: Final = "batches"  # the counter's key for a step of a batch that is no card's
CATCH_UP: Final = "catch-up"  # the counter's key for missed commands that name no card yet


def plan_continuation(
    root: Path,
    outcome: Outcome,
    settings: ContinuationSettings,
    today: str,
    *,
    stepped: bool,
    pending: bool = False,
) -> Plan:
    """Whether this run asks for the next one; counts it in the state branch's file.

    `root` holds the run-state as this run leaves it (under the lock, before the push);
    `stepped`: the run took a step or applied a command (a tick that ran no transition did
    not); `today` is the UTC date (`YYYY-MM-DD`) the daily count is for; `pending`: missed
    commands wait behind the one this run caught up on (`action.run.catchup`), so the next run
    is asked for whatever this one's outcome was (each takes one; the daily bound still holds)."""
    if not settings.enabled:
        return Plan()
    if not pending:
        if not stepped or outcome.status in NO_STEP or outcome.code != 0:
            return Plan()
        if not tick_candidates(root):  # every card waits for a person or is done
            return Plan()
    key = card_key(outcome.card) if outcome.card else (CATCH_UP if pending else PLAIN_BATCHES)
    counts = _read_counts(root / CONTINUATION_FILE, today)
    done = counts.get(key, 0)
    if done >= settings.daily_limit:
        return Plan(
            note=(
                f"{key} took {done} chained runs today (the limit is {settings.daily_limit}): "
                "no next run is asked for; the schedule takes its next step"
            )
        )
    counts[key] = done + 1
    body = json.dumps({"day": today, "runs": counts}, sort_keys=True, indent=2) + "\n"
    write_bytes_atomic(root / CONTINUATION_FILE, body.encode("utf-8"))
    return Plan(Continuation(after=key, count=done + 1))


async def continue_after(platform: CiPlatform, plan: Plan, outcome: Outcome) -> Outcome:
    """Ask the CI for the planned run (after the lock's release); the outcome with what came
    of it. A refusal or a failure is said, never the run's failure: the schedule still ticks."""
    if plan.note:
        platform.log.say(f"pairbot: {plan.note}")
        return replace(outcome, continuation=plan.note)
    if plan.next_run is None:
        return outcome
    answer = await platform.request_continuation(plan.next_run)
    platform.log.say(f"pairbot: {answer.line}")
    said = answer.line if answer.ok else " ".join(p for p in (answer.line, answer.remedy) if p)
    if answer.remedy:
        platform.log.say(f"pairbot: {answer.remedy}")
    return replace(outcome, continuation=said)


def _read_counts(path: Path, today: str) -> dict[str, int]:
    """Today's counts from the file; a missing, unreadable or older file counts nothing."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("day") != today:
        return {}
    runs = data.get("runs")
    if not isinstance(runs, dict):
        return {}
    return {str(k): v for k, v in runs.items() if isinstance(v, int) and not isinstance(v, bool)}
