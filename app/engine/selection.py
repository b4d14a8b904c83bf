"""Batch status and step selection: one walk, so status and selection agree by construction.

Pure: `BatchFacts` (the manifest, each change's disk snapshot, the journal fold, the parks) in,
decisions out. `pick_next_step` is the single selection engine; its branches are tried in this
load-bearing order and the first that yields a target wins:

1. change — the first runnable change (ready, in-progress or awaiting-verify; dependencies done;
   not parked) of the first ungated phase, preceded by any earlier phase's unrecorded
   proof-of-work (the boundary proof runs once, before the next phase starts);
2. decompose — an ungated phase with no changes yet, preceded the same way;
3. terminal proof-of-work — every phase complete: the first unrecorded proof (normally the
   last phase's, which has no successor boundary to run at);
4. whole-batch PR — everything done and proven under `prGrouping: whole-batch`;
5. stacked PR tail — under `per-phase` / `per-change`, the first group whose PR is not opened.

A phase is gated while an earlier phase is unfinished, or an earlier phase's recorded proof
failed under `hard-gate` (a `warn` failure is recorded as gatePassed and never gates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from app.engine.boundary import PrGroupBoundary, detect_pr_group_boundaries, pr_journal_key
from app.engine.journal import JournalIndex
from app.engine.runstate import Park
from app.engine.transition import (
    RUNNABLE_STATUSES,
    ChangeDisk,
    ChangeStatus,
    Transition,
    derive_change,
)

if TYPE_CHECKING:
    # Only for the annotations: selection itself stays pure and model-free at import.
    from app.engine.manifest import BatchManifest, Phase


@dataclass(frozen=True)
class BatchFacts:
    """Everything selection reads, gathered once by the shell."""

    name: str
    manifest: BatchManifest
    disks: Mapping[str, ChangeDisk]
    journal: JournalIndex
    parks: Mapping[str, Park] = field(default_factory=dict)
    max_fix_rounds: int = 3


@dataclass(frozen=True)
class ChangeState:
    """A change's derived status and next transition."""

    name: str
    phase: str
    status: ChangeStatus
    next: Transition | None
    fix_rounds: int = 0
    review_round: int = 1
    reason: str = ""


@dataclass(frozen=True)
class PhaseState:
    """A phase's derived facts."""

    name: str
    changes: tuple[str, ...]
    decomposed: bool
    complete: bool
    gated: bool
    gated_by: str | None
    proof_required: bool
    proof: Mapping[str, Any] | None

    @property
    def proof_ok(self) -> bool:
        """No proof needed, or the recorded proof opens the gate."""
        return not self.proof_required or bool(self.proof and self.proof.get("gatePassed"))


@dataclass(frozen=True)
class ChangeTarget:
    """Run `transition` on `change`."""

    phase: str
    change: str
    transition: Transition
    kind: Literal["change"] = "change"


@dataclass(frozen=True)
class DecomposeTarget:
    """Author the changes of an empty, reachable phase."""

    phase: str
    kind: Literal["decompose"] = "decompose"


@dataclass(frozen=True)
class ProofTarget:
    """Run and record a phase's proof-of-work."""

    phase: str
    kind: Literal["proof-of-work"] = "proof-of-work"


@dataclass(frozen=True)
class PrTarget:
    """Open a pull request for a group (whole batch when `boundary` is None)."""

    phase: str
    key: str
    boundary: PrGroupBoundary | None
    kind: Literal["pr"] = "pr"


ApplyTarget = ChangeTarget | DecomposeTarget | ProofTarget | PrTarget


@dataclass(frozen=True)
class BatchStatus:
    """The derived status of a batch (what `pairbot batch status` prints)."""

    batch: str
    done: bool
    next: ApplyTarget | None
    changes: Mapping[str, ChangeState]
    phases: tuple[PhaseState, ...]
    parks: Mapping[str, Park]
    why: str | None  # when nothing is runnable and the batch is not done: what holds it


def change_states(facts: BatchFacts) -> dict[str, ChangeState]:
    """Derive every change's status: parks first, then the done-rule, then dependencies."""
    states: dict[str, ChangeState] = {}
    for phase in facts.manifest.phases:
        for ref in phase.changes:
            disk = facts.disks.get(ref.name, ChangeDisk())
            derived = derive_change(disk, facts.journal.history(ref.name), facts.max_fix_rounds)
            status: ChangeStatus = derived.status
            reason = ""
            park = facts.parks.get(ref.name)
            if park is not None:
                status, reason = park.state, park.reason
            elif status in RUNNABLE_STATUSES:
                pending = [d for d in ref.depends_on if states[d].status != "done"]
                if pending:
                    status, reason = "waiting", f"waiting for {', '.join(pending)}"
            elif status == "failed-fix":
                reason = f"{derived.fix_rounds} fix round(s) spent and the review still blocks"
            states[ref.name] = ChangeState(
                name=ref.name,
                phase=phase.name,
                status=status,
                next=derived.next,
                fix_rounds=derived.fix_rounds,
                review_round=derived.review_round,
                reason=reason,
            )
    return states


