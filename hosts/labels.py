"""`pr-state:*` labels: one Enum whose values are the label names, and exclusivity. Pure.

Exactly one `pr-state:*` label marks a card and its PR at a time; setting the current one is
a no-op. The state diagram in docs/hosts.md changes in the same commit as this table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

PREFIX = "pr-state:"


class PrState(Enum):
    """Every status a caller may see, as its label."""

    READY = "pr-state:ready"
    IN_PROGRESS = "pr-state:in-progress"
    AWAITING_VERIFY = "pr-state:awaiting-verify"
    AWAITING_APPROVAL = "pr-state:awaiting-approval"
    BLOCKED = "pr-state:blocked"
    NEEDS_INPUT = "pr-state:needs-input"
    AWAITING_SCOPE_DECISION = "pr-state:awaiting-scope-decision"
    AWAITING_HUMAN = "pr-state:awaiting-human"
    READY_FOR_MERGE = "pr-state:ready-for-merge"
    MERGED = "pr-state:merged"
    ESCALATED = "pr-state:escalated"
    FAILED_PREPARATION = "pr-state:failed-preparation"
    FAILED_IMPLEMENT = "pr-state:failed-implement"
    FAILED_FIX = "pr-state:failed-fix"
    FAILED_VERIFY = "pr-state:failed-verify"
    FAILED_PUBLICATION = "pr-state:failed-publication"
    # Seed 004's contract and seal path (docs/cycle.md, "The contract and its seal").
    TARGET_READY = "pr-state:target-ready"
    ESCALATE = "pr-state:escalate"
    FAILED_CONTRACT = "pr-state:failed-contract"
    FAILED_SEAL = "pr-state:failed-seal"
    FAILED_CUSTODY = "pr-state:failed-custody"
    FAILED_RESUME = "pr-state:failed-resume"
    INCOMPATIBLE = "pr-state:incompatible"
    INTERRUPTED = "pr-state:interrupted"
    ABANDONED = "pr-state:abandoned"

    @classmethod
    def of(cls, status: str) -> PrState:
        """The label for a status name (`ready-for-merge` → PrState.READY_FOR_MERGE)."""
        try:
            return cls(PREFIX + status)
        except ValueError:
            names = ", ".join(s.value.removeprefix(PREFIX) for s in cls)
            raise ValueError(f"{status!r} is not a pr-state; allowed: {names}") from None


@dataclass(frozen=True)
class LabelPlan:
    """Labels to add and to remove; empty both ways means the label is already right.

    A host applies `remove` before `add`, so a failure part-way leaves at most one state
    label (never two), then reads the labels back and plans again until the plan is empty:
    both writes are idempotent, so finishing after an unknown outcome never doubles anything.
    """

    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()

    @property
    def noop(self) -> bool:
        """Nothing to do."""
        return not self.add and not self.remove


def plan_state_labels(current: Iterable[str], state: PrState) -> LabelPlan:
    """Make `state` the only `pr-state:*` label; other labels are never touched.

    Compared case-insensitively: GitHub labels and Azure DevOps tags are, so a host that hands
    back `PR-State:Merged` already carries `pr-state:merged` (and must not be written again).
    """
    labels = list(current)
    wanted = state.value

    def other_state(label: str) -> bool:
        return label.casefold().startswith(PREFIX) and label.casefold() != wanted

    remove = tuple(sorted({lb for lb in labels if other_state(lb)}))
    add = () if any(lb.casefold() == wanted for lb in labels) else (wanted,)
    return LabelPlan(add=add, remove=remove)
