"""What a card does at the end of its cycle: re-review, publish, park, or merge. Pure.

docs/cycle.md: merge is the human gate unless the project's merge gate says otherwise.
`decide_cycle_end` takes
`CycleEndFacts` and returns exactly one `Decision`; the shell acts on it (posts the packet,
upserts and reads back the synthesis, sets the `pr-state:*` label, merges). No I/O, no clock.

Precedence, first match wins:

1. the PR is already merged → `Merged`; closed unmerged → `Interrupted` (a finished PR has no
   review left to redo);
2. the PR head moved, or the card hash changed, since the review → `ReReview` (a delta
   re-review; nothing below is trusted on a stale review);
3. a regression risk active, or not converged → `NotConverged` (the fix loop is the caller's
   business);
4. scope proposals pending → `AwaitingScopeDecision` (never ready-for-merge);
5. no reviewed head → `Unreviewed` (readiness needs a 40-hex reviewed head);
6. synthesis not confirmed → `FailedPublication` if an attempt failed, else `Publish`;
7. `until: ready-for-merge` → `ReadyForMerge`;
8. `until: merged`: the PR head must be known and equal the reviewed head (else `Blocked`);
   a maintainer's `/pair approve` → `Merge`; gate `always` → `AwaitingHuman`; a `when …`
   condition that fires → `Escalated`; otherwise (`never`, or `when` not firing) → `Merge`.

A `Merge` is always pinned to the reviewed head. Labels feed only the merge gate, so an
unrelated label edit never invalidates a review.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from app.domain.card.autonomy import GateCondition
from hosts.labels import PrState

Until = Literal["ready-for-merge", "merged"]
PullState = Literal["open", "closed", "merged"]

_SHA: Final = re.compile(r"[0-9a-fA-F]{40}")


def _check_sha(name: str, value: str | None) -> None:
    if value is not None and _SHA.fullmatch(value) is None:
        raise ValueError(f"{name} must be a 40-hex commit SHA, got {value!r}")


@dataclass(frozen=True)
class CycleEndFacts:
    """Everything the end-of-cycle decision reads; validated on construction."""

    converged: bool
    pending_scope: int
    synthesis_confirmed: bool
    until: Until
    merge_gate: GateCondition
    labels: frozenset[str]
    reviewed_head: str | None
    current_head: str | None
    card_hash_reviewed: str | None
    card_hash_now: str | None
    pull_state: PullState
    approved: bool = False
    publication_failed: bool = False
    active_risks: int = 0  # regression risks the ledger holds active (never converged)

    def __post_init__(self) -> None:
        _check_sha("reviewed_head", self.reviewed_head)
        _check_sha("current_head", self.current_head)
        if self.pending_scope < 0:
            raise ValueError(f"pending_scope must be >= 0, got {self.pending_scope}")
        if self.until not in get_args(Until):
            raise ValueError(f"until must be one of {get_args(Until)}, got {self.until!r}")
        if self.pull_state not in get_args(PullState):
            raise ValueError(
                f"pull_state must be one of {get_args(PullState)}, got {self.pull_state!r}"
            )


class _Status:
    """Mixin: the decision's `status` as its `pr-state:*` label."""

    status: str

    @property
    def pr_state(self) -> PrState:
        """The label this decision puts on the card and its PR."""
        return PrState.of(self.status)


@dataclass(frozen=True)
class ReReview(_Status):
    """Head moved or card hash changed after review: `verify` again as a delta, never merge."""

    reason: str
    status: Literal["awaiting-verify"] = field(default="awaiting-verify", init=False)


@dataclass(frozen=True)
class Merged(_Status):
    """The PR is already merged; nothing left to do."""

    reason: str
    status: Literal["merged"] = field(default="merged", init=False)


@dataclass(frozen=True)
class Interrupted(_Status):
    """The PR was closed without merging; the cycle cannot deliver."""

    reason: str
    status: Literal["interrupted"] = field(default="interrupted", init=False)


@dataclass(frozen=True)
class NotConverged(_Status):
    """Blocking findings or an active regression risk remain: the fix loop continues."""

    reason: str
    status: Literal["in-progress"] = field(default="in-progress", init=False)


@dataclass(frozen=True)
class AwaitingScopeDecision(_Status):
    """Converged, but scope proposals wait for the maintainer: post the packet."""

    reason: str
    pending: int
    status: Literal["awaiting-scope-decision"] = field(
        default="awaiting-scope-decision", init=False
    )


@dataclass(frozen=True)
class Unreviewed(_Status):
    """Converged without a recorded reviewed head: readiness needs one, so verify again."""

    reason: str
    status: Literal["awaiting-verify"] = field(default="awaiting-verify", init=False)


@dataclass(frozen=True)
class Publish(_Status):
    """Publish the synthesis comment and read it back; delivery is not ready until then."""

    reason: str
    status: Literal["in-progress"] = field(default="in-progress", init=False)


@dataclass(frozen=True)
class FailedPublication(_Status):
    """The synthesis could not be confirmed: retry publication only; quality stays intact."""

    reason: str
    status: Literal["failed-publication"] = field(default="failed-publication", init=False)


@dataclass(frozen=True)
class ReadyForMerge(_Status):
    """Converged, published, `until: ready-for-merge`: report and stop."""

    reviewed_head: str
    reason: str
    status: Literal["ready-for-merge"] = field(default="ready-for-merge", init=False)


