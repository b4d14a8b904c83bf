"""The bookkeeper: a finished cycle's lesson, written beside the run-state or proposed by a PR.

When a card's cycle ends (its PR merged, or the card abandoned after work), `bookkeep` distils
the cycle's lesson from its journal as it now stands (`app.cycle.lesson_files`, over the pure
`app.domain.reports.lesson`), naming the files the cycle's head changed, and either writes it
beside the run-state (`lessons.where: state-branch`) or opens a PR of its own to the base branch
(`default-branch`), once per run. A lesson is an aid, never part of the card's outcome.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Literal

from app.cycle import worktree as wt
from app.cycle.lesson_files import changed_files, distill_lesson, open_lesson_pull, record_lesson
from app.cycle.state import CardState
from app.domain.text.mdtext import one_line
from app.engine import jsonl
from hosts.errors import HostError

log = logging.getLogger(__name__)


async def bookkeep(
    state: CardState, ending: Literal["merged", "abandoned"], repo: Path, head: str
) -> None:
    """The bookkeeper: the finished cycle's lesson, from its journal as it now stands, naming
    the files `head` changed — written beside the run-state, or proposed to the base branch
    through a PR of its own (`lessons.where`). A lesson is an aid, never part of the card's
    outcome: one that cannot be written or proposed is logged for the operator (and a PR
    that cannot be opened journaled as `lesson-pr-failed`), and the step goes on."""
    where = state.project.lessons.where
    if where == "state-branch":
        await asyncio.to_thread(_write_lesson, state, ending, repo, head)
    elif where == "default-branch":
        await _propose_lesson(state, ending, repo, head)


def _write_lesson(
    state: CardState, ending: Literal["merged", "abandoned"], repo: Path, head: str
) -> None:
    try:
        base = state.env.base_branch or wt.current_branch(state.env.root, state.env.deps.env)
        record_lesson(
            state.env.root,
            state.project.lessons,
            jsonl.read_records(state.locus.journal),
            card=state.card,
            key=state.key,
            run=state.rec.run_id,
            ending=ending,
            files=changed_files(repo, base, head),
        )
    except (OSError, wt.WorktreeError) as err:
        log.warning("card #%s: its lesson was not written: %s", state.card, err)


def _lesson_pr_recorded(records: list[Any], key: str, run: str | None) -> bool:
    return any(
        r.get("kind") == "cycle"
        and r.get("key") == key
        and isinstance(r.get("data"), dict)
        and r["data"].get("event") == "lesson-pr"
        and r["data"].get("run") == run
        for r in records
    )


async def _propose_lesson(
    state: CardState, ending: Literal["merged", "abandoned"], repo: Path, head: str
) -> None:
    """The lesson on its own branch and PR to the base branch, once per run: a `lesson-pr`
    entry in the journal says it is open, and a later step of the card skips it."""
    run = state.rec.run_id
    records = await asyncio.to_thread(jsonl.read_records, state.locus.journal)
    if _lesson_pr_recorded(records, state.key, run):
        return
    try:
        base = state.env.base_branch or wt.current_branch(state.env.root, state.env.deps.env)
        # The files first: preparing the lesson's branch fetches the base, which now holds
        # the card's own merged work.
        files = await asyncio.to_thread(changed_files, repo, base, head)
        lesson = distill_lesson(
            state.project.lessons,
            records,
            card=state.card,
            key=state.key,
            run=run,
            ending=ending,
            files=files,
        )
        if lesson is None:
            return
        pull = await open_lesson_pull(
            state.pub.code, state.env.root, lesson, base, state.env.remote
        )
    except (OSError, wt.WorktreeError, HostError) as err:
        log.warning("card #%s: its lesson's PR was not opened: %s", state.card, err)
        state.pub.record("lesson-pr-failed", run=run, reason=one_line(str(err), 300))
        return
    state.pub.record("lesson-pr", run=run, number=pull.number, url=pull.url)
