"""The regression-risk ledger: one authority, a table of every negative family, derived state."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.card.autonomy import parse_gate_condition
from app.domain.card.cycle_end import CycleEndFacts, NotConverged, decide_cycle_end
from app.domain.reports.metrics import reduce_metrics
from app.domain.review.regression import (
    Refusal,
    ReviewFacts,
    RiskEvent,
    active_risks,
    check_event,
    counters,
    evidence_digest,
    plan_repairs,
    plan_review,
    risk_id,
)
from app.domain.review.verdict import FindingsReport

PASS, FAIL, REPAIRED, OTHER = "a" * 40, "b" * 40, "c" * 40, "d" * 40
CLAIM: dict[str, Any] = {
    "obligation": "AC-1",
    "reproducer": "pytest -k login",
    "passingHead": PASS,
    "failingHead": FAIL,
    "introducedBy": "fix-1",
    "closureAssertions": ["login works"],
    "boundaries": ["auth"],
}
RID = risk_id("card-7", "r2-1", "fix-1")


def opened(**changes: Any) -> RiskEvent:
    event = RiskEvent(
        action="opened",
        risk=RID,
        subject="card-7",
        finding="r2-1",
        batch="fix-1",
        run="run1",
        head=FAIL,
        evidence=evidence_digest(CLAIM),
        seq=0,
        claim=CLAIM,
        batch_findings=("r1-1",),
    )
    return replace(event, **changes)


def repaired(**changes: Any) -> RiskEvent:
    base = opened(action="repaired", head=REPAIRED, seq=1, by="fix", repair="fix-2", claim=None)
    return replace(base, batch_findings=(), **changes)


CLOSURE = {
    "head": REPAIRED,
    "assertions": ["login works"],
    "obligationPassing": True,
    "boundaries": ["auth"],
}


def discharged(**changes: Any) -> RiskEvent:
    base = opened(
        action="discharged",
        head=REPAIRED,
        seq=2,
        claim=None,
        transition="resolved",
        blocking=False,
        closure=CLOSURE,
        batch_closed=True,
    )
    return replace(base, batch_findings=(), **changes)


POSITIVE = [opened(), repaired(), discharged()]


def test_the_positive_path_opens_repairs_and_discharges() -> None:
    ledger: list[RiskEvent] = []
    for event in POSITIVE:
        assert check_event(ledger, event) == "accept"
        ledger.append(event)
    assert active_risks(ledger) == {}
    assert counters(ledger) == {
        "invalidatedRemediations": 1,
        "regressionRepairs": 1,
        "activeRegressionRisks": 0,
        "dischargedRegressionRisks": 1,
    }
    # A reintroduction reopens the same risk rather than counting a new discovery.
    again = opened(action="reopened", seq=3, head=OTHER)
    assert check_event(ledger, again) == "accept"
    assert list(active_risks([*ledger, again])) == [RID]


@pytest.mark.parametrize(
    ("ledger", "event", "family"),
    [
        pytest.param([], discharged(seq=0), "no-predecessor", id="jump-to-discharge"),
        pytest.param([], repaired(seq=0), "no-predecessor", id="repair-without-risk"),
        pytest.param(POSITIVE[:1], opened(seq=1), "no-predecessor", id="open-twice"),
        pytest.param(
            POSITIVE[:1], opened(action="reopened", seq=1), "no-predecessor", id="reopen-active"
        ),
        pytest.param(POSITIVE[:1], discharged(seq=1), "missing-repair", id="missing-repair"),
        pytest.param(POSITIVE, repaired(seq=3), "no-predecessor", id="repair-after-discharge"),
        pytest.param(
            POSITIVE[:2],
            discharged(head=OTHER, closure={**CLOSURE, "head": OTHER}),
            "missing-repair",
            id="discharge-of-unrepaired-head",
        ),
        pytest.param(
            POSITIVE[:2], discharged(evidence="0" * 64), "evidence-mutated", id="mutated-evidence"
        ),
        pytest.param(
            [],
            opened(claim={**CLAIM, "obligation": "AC-2"}),
            "evidence-mutated",
            id="claim-disagrees-with-digest",
        ),
        pytest.param(
            [], opened(risk="card-7:r2-1:fix-9"), "payload-mismatch", id="risk-id-not-derived"
        ),
        pytest.param([], opened(blocking=False), "payload-mismatch", id="open-not-blocking"),
        pytest.param(
            [], opened(transition="resolved"), "payload-mismatch", id="open-with-closed-finding"
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(transition="open"),
            "payload-mismatch",
            id="discharge-of-open-finding",
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(batch_closed=False),
            "payload-mismatch",
            id="batch-findings-still-open",
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(closure={**CLOSURE, "assertions": []}),
            "payload-mismatch",
            id="closure-assertions-not-executed",
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(closure={**CLOSURE, "obligationPassing": False}),
            "payload-mismatch",
            id="obligation-not-passing",
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(closure={**CLOSURE, "boundaries": []}),
            "payload-mismatch",
            id="boundaries-not-retested",
        ),
        pytest.param(
            POSITIVE[:1], repaired(head=FAIL), "payload-mismatch", id="repair-on-the-failing-head"
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(closure={**CLOSURE, "head": OTHER}),
            "wrong-binding",
            id="closure-bound-to-another-head",
        ),
        pytest.param(
            POSITIVE[:2], discharged(run="run2"), "wrong-binding", id="event-of-another-run"
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(finding="r2-2", risk=risk_id("card-7", "r2-2", "fix-1")),
            "no-predecessor",
            id="event-bound-to-another-finding",
        ),
        pytest.param(
            POSITIVE[:2],
            discharged(batch="fix-2", risk=risk_id("card-7", "r2-1", "fix-2")),
            "no-predecessor",
            id="event-bound-to-another-batch",
        ),
        pytest.param(POSITIVE[:2], discharged(seq=1), "stale-writer", id="stale-writer"),
        pytest.param(
            POSITIVE[:2],
            discharged(by="scope-decision"),
            "wrong-actor",
            id="scope-decision-discharges",
        ),
        pytest.param(POSITIVE[:1], repaired(by="human"), "wrong-actor", id="human-repairs"),
    ],
)
def test_the_authority_refuses_every_negative_family(
    ledger: list[RiskEvent], event: RiskEvent, family: str
) -> None:
    verdict = check_event(ledger, event)
    assert isinstance(verdict, Refusal), verdict
    assert verdict.family == family
    assert str(verdict).startswith(f"risk-refused:{family}: ")


def test_replay_and_restart_are_idempotent() -> None:
    ledger = list(POSITIVE)
    for event in POSITIVE:
        assert check_event(ledger, event) == "replay"
    # Through the journal's shape and back: a restarted process sees the same events.
    restored = [RiskEvent.from_json(e.to_json()) for e in ledger]
    assert restored == ledger
    assert check_event(restored, POSITIVE[-1]) == "replay"


@given(st.lists(st.sampled_from([*POSITIVE, opened(action="reopened", seq=3)]), max_size=8))
def test_the_active_matrix_is_derived_from_accepted_events_only(
    candidates: list[RiskEvent],
) -> None:
    ledger: list[RiskEvent] = []
    for event in candidates:
        if check_event(ledger, event) == "accept":
            ledger.append(event)
    count = counters(ledger)
    assert count["activeRegressionRisks"] == len(active_risks(ledger)) <= 1
    assert count["invalidatedRemediations"] - count["dischargedRegressionRisks"] == len(
        active_risks(ledger)
    )


FACTS = ReviewFacts(
    subject="card-7",
    run="run1",
    head=FAIL,
    remediations={"fix-1": FAIL},
    reviewed_heads=frozenset({PASS}),
    remediated={"fix-1": ("r1-1",)},
)


def finding(**fields: Any) -> dict[str, Any]:
    return {"id": "r2-1", "kind": "regression", "severity": "major", "blocking": True, **fields}


def report(*findings: dict[str, Any]) -> FindingsReport:
    return FindingsReport.model_validate({"findings": list(findings)})


def test_a_review_with_an_admissible_claim_opens_the_risk_once() -> None:
    planned, problems = plan_review([], report(finding(regressionRisk=CLAIM)), FACTS)
    assert problems == []
    assert [(e.action, e.risk, e.batch_findings) for e in planned] == [("opened", RID, ("r1-1",))]
    # Observed again by the next review: the same risk, nothing new.
    again, problems = plan_review(planned, report(finding(regressionRisk=CLAIM)), FACTS)
    assert (again, problems) == ([], [])


@pytest.mark.parametrize("part", list(CLAIM))
def test_a_claim_missing_any_part_is_an_ordinary_finding(part: str) -> None:
    claim = {**CLAIM, part: [] if isinstance(CLAIM[part], list) else ""}
    assert plan_review([], report(finding(regressionRisk=claim)), FACTS) == ([], [])


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"introducedBy": "fix-4"}, "fix-4 is not a remediation batch", id="unknown-batch"
        ),
        pytest.param({"failingHead": OTHER}, "was not produced by fix-1", id="wrong-failing-head"),
        pytest.param({"passingHead": OTHER}, "passing head", id="passing-head-never-reviewed"),
    ],
)
def test_a_complete_claim_with_contradicted_provenance_is_refused(
    changes: dict[str, str], expected: str
) -> None:
    planned, problems = plan_review([], report(finding(regressionRisk={**CLAIM, **changes})), FACTS)
    assert planned == []
    assert any(expected in p and p.startswith("regression-provenance") for p in problems)


def test_a_risk_is_closed_only_with_its_closure_on_the_repaired_head() -> None:
    ledger, _ = plan_review([], report(finding(regressionRisk=CLAIM)), FACTS)
    ledger += plan_repairs(ledger, subject="card-7", run="run1", repair="fix-2", head=REPAIRED)
    later = replace(FACTS, head=REPAIRED)
    closed = finding(transition="resolved")
    original = {"id": "r1-1", "kind": "defect", "severity": "major", "blocking": True}
    _, problems = plan_review(ledger, report(closed, {**original, "transition": "resolved"}), later)
    assert problems and "closure" in problems[0]
    with_closure = {**closed, "closure": CLOSURE}
    _, problems = plan_review(ledger, report(with_closure, original), later)
    assert problems and "risk-refused:payload-mismatch" in problems[0]  # r1-1 still open
    planned, problems = plan_review(
        ledger, report(with_closure, {**original, "transition": "resolved"}), later
    )
    assert problems == []
    assert [e.action for e in planned] == ["discharged"]
    assert counters([*ledger, *planned])["activeRegressionRisks"] == 0


def test_a_repair_without_an_active_risk_writes_nothing() -> None:
    assert plan_repairs([], subject="card-7", run="run1", repair="fix-1", head=FAIL) == []


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({}, id="otherwise-ready"),
        pytest.param({"pending_scope": 2}, id="no-scope-escalation"),
        pytest.param({"approved": True}, id="no-merge-even-approved"),
    ],
)
def test_the_cycle_end_never_converges_with_an_active_risk(changes: dict[str, Any]) -> None:
    facts = CycleEndFacts(
        converged=True,
        pending_scope=0,
        synthesis_confirmed=True,
        until="merged",
        merge_gate=parse_gate_condition("never"),
        labels=frozenset(),
        reviewed_head=REPAIRED,
        current_head=REPAIRED,
        card_hash_reviewed="h1",
        card_hash_now="h1",
        pull_state="open",
        active_risks=1,
    )
    decision = decide_cycle_end(replace(facts, **changes))
    assert isinstance(decision, NotConverged)
    assert decision.status == "in-progress" and "regression risk" in decision.reason


def test_the_metrics_carry_the_latest_runs_counters_active_apart_from_history() -> None:
    def entry(event: RiskEvent) -> dict[str, Any]:
        return {"kind": "cycle", "key": "card-7", "data": event.to_json()}

    earlier_run = [entry(replace(e, run="run0")) for e in POSITIVE[:1]]
    malformed = {"kind": "cycle", "key": "card-7", "data": {"event": "risk", "action": "opened"}}
    records = [*earlier_run, malformed, *(entry(e) for e in POSITIVE[:2])]
    tail = reduce_metrics(records, as_of="2026-12-02T00:00:00Z").to_json()["regressionRisks"]
    assert tail == {
        "active": {"activeRegressionRisks": 1},
        "history": {
            "invalidatedRemediations": 1,
            "regressionRepairs": 1,
            "dischargedRegressionRisks": 0,
        },
    }
    empty = reduce_metrics([], as_of="2026-12-02T00:00:00Z").to_json()["regressionRisks"]
    assert empty["active"] == {"activeRegressionRisks": 0}


def test_a_card_names_each_required_finding_once() -> None:
    from pydantic import ValidationError

    from app.engine.manifest import ReviewConfig

    item = {
        "id": "rf-1",
        "card": 7,
        "observedHead": PASS,
        "severity": "major",
        "summary": "s",
        "oracle": "o",
        "probe": "p",
        "observed": "x",
    }
    config = ReviewConfig.model_validate({"requiredFindings": [item, {**item, "card": 8}]})
    assert [r.card for r in config.required_for(7)] == [7]
    assert config.severity_floor == "major"
    with pytest.raises(ValidationError, match="card 7 names 'rf-1' twice"):
        ReviewConfig.model_validate({"requiredFindings": [item, item]})
