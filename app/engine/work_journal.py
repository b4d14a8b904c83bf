"""A plain batch's work around its steps: restored, snapshotted and journaled on its work line.

The I/O half of `app.engine.work_line` (which plans the line from the journal): before a
batch's step, the checkout gets back the work recorded on the pushed work line
(`resume_work`), and the step's work goes on the last recorded snapshot, or on a baseline taken
at the batch's first step (`prepare_work`); each snapshot is journaled as a `work` entry
(`journal_work`) so the batch's PR groups carry exactly their changes' work.
"""

from __future__ import annotations

from app.engine import jsonl
from app.engine.runstate import RunLocus
from app.engine.step import EngineDeps, journal_event
from app.engine.work_line import (
    WORK_KIND,
    Snapshot,
    WorkTree,
    last_commit,
    work_branch,
    work_key,
    work_record,
    work_steps,
)


async def resume_work(locus: RunLocus, deps: EngineDeps, work: WorkTree, batch: str) -> None:
    """Before anything is derived from disk: a checkout that never held the batch's recorded
    work (a fresh Actions runner) gets it back from the pushed work line."""
    last = last_commit(work_steps(jsonl.read_records(locus.journal), batch))
    if last is not None and await work.resume(work_branch(batch), last):
        deps.on_line(f"restored the batch's recorded work ({work_branch(batch)} at {last[:12]})")


async def prepare_work(locus: RunLocus, deps: EngineDeps, work: WorkTree, batch: str) -> str | None:
    """The snapshot this step's work goes on: the last recorded one, or a new baseline at the
    batch's first step. None outside a git checkout."""
    last = last_commit(work_steps(jsonl.read_records(locus.journal), batch))
    if last is not None:
        return last
    # The baseline: what the checkout held before any step. It belongs to no change, so
    # edits that were there before the batch ran are never carried by its PRs.
    snap = await work.snapshot(work_branch(batch), None, f"{batch}: baseline")
    if snap is None:
        return None
    journal_work(locus, deps, batch, change=None, transition="baseline", snap=snap)
    return snap.commit


def journal_work(
    locus: RunLocus,
    deps: EngineDeps,
    batch: str,
    *,
    change: str | None,
    transition: str,
    snap: Snapshot,
) -> None:
    """One `work` entry: the snapshot `transition` of `change` (None: the baseline) left."""
    journal_event(
        locus,
        deps.clock,
        kind=WORK_KIND,
        key=work_key(batch),
        transition=transition,
        data=work_record(change, transition, snap),
    )