def phase_states(facts: BatchFacts, changes: Mapping[str, ChangeState]) -> list[PhaseState]:
    """Derive each phase's completeness, gate and recorded proof, in order."""
    out: list[PhaseState] = []
    blocker: str | None = None
    for phase in facts.manifest.phases:
        names = phase.change_names
        decomposed = bool(names)
        complete = decomposed and all(changes[n].status == "done" for n in names)
        proof = facts.journal.proofs.get(phase.name)
        state = PhaseState(
            name=phase.name,
            changes=names,
            decomposed=decomposed,
            complete=complete,
            gated=blocker is not None,
            gated_by=blocker,
            proof_required=phase.proof_of_work is not None,
            proof=proof,
        )
        out.append(state)
        if blocker is None:
            if not complete:
                unfinished = [n for n in names if changes[n].status != "done"]
                blocker = (
                    f"phase {phase.name!r} is not finished: {', '.join(unfinished)}"
                    if unfinished
                    else f"phase {phase.name!r} has no changes yet (decomposition pending)"
                )
            elif proof is not None and not state.proof_ok:
                blocker = (
                    f"phase {phase.name!r} proof-of-work failed (hard-gate): "
                    f"{proof.get('detail', '')}"
                )
    return out


def first_runnable_change(
    phases: list[PhaseState], changes: Mapping[str, ChangeState]
) -> ChangeState | None:
    """The first runnable change of the first ungated phase (the walk status shares)."""
    for phase in phases:
        if phase.gated:
            continue
        for name in phase.changes:
            if changes[name].status in RUNNABLE_STATUSES and changes[name].next is not None:
                return changes[name]
    return None


def _boundary_proof(phases: list[PhaseState], before: str) -> ProofTarget | None:
    """The earliest phase before `before` whose proof-of-work has not been recorded."""
    for phase in phases:
        if phase.name == before:
            return None
        if phase.proof_required and phase.proof is None:
            return ProofTarget(phase=phase.name)
    return None


def _phase_changes(phases: Sequence[Phase]) -> list[tuple[str, tuple[str, ...]]]:
    return [(phase.name, phase.change_names) for phase in phases]


def pr_boundaries(facts: BatchFacts) -> list[PrGroupBoundary]:
    """The batch's PR groups under its `prGrouping`, in order."""
    return manifest_boundaries(facts.name, facts.manifest)


def manifest_boundaries(batch: str, manifest: BatchManifest) -> list[PrGroupBoundary]:
    """The PR groups a manifest defines under its `prGrouping`, in order (plan only)."""
    return detect_pr_group_boundaries(batch, _phase_changes(manifest.phases), manifest.pr_grouping)


def pr_key(facts: BatchFacts, boundary: PrGroupBoundary) -> str:
    """The run-state key of a PR group: `pr:<batch>` whole-batch, else `pr:<batch>:<group>`."""
    whole = facts.manifest.pr_grouping == "whole-batch"
    return pr_journal_key(facts.name, None if whole else boundary)


def _select(
    facts: BatchFacts, changes: Mapping[str, ChangeState], phases: list[PhaseState]
) -> ApplyTarget | None:
    # 1. change (with the boundary proof interposed)
    runnable = first_runnable_change(phases, changes)
    if runnable is not None and runnable.next is not None:
        interposed = _boundary_proof(phases, runnable.phase)
        return interposed or ChangeTarget(runnable.phase, runnable.name, runnable.next)
    # 2. decompose a reachable empty phase
    for phase in phases:
        if not phase.gated and not phase.decomposed and phase.name not in facts.parks:
            return _boundary_proof(phases, phase.name) or DecomposeTarget(phase.name)
    if not all(phase.complete for phase in phases):
        return None
    # 3. terminal (or re-invalidated) proof-of-work
    for phase in phases:
        if phase.proof_required and phase.proof is None:
            return ProofTarget(phase.name)
    if not all(phase.proof_ok for phase in phases):
        return None
    # 4. whole-batch PR, 5. stacked PR tail
    opened = facts.journal.accepted_keys("pr")
    whole = facts.manifest.pr_grouping == "whole-batch"
    for boundary in pr_boundaries(facts):
        key = pr_key(facts, boundary)
        if key in opened:
            continue
        if key in facts.parks:
            return None
        return PrTarget(phase=boundary.phase, key=key, boundary=None if whole else boundary)
    return None


def pick_next_step(facts: BatchFacts) -> ApplyTarget | None:
    """The single selection engine: the next step `batch apply` runs, or None."""
    changes = change_states(facts)
    return _select(facts, changes, phase_states(facts, changes))


def _why(facts: BatchFacts, changes: Mapping[str, ChangeState], phases: list[PhaseState]) -> str:
    for key, park in facts.parks.items():
        return f"{key} is {park.state} after {park.transition}: {park.reason}"
    for state in changes.values():
        if state.status == "failed-fix":
            return f"change {state.name!r} is failed-fix: {state.reason}"
    for phase in phases:
        if phase.proof is not None and not phase.proof_ok:
            return (
                f"phase {phase.name!r} proof-of-work failed (hard-gate): "
                f"{phase.proof.get('detail', '')}; fix the cause and run "
                f"`pairbot batch rerun-proof {facts.name} --phase {phase.name}`"
            )
    for state in changes.values():
        if state.status == "waiting":
            return f"change {state.name!r} is {state.reason}"
    return "nothing is runnable"


def compute_batch_status(facts: BatchFacts) -> BatchStatus:
    """Derive the batch's status; `next` is exactly what `pick_next_step` returns."""
    changes = change_states(facts)
    phases = phase_states(facts, changes)
    target = _select(facts, changes, phases)
    opened = facts.journal.accepted_keys("pr")
    prs_open = all(pr_key(facts, b) in opened for b in pr_boundaries(facts))
    done = (
        target is None and all(phase.complete and phase.proof_ok for phase in phases) and prs_open
    )
    why = None if done or target is not None else _why(facts, changes, phases)
    return BatchStatus(
        batch=facts.name,
        done=done,
        next=target,
        changes=changes,
        phases=tuple(phases),
        parks=dict(facts.parks),
        why=why,
    )
