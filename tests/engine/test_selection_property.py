"""Properties of selection over random batches: total, agrees with status, never unsafe.

Random manifests (1-4 phases of 0-4 changes, dependencies on earlier changes, optional
proof-of-work under either policy, any PR grouping), random disk states, random journals
(accepted and blocked outcomes with random verdicts, feedback, proof records and their
invalidations, PR opens) and random parks.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from app.engine.boundary import PrGrouping
from app.engine.journal import JournalEntry, fold_journal
from app.engine.manifest import BatchManifest
from app.engine.selection import (
    BatchFacts,
    ChangeTarget,
    DecomposeTarget,
    Park,
    ProofTarget,
    PrTarget,
    compute_batch_status,
    pick_next_step,
    pr_boundaries,
    pr_key,
)
from app.engine.transition import RUNNABLE_STATUSES, ChangeDisk, derive_change

BATCH = "demo"
DISKS = [
    ChangeDisk(),
    ChangeDisk(exists=True),
    ChangeDisk(exists=True, has_plan=True),
    ChangeDisk(exists=True, has_plan=True, tasks_total=2, tasks_complete=0),
    ChangeDisk(exists=True, has_plan=True, tasks_total=2, tasks_complete=1),
    ChangeDisk(exists=True, has_plan=True, tasks_total=2, tasks_complete=2),
    ChangeDisk(exists=True, has_plan=True, archived=True),
]
ARCHIVED = DISKS[-1]
STEP_KINDS = ["propose", "apply", "verify", "red", "fix", "decompose", "pr"]
OUTCOME_STATES = ["advanced", "awaiting-approval", "blocked", "failed"]


@st.composite
def manifests(draw: st.DrawFn) -> BatchManifest:
    phases: list[dict[str, Any]] = []
    earlier: list[str] = []
    for p in range(draw(st.integers(1, 4))):
        changes: list[dict[str, Any]] = []
        for _ in range(draw(st.one_of(st.integers(1, 4), st.integers(0, 4)))):
            name = f"c{len(earlier)}"
            deps = (
                draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3)) if earlier else []
            )
            changes.append({"name": name, "dependsOn": deps})
            earlier.append(name)
        phase: dict[str, Any] = {"name": f"p{p}", "changes": changes}
        policy = draw(st.sampled_from([None, "hard-gate", "warn"]))
        if policy is not None:
            phase["proofOfWork"] = {"run": "make test", "policy": policy}
        phases.append(phase)
    grouping = draw(st.sampled_from(get_args(PrGrouping)))
    return BatchManifest.model_validate({"prGrouping": grouping, "phases": phases})


def pr_keys(manifest: BatchManifest) -> list[str]:
    groups = [phase.name for phase in manifest.phases] + manifest.change_names
    return [f"pr:{BATCH}", *(f"pr:{BATCH}:{group}" for group in groups)]


def journal_entries(manifest: BatchManifest) -> st.SearchStrategy[list[JournalEntry]]:
    changes = manifest.change_names
    phases = [phase.name for phase in manifest.phases]
    keys = st.sampled_from(changes + phases + pr_keys(manifest))
    verdicts = st.one_of(st.none(), st.builds(lambda c: {"converged": c}, st.booleans()))

    outcome = st.builds(
        lambda key, transition, state, verdict: JournalEntry(
            kind="outcome",
            key=key,
            at="t",
            transition=transition,
            state=state,
            verdict=verdict if transition == "verify" else None,
        ),
        keys,
        st.sampled_from(STEP_KINDS),
        st.sampled_from(OUTCOME_STATES),
        verdicts,
    )
    pr_open = st.builds(
        lambda key, state: JournalEntry(
            kind="outcome", key=key, at="t", transition="pr", state=state
        ),
        st.sampled_from(pr_keys(manifest)),
        st.sampled_from(OUTCOME_STATES),
    )
    phase_keys = st.sampled_from(phases)
    proof = st.builds(
        lambda phase, passed, policy: JournalEntry(
            kind="proof-of-work",
            key=phase,
            at="t",
            proof={
                "phase": phase,
                "passed": passed,
                "gatePassed": passed or policy == "warn",
                "policy": policy,
                "detail": "exit 0" if passed else "exit 1",
            },
        ),
        phase_keys,
        st.booleans(),
        st.sampled_from(["hard-gate", "warn"]),
    )
    invalidated = st.builds(
        lambda phase: JournalEntry(kind="proof-of-work-invalidated", key=phase, at="t"),
        phase_keys,
    )
    human = st.builds(
        lambda kind, key, transition: JournalEntry(
            kind=kind, key=key, at="t", transition=transition, message="please"
        ),
        st.sampled_from(["feedback", "answer"]),
        keys,
        st.sampled_from(STEP_KINDS),
    )
    entry = st.one_of(outcome, pr_open, proof, invalidated, human)
    if changes:
        # A change walked through propose → apply → verify, so done changes are common.
        walked = st.builds(
            lambda key, converged: (
                [
                    JournalEntry(kind="outcome", key=key, at="t", transition=t, state="advanced")
                    for t in ("propose", "apply")
                ]
                + [
                    JournalEntry(
                        kind="outcome",
                        key=key,
                        at="t",
                        transition="verify",
                        state="advanced",
                        verdict={"converged": converged},
                    )
                ]
            ),
            st.sampled_from(changes),
            st.booleans(),
        )
        chunks = st.one_of(entry.map(lambda e: [e]), walked)
    else:
        chunks = entry.map(lambda e: [e])
    return st.lists(chunks, max_size=12).map(lambda parts: [e for part in parts for e in part])


@st.composite
def batch_facts(draw: st.DrawFn) -> BatchFacts:
    manifest = draw(manifests())
    # Finished changes and passing proofs are weighted up (a batch that starts finished and
    # proven, then a random journal on top) so that terminal proofs, PRs and `done` are reached.
    finished = draw(st.booleans())
    disk = st.just(ARCHIVED) if finished else st.one_of(st.just(ARCHIVED), st.sampled_from(DISKS))
    disks = {name: draw(disk) for name in manifest.change_names}
    proven = [
        JournalEntry(
            kind="proof-of-work",
            key=phase.name,
            at="t",
            proof={"phase": phase.name, "passed": True, "gatePassed": True, "detail": "exit 0"},
        )
        for phase in manifest.phases
        if phase.proof_of_work is not None and finished and draw(st.booleans())
    ]
    journal = proven + draw(journal_entries(manifest))
    park_keys = manifest.change_names + [p.name for p in manifest.phases] + pr_keys(manifest)
    parked = draw(st.lists(st.sampled_from(park_keys), unique=True, max_size=3))
    parks = {
        key: Park(
            state=draw(st.sampled_from(["blocked", "needs-input", "awaiting-approval"])),
            transition=draw(st.sampled_from(STEP_KINDS)),
            reason="held",
        )
        for key in parked
    }
    return BatchFacts(
        name=BATCH,
        manifest=manifest,
        disks=disks,
        journal=fold_journal(journal),
        parks=parks,
        max_fix_rounds=draw(st.integers(0, 3)),
    )


# 150 examples, not more: every selection rule is also pinned one by one in test_selection.py's
# tables (pick_next_step, status.next, done, why), so this property is the cross-check over
# random batches, and it is one of the suite's longest tests on two cores.
@pytest.mark.slow_first(10)
@settings(max_examples=150, deadline=None)
@given(batch_facts())
def test_selection_is_total_safe_and_agrees_with_status(facts: BatchFacts) -> None:
    target = pick_next_step(facts)  # total: never raises
    status = compute_batch_status(facts)
    assert status.next == target
    event(target.kind if target is not None else "done" if status.done else "nothing runnable")

    changes = status.changes
    phases = {phase.name: phase for phase in status.phases}
    order = [phase.name for phase in status.phases]

    def earlier_phases_open_the_gate(name: str) -> bool:
        # Every earlier phase is finished and its proof (if any) recorded and passing: so no
        # boundary proof was skipped, and no failing hard-gate proof was walked past.
        return all(phases[p].complete and phases[p].proof_ok for p in order[: order.index(name)])

    if isinstance(target, ChangeTarget):
        state = changes[target.change]
        ref = next(c for c in facts.manifest.all_changes if c.name == target.change)
        assert state.status in RUNNABLE_STATUSES
        assert state.phase == target.phase
        assert all(changes[dep].status == "done" for dep in ref.depends_on)
        assert target.change not in facts.parks
        assert not phases[target.phase].gated
        assert earlier_phases_open_the_gate(target.phase)
        derived = derive_change(
            facts.disks.get(target.change, ChangeDisk()),
            facts.journal.history(target.change),
            facts.max_fix_rounds,
        )
        assert target.transition == derived.next
    elif isinstance(target, DecomposeTarget):
        assert phases[target.phase].changes == ()
        assert not phases[target.phase].gated
        assert target.phase not in facts.parks
        assert earlier_phases_open_the_gate(target.phase)
    elif isinstance(target, ProofTarget):
        assert phases[target.phase].proof_required
        assert phases[target.phase].proof is None  # a recorded proof is never run again
        assert phases[target.phase].complete
    elif isinstance(target, PrTarget):
        assert target.key not in facts.parks
        assert target.key not in facts.journal.accepted_keys("pr")  # each group opens once
        assert all(state.status == "done" for state in changes.values())
        assert all(phase.complete and phase.proof_ok for phase in status.phases)
        assert facts.manifest.pr_grouping != "off"
        assert target.key in [pr_key(facts, b) for b in pr_boundaries(facts)]

    if status.done:
        assert target is None
        assert status.why is None
        assert all(state.status == "done" for state in changes.values())
        assert all(phase.decomposed for phase in status.phases)
        for phase in facts.manifest.phases:
            if phase.proof_of_work is not None:
                record = facts.journal.proofs.get(phase.name)
                assert record is not None
                assert record.get("gatePassed") is True
    elif target is None:
        assert isinstance(status.why, str)
        assert status.why
    else:
        assert status.why is None