@dataclass(frozen=True)
class AwaitingHuman(_Status):
    """`until: merged` with merge gate `always`: park for a maintainer's `/pair approve`."""

    reviewed_head: str
    reason: str
    status: Literal["awaiting-human"] = field(default="awaiting-human", init=False)


@dataclass(frozen=True)
class Escalated(_Status):
    """A `when …` merge-gate condition fired; `conditions` names them (`has:x`, `lacks:y`)."""

    reviewed_head: str
    conditions: tuple[str, ...]
    reason: str
    status: Literal["escalated"] = field(default="escalated", init=False)


@dataclass(frozen=True)
class Blocked(_Status):
    """`until: merged` but the PR's head is unknown, so no merge can be pinned to the review."""

    reason: str
    status: Literal["blocked"] = field(default="blocked", init=False)


@dataclass(frozen=True)
class Merge(_Status):
    """Merge now, pinned to `head` (always the reviewed head); the caller reports `merged`."""

    head: str
    reason: str
    status: Literal["ready-for-merge"] = field(default="ready-for-merge", init=False)


Decision = (
    ReReview
    | Merged
    | Interrupted
    | NotConverged
    | AwaitingScopeDecision
    | Unreviewed
    | Publish
    | FailedPublication
    | ReadyForMerge
    | AwaitingHuman
    | Escalated
    | Blocked
    | Merge
)


NextEndStep = Literal["verify", "publish", "merge"]


def next_end_step(
    *,
    pending_scope: int,
    reviewed_head: str | None,
    synthesis_confirmed: bool,
    until: Until,
    merged: bool,
) -> NextEndStep | None:
    """The step the cycle end runs next for a converged card, from what its journal records
    (the tracking comment names it before any host is asked): the same order as
    `decide_cycle_end` without the host's side (a moved head shows up when it is read).

    None when nothing runs on its own: scope proposals wait for the maintainer, the card is
    merged, or it is ready and the merge is the maintainer's (`until: ready-for-merge`).
    """
    if merged or pending_scope > 0:
        return None
    if reviewed_head is None:
        return "verify"
    if not synthesis_confirmed:
        return "publish"
    return "merge" if until == "merged" else None


def decide_cycle_end(facts: CycleEndFacts) -> Decision:
    """The one thing the card does now; see the module docstring for the precedence."""
    reviewed = facts.reviewed_head.lower() if facts.reviewed_head is not None else None
    current = facts.current_head.lower() if facts.current_head is not None else None

    # 1. The PR's own fate: a merged or closed PR has no review left to redo.
    if facts.pull_state == "merged":
        return Merged("the PR is already merged")
    if facts.pull_state == "closed":
        return Interrupted("the PR was closed without merging; reopen it to resume the cycle")

    # 2. A stale review decides nothing else. An unknown side (None) is not a move: with no
    #    reviewed head there is nothing to invalidate, and an unknown PR head is handled at merge.
    if reviewed is not None and current is not None and reviewed != current:
        return ReReview(f"PR head moved from reviewed {reviewed[:12]} to {current[:12]}")
    if (
        facts.card_hash_reviewed is not None
        and facts.card_hash_now is not None
        and facts.card_hash_reviewed != facts.card_hash_now
    ):
        return ReReview("the card changed after review (card hash differs)")

    # 3-4. Quality first, then scope. An active regression risk is never converged, whatever
    #      the last verdict said: neither readiness nor a scope escalation may pass it.
    if facts.active_risks:
        return NotConverged(
            f"{facts.active_risks} regression risk(s) active; only an independent review of "
            "the repaired head discharges them"
        )
    if not facts.converged:
        return NotConverged("blocking findings or an active regression risk remain")
    if facts.pending_scope > 0:
        return AwaitingScopeDecision(
            f"quality converged; {facts.pending_scope} scope proposal(s) await a decision",
            pending=facts.pending_scope,
        )

    # 5. Readiness is only ever claimed for a reviewed head.
    if reviewed is None:
        return Unreviewed("converged, but no 40-hex reviewed head was recorded; verify again")

    # 6. Delivery waits for the synthesis to be published and read back.
    if not facts.synthesis_confirmed:
        if facts.publication_failed:
            return FailedPublication(
                "the synthesis comment could not be confirmed; retry publication only"
            )
        return Publish("publish the synthesis comment and read it back")

    # 7. Stop at readiness unless told to merge.
    if facts.until == "ready-for-merge":
        return ReadyForMerge(reviewed, "converged, synthesis confirmed; the merge is yours")

    # 8. The merge gate, pinned to the reviewed head.
    if current is None:
        return Blocked("the PR's current head is unknown; a merge must be pinned to the review")
    if facts.approved:
        return Merge(reviewed, "a maintainer approved the merge at the gate")
    gate = facts.merge_gate
    if gate.mode == "always":
        return AwaitingHuman(reviewed, "merge gate `always`: waiting for `/pair approve`")
    if gate.fires(facts.labels):
        conditions = gate.fired(facts.labels)
        return Escalated(
            reviewed, conditions, f"merge gate condition fired: {', '.join(conditions)}"
        )
    if gate.mode == "never":
        return Merge(reviewed, "merge gate `never`: merging unattended")
    return Merge(reviewed, "merge gate `when …`: no condition fired")
