"""PR groups (docs/runtime.md): where a batch's pull requests begin and end, what each targets.

Pure policies over the batch plan, no git and no run-state:

- `detect_pr_group_boundaries` is the single home of "where are the PR groups": it maps the
  ordered phases and changes and the `prGrouping` mode to ordered, contiguously indexed groups.
- `select_stacked_bases` stacks them: group 0 targets the batch base branch, group N targets
  group N-1's own branch. Branch names come from the caller's `branch_for_group`.
- `pr_journal_key` names the run-state entry that records a group's PR as open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

PrGrouping = Literal["off", "whole-batch", "per-phase", "per-change"]


@dataclass(frozen=True)
class PrGroupBoundary:
    """One PR group: its stable identity, position, members and the change that completes it."""

    group_id: str  # batch name (whole-batch), phase name (per-phase) or change name (per-change)
    index: int  # contiguous 0-based "group N" over the produced boundaries
    phase: str  # phase of `trigger_change`
    changes: tuple[str, ...]
    trigger_change: str  # the group's last change; its completion fires the boundary


def detect_pr_group_boundaries(
    batch_name: str,
    phases: Sequence[tuple[str, Sequence[str]]],
    mode: PrGrouping,
) -> list[PrGroupBoundary]:
    """Map ordered (phase, changes) pairs and a grouping mode to the ordered PR groups."""
    # Build (group_id, phase, changes) first and number afterwards, so skipped empty phases
    # leave no gap in the indices.
    groups: list[tuple[str, str, tuple[str, ...]]] = []
    if mode == "whole-batch":
        every = tuple(change for _, changes in phases for change in changes)
        last_phase = next((name for name, changes in reversed(phases) if changes), None)
        if last_phase is not None:
            groups.append((batch_name, last_phase, every))
    elif mode == "per-phase":
        groups.extend((name, name, tuple(changes)) for name, changes in phases if changes)
    elif mode == "per-change":
        groups.extend((change, name, (change,)) for name, changes in phases for change in changes)
    return [
        PrGroupBoundary(
            group_id=group_id,
            index=index,
            phase=phase,
            changes=changes,
            trigger_change=changes[-1],
        )
        for index, (group_id, phase, changes) in enumerate(groups)
    ]


@dataclass(frozen=True)
class StackedBase:
    """What a group's PR targets (`base_branch`) and the group's own branch (`head_branch`)."""

    boundary: PrGroupBoundary
    base_branch: str
    head_branch: str


def select_stacked_bases(
    boundaries: Sequence[PrGroupBoundary],
    batch_base_branch: str,
    branch_for_group: Callable[[PrGroupBoundary], str],
) -> list[StackedBase]:
    """Stack the groups in list order: group 0 on the batch base, group N on group N-1's branch."""
    # Ordering is the list's, not `boundary.index`, so any ordered input stacks correctly.
    heads = [branch_for_group(boundary) for boundary in boundaries]
    bases = [batch_base_branch, *heads][: len(heads)]
    return [
        StackedBase(boundary=boundary, base_branch=base, head_branch=head)
        for boundary, base, head in zip(boundaries, bases, heads, strict=True)
    ]


def pr_journal_key(batch_name: str, boundary: PrGroupBoundary | None) -> str:
    """Run-state key of a group's PR: `pr:<batch>` whole-batch, else `pr:<batch>:<group_id>`."""
    if boundary is None:
        return f"pr:{batch_name}"
    return f"pr:{batch_name}:{boundary.group_id}"
