"""A plain batch's work, attributed to its changes, and the branches its PR groups are built on.

A plain batch's agents edit the project checkout itself, one after another. So that each PR
group carries exactly its own changes, every change step ends with a *snapshot*: the checkout's
working tree (run-state excluded) committed on the batch's work line `pair-work/<batch>`, whose
parent is the previous snapshot. That commit's diff is what the step's change did. The snapshot
is journaled (`kind: work`, key `work:<batch>`) before the step's outcome, so the journal — not a
ref — says which commit belongs to which change; the first snapshot of a batch is its
*baseline* (what the checkout held before any step) and belongs to no change.

The PR step then replays each group's changes, in order, onto the group's stacked base
(`select_stacked_bases`) and points the group's branch at the result. This module holds the
pure half: reading work entries, and planning which deltas each group's branch is built from.
The git half sits behind `WorkTree` (implemented in `app/cycle/work_line_git.py`), because the
engine never runs git itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.engine.boundary import StackedBase

WORK_KIND = "work"


def work_key(batch: str) -> str:
    """Journal key of a batch's work entries (kept off the change keys: no change history moves)."""
    return f"work:{batch}"


def work_branch(batch: str) -> str:
    """The batch's work line; outside `pair/<batch>…` so it never clashes with a group branch."""
    return f"pair-work/{batch}"


@dataclass(frozen=True)
class Snapshot:
    """One commit on the work line: `parent..commit` is what changed, `files` its paths."""

    commit: str
    parent: str | None
    files: tuple[str, ...]


@dataclass(frozen=True)
class WorkStep:
    """A journaled snapshot: the change (None for the baseline) whose step produced it."""

    change: str | None
    transition: str
    commit: str
    parent: str | None
    files: tuple[str, ...]


def work_record(change: str | None, transition: str, snap: Snapshot) -> dict[str, Any]:
    """The `data` of a `work` journal entry."""
    return {
        "change": change,
        "transition": transition,
        "commit": snap.commit,
        "parent": snap.parent,
        "files": list(snap.files),
    }


def work_steps(records: Sequence[Mapping[str, Any]], batch: str) -> list[WorkStep]:
    """The batch's journaled snapshots, in journal order."""
    key = work_key(batch)
    steps: list[WorkStep] = []
    for record in records:
        data = record.get("data")
        if record.get("kind") != WORK_KIND or record.get("key") != key:
            continue
        if not isinstance(data, Mapping) or not data.get("commit"):
            continue
        change = data.get("change")
        parent = data.get("parent")
        steps.append(
            WorkStep(
                change=None if change is None else str(change),
                transition=str(data.get("transition", "")),
                commit=str(data["commit"]),
                parent=None if parent is None else str(parent),
                files=tuple(str(f) for f in data.get("files", ())),
            )
        )
    return steps


def last_commit(steps: Sequence[WorkStep]) -> str | None:
    """Where the next snapshot goes on: the last journaled one (None: no baseline yet)."""
    return steps[-1].commit if steps else None


@dataclass(frozen=True)
class ChangeWork:
    """One change's deltas (`parent`, `commit`) in the order its steps made them."""

    change: str
    deltas: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class GroupBuild:
    """One PR group's branch: built on `base_branch` from its changes' work, in order."""

    head_branch: str
    base_branch: str
    changes: tuple[ChangeWork, ...]


def plan_group_builds(
    steps: Sequence[WorkStep], stacked: Sequence[StackedBase], upto: str
) -> list[GroupBuild]:
    """The group branches to build, in stack order, up to and including group `upto`.

    Every group below `upto` is planned too: a stacked branch is built on its predecessor,
    and building the whole chain from the journal each time needs no earlier step's local
    branch to have survived (a fresh runner has none). A change with no recorded delta has
    nothing to commit and is left out; a snapshot with no parent (an unborn HEAD's baseline)
    is never a change's work.
    """
    builds: list[GroupBuild] = []
    for stack in stacked:
        changes = tuple(
            ChangeWork(change, deltas)
            for change in stack.boundary.changes
            if (
                deltas := tuple(
                    (s.parent, s.commit)
                    for s in steps
                    if s.change == change and s.parent is not None and s.files
                )
            )
        )
        builds.append(GroupBuild(stack.head_branch, stack.base_branch, changes))
        if stack.boundary.group_id == upto:
            return builds
    raise ValueError(f"no PR group {upto!r} in the stack")


class WorkTree(Protocol):
    """The git side of work attribution, bound to one checkout (`app/cycle/work_line_git.py`)."""

    async def resume(self, branch: str, last: str) -> bool:
        """Make the checkout hold the work recorded up to `last`; True when it had to restore it
        (a fresh checkout, e.g. a new Actions runner, that never held that work)."""
        ...

    async def snapshot(self, branch: str, parent: str | None, message: str) -> Snapshot | None:
        """Commit the working tree (run-state excluded) on `branch` after `parent` (None: after
        HEAD). Returns the snapshot (`commit == parent` and no files when nothing changed), or
        None when the checkout is not a git repository."""
        ...

    async def build_stack(self, batch: str, groups: Sequence[GroupBuild]) -> list[str]:
        """Build each group's branch on the previous one (the first on its base branch), one
        commit per change; returns the head SHAs. Deterministic: the same work builds the same
        commits, so a re-run after a crash changes no branch."""
        ...
