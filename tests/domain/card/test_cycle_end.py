"""The end of a card's cycle (DESIGN.md "The card cycle"): a precedence table plus properties."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.card.autonomy import GateCondition, parse_gate_condition
from app.domain.card.cycle_end import (
    AwaitingHuman,
    AwaitingScopeDecision,
    Blocked,
    CycleEndFacts,
    Decision,
    Escalated,
    FailedPublication,
    Interrupted,
    Merge,
    Merged,
    NotConverged,
    Publish,
    ReadyForMerge,
    ReReview,
    Unreviewed,
    decide_cycle_end,
)
from hosts.labels import PrState

A = "a" * 40
B = "b" * 40
ALWAYS = GateCondition("always")
NEVER = GateCondition("never")
WHEN = parse_gate_condition("when has:risky lacks:tested")

# A converged, published card under `until: merged` with merge gate `never`: it merges.
BASE = CycleEndFacts(
    converged=True,
    pending_scope=0,
    synthesis_confirmed=True,
    until="merged",
    merge_gate=NEVER,
    labels=frozenset({"tested"}),
    reviewed_head=A,
    current_head=A,
    card_hash_reviewed="h1",
    card_hash_now="h1",
    pull_state="open",
)


def facts(**changes: Any) -> CycleEndFacts:
    return dataclasses.replace(BASE, **changes)


@pytest.mark.parametrize(
    ("given_facts", "expected_type", "status"),
    [
        # 1. A finished PR has no review to redo; 2. a stale review beats everything else.
        pytest.param(facts(current_head=B), ReReview, "awaiting-verify", id="head-moved"),
        pytest.param(
            facts(current_head=B, pull_state="merged", converged=False, pending_scope=2),
            Merged,
            "merged",
            id="merged-beats-a-moved-head",
        ),
        pytest.param(
            facts(current_head=B, converged=False, pending_scope=2),
            ReReview,
            "awaiting-verify",
            id="head-moved-beats-unconverged-scope",
        ),
        pytest.param(
            facts(current_head=B, approved=True),
            ReReview,
            "awaiting-verify",
            id="head-moved-beats-approval",
        ),
        pytest.param(
            facts(card_hash_now="h2"), ReReview, "awaiting-verify", id="card-hash-changed"
        ),
        pytest.param(
            facts(card_hash_now="h2", pull_state="closed", synthesis_confirmed=False),
            Interrupted,
            "interrupted",
            id="closed-beats-a-changed-card",
        ),
        pytest.param(
            facts(current_head=A.upper()), Merge, "ready-for-merge", id="sha-case-is-not-a-move"
        ),
        pytest.param(
            facts(labels=frozenset({"tested", "docs"})),
            Merge,
            "ready-for-merge",
            id="unrelated-label-no-rereview",
        ),
        pytest.param(
            facts(card_hash_reviewed=None, card_hash_now="h2"),
            Merge,
            "ready-for-merge",
            id="no-reviewed-hash-is-no-change",
        ),
        # 2. The PR's own fate.
        pytest.param(facts(pull_state="merged"), Merged, "merged", id="already-merged"),
        pytest.param(
            facts(pull_state="merged", converged=False),
            Merged,
            "merged",
            id="merged-beats-unconverged",
        ),
        pytest.param(facts(pull_state="closed"), Interrupted, "interrupted", id="closed"),
        # 3-4. Quality, then scope.
        pytest.param(facts(converged=False), NotConverged, "in-progress", id="not-converged"),
        pytest.param(
            facts(converged=False, pending_scope=3),
            NotConverged,
            "in-progress",
            id="unconverged-beats-scope",
        ),
        pytest.param(
            facts(pending_scope=1),
            AwaitingScopeDecision,
            "awaiting-scope-decision",
            id="scope-pending",
        ),
        pytest.param(
            facts(pending_scope=1, until="ready-for-merge"),
            AwaitingScopeDecision,
            "awaiting-scope-decision",
            id="scope-pending-beats-readiness",
        ),
        pytest.param(
            facts(pending_scope=1, approved=True),
            AwaitingScopeDecision,
            "awaiting-scope-decision",
            id="scope-pending-beats-approval",
        ),
        # 5. Readiness needs a reviewed head.
        pytest.param(
            facts(reviewed_head=None), Unreviewed, "awaiting-verify", id="no-reviewed-head"
        ),
        pytest.param(
            facts(reviewed_head=None, until="ready-for-merge"),
            Unreviewed,
            "awaiting-verify",
            id="no-reviewed-head-no-readiness",
        ),
        # 6. Publication.
        pytest.param(facts(synthesis_confirmed=False), Publish, "in-progress", id="publish"),
        pytest.param(
            facts(synthesis_confirmed=False, publication_failed=True),
            FailedPublication,
            "failed-publication",
            id="publication-failed",
        ),
        pytest.param(
            facts(synthesis_confirmed=True, publication_failed=True),
            Merge,
            "ready-for-merge",
            id="confirmed-after-a-failed-attempt",
        ),
        pytest.param(
            facts(synthesis_confirmed=False, approved=True),
            Publish,
            "in-progress",
            id="publish-beats-approval",
        ),
        # 7. until: ready-for-merge.
        pytest.param(
            facts(until="ready-for-merge"), ReadyForMerge, "ready-for-merge", id="ready-for-merge"
        ),
        pytest.param(
            facts(until="ready-for-merge", approved=True, merge_gate=NEVER),
            ReadyForMerge,
            "ready-for-merge",
            id="ready-for-merge-never-merges",
        ),
        pytest.param(
            facts(until="ready-for-merge", current_head=None),
            ReadyForMerge,
            "ready-for-merge",
            id="ready-without-a-pr-head",
        ),
        # 8. until: merged, the merge gate.
        pytest.param(facts(current_head=None), Blocked, "blocked", id="merge-needs-a-pr-head"),
        pytest.param(facts(merge_gate=ALWAYS), AwaitingHuman, "awaiting-human", id="gate-always"),
        pytest.param(
            facts(merge_gate=ALWAYS, approved=True),
            Merge,
            "ready-for-merge",
            id="gate-always-approved",
        ),
        pytest.param(facts(merge_gate=NEVER), Merge, "ready-for-merge", id="gate-never"),
        pytest.param(
            facts(merge_gate=WHEN, labels=frozenset({"tested", "risky"})),
            Escalated,
            "escalated",
            id="when-has-fires",
        ),
        pytest.param(
            facts(merge_gate=WHEN, labels=frozenset()),
            Escalated,
            "escalated",
            id="when-lacks-fires",
        ),
        pytest.param(
            facts(merge_gate=WHEN, labels=frozenset({"tested"})),
            Merge,
            "ready-for-merge",
            id="when-neither-fires",
        ),
        pytest.param(
            facts(merge_gate=WHEN, labels=frozenset({"risky"}), approved=True),
            Merge,
            "ready-for-merge",
            id="when-fires-approved",
        ),
    ],
)
def test_decision_table(given_facts: CycleEndFacts, expected_type: type, status: str) -> None:
    decision = decide_cycle_end(given_facts)
    assert type(decision) is expected_type
    assert decision.status == status
    assert decision.pr_state is PrState.of(status)
    assert decision.reason


def test_merge_is_pinned_to_the_reviewed_head_in_lower_case() -> None:
    assert decide_cycle_end(facts(reviewed_head=A.upper(), current_head=A)) == Merge(
        A, "merge gate `never`: merging unattended"
    )


def test_ready_for_merge_carries_the_reviewed_head() -> None:
    decision = decide_cycle_end(facts(until="ready-for-merge"))
    assert isinstance(decision, ReadyForMerge)
    assert decision.reviewed_head == A


def test_rereview_names_both_heads() -> None:
    decision = decide_cycle_end(facts(current_head=B))
    assert isinstance(decision, ReReview)
    assert A[:12] in decision.reason
    assert B[:12] in decision.reason


@pytest.mark.parametrize(
    ("labels", "conditions"),
    [
        pytest.param({"tested", "risky"}, ("has:risky",), id="has"),
        pytest.param(set(), ("lacks:tested",), id="lacks"),
        pytest.param({"risky"}, ("has:risky", "lacks:tested"), id="both"),
    ],
)
def test_escalation_names_the_conditions_that_fired(
    labels: set[str], conditions: tuple[str, ...]
) -> None:
    decision = decide_cycle_end(facts(merge_gate=WHEN, labels=frozenset(labels)))
    assert isinstance(decision, Escalated)
    assert decision.conditions == conditions
    assert decision.reviewed_head == A
    for condition in conditions:
        assert condition in decision.reason


def test_scope_decision_counts_pending() -> None:
    decision = decide_cycle_end(facts(pending_scope=2))
    assert isinstance(decision, AwaitingScopeDecision)
    assert decision.pending == 2


@pytest.mark.parametrize(
    ("changes", "field_name"),
    [
        pytest.param({"reviewed_head": "abc"}, "reviewed_head", id="reviewed-short"),
        pytest.param({"reviewed_head": "g" * 40}, "reviewed_head", id="reviewed-not-hex"),
        pytest.param({"current_head": A + "0"}, "current_head", id="current-long"),
        pytest.param({"current_head": " " + A[1:]}, "current_head", id="current-blank"),
        pytest.param({"pending_scope": -1}, "pending_scope", id="negative-scope"),
        pytest.param({"until": "shipped"}, "until", id="unknown-until"),
        pytest.param({"pull_state": "draft"}, "pull_state", id="unknown-pull-state"),
    ],
)
def test_malformed_facts_name_the_field(changes: dict[str, Any], field_name: str) -> None:
    with pytest.raises(ValueError, match=field_name):
        facts(**changes)


# ------------------------------------------------------------------ properties

_shas = st.one_of(st.none(), st.sampled_from([A, B, A.upper()]))
_hashes = st.one_of(st.none(), st.sampled_from(["h1", "h2"]))
_gates = st.sampled_from(
    [
        ALWAYS,
        NEVER,
        WHEN,
        parse_gate_condition("when has:risky"),
        parse_gate_condition("when lacks:tested"),
    ]
)
_facts = st.builds(
    CycleEndFacts,
    converged=st.booleans(),
    pending_scope=st.integers(min_value=0, max_value=3),
    synthesis_confirmed=st.booleans(),
    until=st.sampled_from(["ready-for-merge", "merged"]),
    merge_gate=_gates,
    labels=st.frozensets(st.sampled_from(["risky", "tested", "docs"])),
    reviewed_head=_shas,
    current_head=_shas,
    card_hash_reviewed=_hashes,
    card_hash_now=_hashes,
    pull_state=st.sampled_from(["open", "closed", "merged"]),
    approved=st.booleans(),
    publication_failed=st.booleans(),
)


def _lower(value: str | None) -> str | None:
    return None if value is None else value.lower()


@given(_facts)
def test_merge_and_readiness_only_on_a_fresh_converged_review(f: CycleEndFacts) -> None:
    decision: Decision = decide_cycle_end(f)
    if isinstance(decision, Merge):
        assert decision.head == _lower(f.reviewed_head)
        assert f.until == "merged"
        assert _lower(f.current_head) == _lower(f.reviewed_head)
    if isinstance(decision, Merge | ReadyForMerge):
        assert f.reviewed_head is not None
        assert f.current_head is None or f.current_head.lower() == f.reviewed_head.lower()
        assert not (
            f.card_hash_reviewed is not None
            and f.card_hash_now is not None
            and f.card_hash_reviewed != f.card_hash_now
        )
        assert f.pending_scope == 0
        assert f.converged
        assert f.synthesis_confirmed
        assert f.pull_state == "open"


@given(_facts)
def test_every_decision_maps_to_a_pr_state(f: CycleEndFacts) -> None:
    decision = decide_cycle_end(f)
    assert isinstance(decision.pr_state, PrState)
    assert decision.reason


@given(_facts, st.frozensets(st.sampled_from(["docs", "area/ui", "wip"])))
def test_labels_never_trigger_a_rereview(f: CycleEndFacts, extra: frozenset[str]) -> None:
    before = decide_cycle_end(f)
    after = decide_cycle_end(dataclasses.replace(f, labels=f.labels | extra))
    assert isinstance(before, ReReview) == isinstance(after, ReReview)
    if f.merge_gate.mode != "when":
        assert before == after
