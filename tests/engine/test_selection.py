"""Batch status and step selection: the five ordered branches, gates, parks and `why`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from app.engine.boundary import PrGroupBoundary
from app.engine.journal import JournalEntry, fold_journal
from app.engine.manifest import BatchManifest
from app.engine.selection import (
    ApplyTarget,
    BatchFacts,
    ChangeState,
    ChangeTarget,
    DecomposeTarget,
    Park,
    ProofTarget,
    PrTarget,
    change_states,
    compute_batch_status,
    first_runnable_change,
    phase_states,
    pick_next_step,
)
from app.engine.transition import ChangeDisk

BATCH = "demo"
FRESH = ChangeDisk()
PLANNED = ChangeDisk(exists=True, has_plan=True, tasks_total=2, tasks_complete=0)
APPLIED = ChangeDisk(exists=True, has_plan=True, tasks_total=2, tasks_complete=2)
ARCHIVED = ChangeDisk(exists=True, has_plan=True, archived=True)
POW = {"run": "make test"}
POW_WARN = {"run": "make test", "policy": "warn"}


# ---------------------------------------------------------------- builders


def phase(name: str, *changes: str | dict[str, Any], proof: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "changes": list(changes)}
    if proof is not None:
        data["proofOfWork"] = proof
    return data


def needs(name: str, *deps: str) -> dict[str, Any]:
    return {"name": name, "dependsOn": list(deps)}


def outcome(
    key: str, transition: str, state: str = "advanced", converged: bool | None = None
) -> JournalEntry:
    verdict = None if converged is None else {"converged": converged}
    return JournalEntry(
        kind="outcome", key=key, at="t", transition=transition, state=state, verdict=verdict
    )


def proof(phase_name: str, passed: bool, policy: str = "hard-gate") -> JournalEntry:
    record = {
        "phase": phase_name,
        "passed": passed,
        "gatePassed": passed or policy == "warn",
        "policy": policy,
        "detail": "exit 0" if passed else "exit 1 (pass requires exit 0)",
    }
    return JournalEntry(kind="proof-of-work", key=phase_name, at="t", proof=record)


def invalidated(phase_name: str) -> JournalEntry:
    return JournalEntry(kind="proof-of-work-invalidated", key=phase_name, at="t")


def verified(key: str, converged: bool = True) -> list[JournalEntry]:
    """The journal of a change proposed, applied and verified (with the given verdict)."""
    return [
        outcome(key, "propose"),
        outcome(key, "apply"),
        outcome(key, "verify", converged=converged),
    ]


def park(state: Any = "blocked", transition: str = "apply", reason: str = "stuck") -> Park:
    return Park(state=state, transition=transition, reason=reason)


def facts(
    *phases: dict[str, Any],
    disks: Mapping[str, ChangeDisk] | None = None,
    journal: list[JournalEntry] | None = None,
    parks: Mapping[str, Park] | None = None,
    pr: str = "off",
    max_fix_rounds: int = 3,
) -> BatchFacts:
    manifest = BatchManifest.model_validate({"prGrouping": pr, "phases": list(phases)})
    return BatchFacts(
        name=BATCH,
        manifest=manifest,
        disks=dict(disks or {}),
        journal=fold_journal(journal or []),
        parks=dict(parks or {}),
        max_fix_rounds=max_fix_rounds,
    )


def done(*names: str) -> dict[str, ChangeDisk]:
    return dict.fromkeys(names, ARCHIVED)


def group(group_id: str, index: int, phase_name: str, *changes: str) -> PrGroupBoundary:
    return PrGroupBoundary(
        group_id=group_id,
        index=index,
        phase=phase_name,
        changes=changes,
        trigger_change=changes[-1],
    )


# ---------------------------------------------------------------- pick_next_step


SELECTION = [
    # 1. change
    pytest.param(facts(phase("p1", "a")), ChangeTarget("p1", "a", "propose"), id="fresh-change"),
    pytest.param(
        facts(phase("p1", "a", "b"), disks=done("a")),
        ChangeTarget("p1", "b", "propose"),
        id="next-change-after-a-done-one",
    ),
    pytest.param(
        facts(phase("p1", "a"), disks={"a": PLANNED}, journal=[outcome("a", "propose")]),
        ChangeTarget("p1", "a", "apply"),
        id="in-progress-change",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), disks={"a": APPLIED}),
        ChangeTarget("p1", "a", "verify"),
        id="awaiting-verify-is-runnable",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), disks={"a": APPLIED}, journal=verified("a")),
        ChangeTarget("p1", "b", "propose"),
        id="verified-change-is-done",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), disks={"a": APPLIED}, journal=verified("a", False)),
        ChangeTarget("p1", "a", "red"),
        id="blocking-review-starts-a-fix-round",
    ),
    pytest.param(
        facts(
            phase("p1", "a", "b"),
            disks={"a": APPLIED},
            journal=verified("a", False),
            max_fix_rounds=0,
        ),
        ChangeTarget("p1", "b", "propose"),
        id="failed-fix-is-skipped",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), parks={"a": park()}),
        ChangeTarget("p1", "b", "propose"),
        id="parked-change-skipped",
    ),
    pytest.param(
        facts(phase("p1", "a", needs("b", "a")), parks={"a": park("needs-input")}),
        None,
        id="parked-dependency-holds-its-dependant",
    ),
    pytest.param(
        facts(phase("p1", "a", needs("b", "a"), "c"), parks={"a": park()}),
        ChangeTarget("p1", "c", "propose"),
        id="waiting-change-skipped-for-an-independent-one",
    ),
    pytest.param(
        facts(phase("p1", "a", needs("b", "a")), disks=done("a")),
        ChangeTarget("p1", "b", "propose"),
        id="dependency-done",
    ),
    pytest.param(
        facts(
            phase("p1", "a"),
            phase("p2", needs("b", "a")),
            disks={"a": APPLIED},
            journal=verified("a"),
        ),
        ChangeTarget("p2", "b", "propose"),
        id="cross-phase-dependency-done",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), parks={"a": park(), "b": park("awaiting-approval")}),
        None,
        id="every-change-parked",
    ),
    pytest.param(
        facts(
            phase("p1", "a"),
            phase("p2", "b"),
            disks={"a": APPLIED},
            journal=verified("a"),
            parks={"a": park("awaiting-approval", "verify")},
        ),
        None,
        id="approval-park-on-a-verified-change-holds-the-next-phase",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2", "b"), disks=done("a")),
        ChangeTarget("p2", "b", "propose"),
        id="next-phase-without-proof",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2", "b")),
        ChangeTarget("p1", "a", "propose"),
        id="later-phase-gated-by-unfinished-work",
    ),
    # 1. boundary proof interposed before a change
    pytest.param(
        facts(phase("p1", "a", proof=POW), phase("p2", "b"), disks=done("a")),
        ProofTarget("p1"),
        id="boundary-proof-before-the-next-phase",
    ),
    pytest.param(
        facts(phase("p1", "a", proof=POW), phase("p2", "b")),
        ChangeTarget("p1", "a", "propose"),
        id="no-proof-before-the-first-phase-change",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2", "b"),
            disks=done("a"),
            journal=[proof("p1", True)],
        ),
        ChangeTarget("p2", "b", "propose"),
        id="boundary-proof-runs-once",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW_WARN),
            phase("p2", "b"),
            disks=done("a"),
            journal=[proof("p1", False, "warn")],
        ),
        ChangeTarget("p2", "b", "propose"),
        id="warn-failure-never-gates",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2", "b"),
            disks=done("a"),
            journal=[proof("p1", False)],
        ),
        None,
        id="hard-gate-failure-gates-the-next-phase",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2", "b"),
            disks=done("a"),
            journal=[proof("p1", False), invalidated("p1")],
        ),
        ProofTarget("p1"),
        id="invalidated-proof-runs-again",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2", "b"),
            phase("p3", "c"),
            disks=done("a", "b"),
        ),
        ProofTarget("p1"),
        id="earliest-unrecorded-proof-first",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2", "b", proof=POW),
            phase("p3", "c"),
            disks=done("a", "b"),
            journal=[proof("p1", True)],
        ),
        ProofTarget("p2"),
        id="then-the-next-unrecorded-proof",
    ),
    # 2. decompose
    pytest.param(facts(phase("p1")), DecomposeTarget("p1"), id="empty-first-phase"),
    pytest.param(
        facts(phase("p1", "a"), phase("p2"), disks=done("a")),
        DecomposeTarget("p2"),
        id="reachable-empty-phase",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2")),
        ChangeTarget("p1", "a", "propose"),
        id="gated-empty-phase-waits-for-the-change",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2"), parks={"a": park()}),
        None,
        id="gated-empty-phase-never-decomposed",
    ),
    pytest.param(
        facts(phase("p1", "a", proof=POW), phase("p2"), disks=done("a")),
        ProofTarget("p1"),
        id="boundary-proof-before-a-decomposition",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2"),
            disks=done("a"),
            journal=[proof("p1", True)],
        ),
        DecomposeTarget("p2"),
        id="decompose-after-the-recorded-proof",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            phase("p2"),
            disks=done("a"),
            journal=[proof("p1", False)],
        ),
        None,
        id="failed-proof-gates-the-decomposition",
    ),
    pytest.param(
        facts(phase("p1"), parks={"p1": park(transition="decompose")}),
        None,
        id="parked-decomposition-skipped",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2"), phase("p3"), disks=done("a")),
        DecomposeTarget("p2"),
        id="only-the-first-empty-phase-is-reachable",
    ),
    # 3. terminal proof
    pytest.param(
        facts(phase("p1", "a", proof=POW), disks=done("a")),
        ProofTarget("p1"),
        id="terminal-proof",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2", "b", proof=POW), disks=done("a", "b")),
        ProofTarget("p2"),
        id="last-phase-proof",
    ),
    pytest.param(
        facts(phase("p1", "a", proof=POW), disks=done("a"), journal=[proof("p1", True)]),
        None,
        id="terminal-proof-recorded-passing",
    ),
    pytest.param(
        facts(phase("p1", "a", proof=POW), disks=done("a"), journal=[proof("p1", False)]),
        None,
        id="terminal-proof-recorded-failing",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            disks=done("a"),
            journal=[proof("p1", False), invalidated("p1")],
        ),
        ProofTarget("p1"),
        id="terminal-proof-invalidated",
    ),
    # 4. whole-batch PR
    pytest.param(
        facts(phase("p1", "a"), phase("p2", "b"), disks=done("a", "b"), pr="whole-batch"),
        PrTarget(phase="p2", key="pr:demo", boundary=None),
        id="whole-batch-pr",
    ),
    pytest.param(
        facts(
            phase("p1", "a"),
            phase("p2", "b"),
            disks=done("a", "b"),
            journal=[outcome("pr:demo", "pr")],
            pr="whole-batch",
        ),
        None,
        id="whole-batch-pr-opened-once",
    ),
    pytest.param(
        facts(
            phase("p1", "a"),
            disks=done("a"),
            journal=[outcome("pr:demo", "pr", "blocked")],
            pr="whole-batch",
        ),
        PrTarget(phase="p1", key="pr:demo", boundary=None),
        id="whole-batch-pr-retried-after-a-failed-open",
    ),
    pytest.param(
        facts(phase("p1", "a"), disks=done("a"), pr="whole-batch", parks={"pr:demo": park()}),
        None,
        id="parked-pr-not-selected",
    ),
    pytest.param(
        facts(phase("p1", "a"), phase("p2", "b"), disks=done("a"), pr="whole-batch"),
        ChangeTarget("p2", "b", "propose"),
        id="no-pr-before-completion",
    ),
    pytest.param(
        facts(phase("p1", "a", proof=POW), disks=done("a"), pr="whole-batch"),
        ProofTarget("p1"),
        id="terminal-proof-before-the-pr",
    ),
    pytest.param(
        facts(
            phase("p1", "a", proof=POW),
            disks=done("a"),
            journal=[proof("p1", False)],
            pr="whole-batch",
        ),
        None,
        id="no-pr-after-a-failing-terminal-proof",
    ),
    # 5. stacked PR tail
    pytest.param(
        facts(phase("p1", "a"), phase("p2", "b", "c"), disks=done("a", "b", "c"), pr="per-phase"),
        PrTarget(phase="p1", key="pr:demo:p1", boundary=group("p1", 0, "p1", "a")),
        id="per-phase-first-group",
    ),
    pytest.param(
        facts(
            phase("p1", "a"),
            phase("p2", "b", "c"),
            disks=done("a", "b", "c"),
            journal=[outcome("pr:demo:p1", "pr")],
            pr="per-phase",
        ),
        PrTarget(phase="p2", key="pr:demo:p2", boundary=group("p2", 1, "p2", "b", "c")),
        id="per-phase-second-group",
    ),
    pytest.param(
        facts(
            phase("p1", "a"),
            phase("p2", "b", "c"),
            disks=done("a", "b", "c"),
            journal=[outcome("pr:demo:p1", "pr"), outcome("pr:demo:p2", "pr")],
            pr="per-phase",
        ),
        None,
        id="per-phase-each-group-once",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), phase("p2", "c"), disks=done("a", "b", "c"), pr="per-change"),
        PrTarget(phase="p1", key="pr:demo:a", boundary=group("a", 0, "p1", "a")),
        id="per-change-first-group",
    ),
    pytest.param(
        facts(
            phase("p1", "a", "b"),
            phase("p2", "c"),
            disks=done("a", "b", "c"),
            journal=[outcome("pr:demo:a", "pr"), outcome("pr:demo:b", "pr")],
            pr="per-change",
        ),
        PrTarget(phase="p2", key="pr:demo:c", boundary=group("c", 2, "p2", "c")),
        id="per-change-groups-in-order",
    ),
    pytest.param(
        facts(
            phase("p1", "a", "b"),
            disks=done("a", "b"),
            journal=[outcome("pr:demo:b", "pr")],
            pr="per-change",
        ),
        PrTarget(phase="p1", key="pr:demo:a", boundary=group("a", 0, "p1", "a")),
        id="per-change-first-unopened-group",
    ),
    pytest.param(
        facts(
            phase("p1", "a", "b"),
            disks=done("a", "b"),
            parks={"pr:demo:a": park(transition="pr")},
            pr="per-change",
        ),
        None,
        id="parked-stacked-group-holds-the-tail",
    ),
    pytest.param(
        facts(phase("p1", "a", "b"), disks=done("a"), pr="per-change"),
        ChangeTarget("p1", "b", "propose"),
        id="stacked-prs-wait-for-completion",
    ),
    pytest.param(
        facts(phase("p1", "a"), disks=done("a"), pr="off"), None, id="prs-off-nothing-to-open"
    ),
]


@pytest.mark.parametrize(("batch", "target"), SELECTION)
def test_pick_next_step(batch: BatchFacts, target: ApplyTarget | None) -> None:
    assert pick_next_step(batch) == target


@pytest.mark.parametrize(("batch", "target"), SELECTION)
def test_status_next_is_the_selection(batch: BatchFacts, target: ApplyTarget | None) -> None:
    status = compute_batch_status(batch)
    assert status.next == target
    assert (status.why is None) is (status.done or target is not None)


# ---------------------------------------------------------------- done and why


@pytest.mark.parametrize(
    ("batch", "done"),
    [
        pytest.param(facts(phase("p1", "a"), disks=done("a")), True, id="all-done-no-proof"),
        pytest.param(facts(phase("p1", "a")), False, id="change-pending"),
        pytest.param(facts(phase("p1")), False, id="undecomposed-phase"),
        pytest.param(
            facts(phase("p1", "a"), phase("p2"), disks=done("a")),
            False,
            id="later-empty-phase-keeps-the-batch-open",
        ),
        pytest.param(
            facts(phase("p1", "a", proof=POW), disks=done("a")),
            False,
            id="terminal-proof-unrecorded",
        ),
        pytest.param(
            facts(phase("p1", "a", proof=POW), disks=done("a"), journal=[proof("p1", True)]),
            True,
            id="terminal-proof-passed",
        ),
        pytest.param(
            facts(
                phase("p1", "a", proof=POW_WARN),
                disks=done("a"),
                journal=[proof("p1", False, "warn")],
            ),
            True,
            id="terminal-proof-warn-failure",
        ),
        pytest.param(
            facts(phase("p1", "a", proof=POW), disks=done("a"), journal=[proof("p1", False)]),
            False,
            id="terminal-proof-hard-failure",
        ),
        pytest.param(
            facts(phase("p1", "a"), disks=done("a"), pr="whole-batch"), False, id="pr-unopened"
        ),
        pytest.param(
            facts(
                phase("p1", "a"),
                disks=done("a"),
                journal=[outcome("pr:demo", "pr")],
                pr="whole-batch",
            ),
            True,
            id="pr-opened",
        ),
        pytest.param(
            facts(
                phase("p1", "a"),
                disks=done("a"),
                parks={"pr:demo": park(transition="pr")},
                pr="whole-batch",
            ),
            False,
            id="pr-parked",
        ),
        pytest.param(
            facts(phase("p1", "a"), disks=done("a"), parks={"a": park("awaiting-approval")}),
            False,
            id="approval-park-on-a-done-change",
        ),
        pytest.param(
            facts(
                phase("p1", "a"),
                disks={"a": APPLIED},
                journal=verified("a"),
            ),
            True,
            id="verified-in-the-journal",
        ),
    ],
)
def test_batch_done(batch: BatchFacts, done: bool) -> None:
    status = compute_batch_status(batch)
    assert status.done is done
    if done:
        assert status.next is None
        assert status.why is None


@pytest.mark.parametrize(
    ("batch", "why"),
    [
        pytest.param(
            facts(phase("p1", "a"), parks={"a": park("needs-input", "propose", "which db?")}),
            "a is needs-input after propose: which db?",
            id="park",
        ),
        pytest.param(
            facts(
                phase("p1", "a"),
                disks={"a": APPLIED},
                journal=verified("a", False),
                max_fix_rounds=0,
            ),
            "change 'a' is failed-fix: 0 fix round(s) spent and the review still blocks",
            id="failed-fix",
        ),
        pytest.param(
            facts(
                phase("p1", "a", proof=POW),
                phase("p2", "b"),
                disks=done("a"),
                journal=[proof("p1", False)],
            ),
            "phase 'p1' proof-of-work failed (hard-gate): exit 1 (pass requires exit 0); fix the "
            "cause and run `pairbot batch rerun-proof demo --phase p1`",
            id="failed-boundary-proof",
        ),
        pytest.param(
            facts(phase("p1", "a", proof=POW), disks=done("a"), journal=[proof("p1", False)]),
            "phase 'p1' proof-of-work failed (hard-gate): exit 1 (pass requires exit 0); fix the "
            "cause and run `pairbot batch rerun-proof demo --phase p1`",
            id="failed-terminal-proof",
        ),
        pytest.param(
            facts(
                phase("p1", "a", needs("b", "a")),
                disks={"a": APPLIED},
                journal=verified("a", False),
                max_fix_rounds=0,
            ),
            "change 'a' is failed-fix: 0 fix round(s) spent and the review still blocks",
            id="failed-fix-before-waiting",
        ),
        pytest.param(
            facts(phase("p1"), parks={"p1": park("blocked", "decompose", "no plan")}),
            "p1 is blocked after decompose: no plan",
            id="parked-decomposition",
        ),
    ],
)
def test_why_nothing_is_runnable(batch: BatchFacts, why: str) -> None:
    status = compute_batch_status(batch)
    assert status.next is None
    assert not status.done
    assert status.why == why


# ---------------------------------------------------------------- change and phase states


def test_change_states_apply_parks_then_the_done_rule_then_dependencies() -> None:
    batch = facts(
        phase("p1", "a", needs("b", "a"), "c", needs("d", "c")),
        phase("p2", "e"),
        disks={"a": APPLIED, "c": ARCHIVED, "e": PLANNED},
        journal=[*verified("a", False), outcome("e", "propose")],
        parks={"c": park("awaiting-approval", "verify", "review it")},
        max_fix_rounds=0,
    )
    assert change_states(batch) == {
        "a": ChangeState(
            "a",
            "p1",
            "failed-fix",
            None,
            review_round=2,
            reason="0 fix round(s) spent and the review still blocks",
        ),
        "b": ChangeState("b", "p1", "waiting", "propose", reason="waiting for a"),
        "c": ChangeState("c", "p1", "awaiting-approval", None, reason="review it"),
        "d": ChangeState("d", "p1", "waiting", "propose", reason="waiting for c"),
        "e": ChangeState("e", "p2", "in-progress", "apply"),
    }


def test_a_waiting_change_names_every_pending_dependency() -> None:
    batch = facts(phase("p1", "a", "b", needs("c", "a", "b")))
    assert change_states(batch)["c"].reason == "waiting for a, b"


def test_phase_states_cite_what_gates_each_phase() -> None:
    batch = facts(
        phase("p1", "a", proof=POW),
        phase("p2", "b"),
        phase("p3"),
        disks=done("a", "b"),
        journal=[proof("p1", False)],
    )
    p1, p2, p3 = phase_states(batch, change_states(batch))
    assert (p1.gated, p1.complete, p1.proof_required, p1.proof_ok) == (False, True, True, False)
    assert p2.gated
    assert (
        p2.gated_by == "phase 'p1' proof-of-work failed (hard-gate): exit 1 (pass requires exit 0)"
    )
    assert p2.complete
    assert not p2.proof_required
    assert p2.proof_ok
    assert p3.gated_by == p2.gated_by
    assert not p3.decomposed


@pytest.mark.parametrize(
    ("batch", "gated_by"),
    [
        pytest.param(
            facts(phase("p1", "a", "b"), phase("p2", "c"), disks=done("a")),
            "phase 'p1' is not finished: b",
            id="unfinished",
        ),
        pytest.param(
            facts(phase("p1"), phase("p2", "c")),
            "phase 'p1' has no changes yet (decomposition pending)",
            id="undecomposed",
        ),
        pytest.param(
            facts(
                phase("p1", "a", proof=POW_WARN),
                phase("p2", "c"),
                disks=done("a"),
                journal=[proof("p1", False, "warn")],
            ),
            None,
            id="warn-never-gates",
        ),
        pytest.param(
            facts(phase("p1", "a", proof=POW), phase("p2", "c"), disks=done("a")),
            None,
            id="unrecorded-proof-does-not-gate",
        ),
    ],
)
def test_second_phase_gated_by(batch: BatchFacts, gated_by: str | None) -> None:
    second = phase_states(batch, change_states(batch))[1]
    assert second.gated_by == gated_by
    assert second.gated is (gated_by is not None)


def test_first_runnable_change_skips_gated_phases() -> None:
    batch = facts(phase("p1", "a"), phase("p2", "b"), parks={"a": park()})
    changes = change_states(batch)
    assert first_runnable_change(phase_states(batch, changes), changes) is None
    opened = facts(phase("p1", "a"), phase("p2", "b"), disks=done("a"))
    changes = change_states(opened)
    runnable = first_runnable_change(phase_states(opened, changes), changes)
    assert runnable is not None
    assert (runnable.name, runnable.next) == ("b", "propose")


def test_status_reports_parks_and_phases() -> None:
    parks = {"a": park()}
    status = compute_batch_status(facts(phase("p1", "a"), phase("p2"), parks=parks))
    assert status.batch == BATCH
    assert status.parks == parks
    assert [p.name for p in status.phases] == ["p1", "p2"]
    assert status.changes["a"].status == "blocked"
