"""The coordinator's re-checks of a verifier's findings: floor, severity evidence, history
rewrites, required findings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.review.verdict import (
    SEVERITIES,
    FindingsReport,
    Severity,
    blocking_for,
    floor_problems,
    history_rewrite_ids,
    required_problems,
    rewrite_closure_problems,
    severity_problems,
    verdict_from_findings,
)

HEAD, OLD = "e" * 40, "f" * 40


def report(*findings: dict[str, Any], **extra: Any) -> FindingsReport:
    return FindingsReport.model_validate({"findings": list(findings), **extra})


def finding(**fields: Any) -> dict[str, Any]:
    return {"id": "r1-1", "kind": "defect", "severity": "major", "blocking": True, **fields}


@pytest.mark.parametrize(
    ("severity", "floor", "blocks"),
    [
        pytest.param("critical", "major", True, id="critical-over-major"),
        pytest.param("major", "major", True, id="at-the-floor"),
        pytest.param("minor", "major", False, id="below-the-floor"),
        pytest.param("info", "minor", False, id="info-below-minor"),
        pytest.param("info", "info", True, id="floor-info-blocks-everything"),
        pytest.param("major", "critical", False, id="floor-critical"),
        pytest.param(None, "critical", True, id="no-severity-always-blocks"),
    ],
)
def test_blocking_is_computed_from_the_severity_and_the_floor(
    severity: Severity | None, floor: Severity, blocks: bool
) -> None:
    assert blocking_for(severity, floor) is blocks
    assert floor_problems(report(finding(severity=severity, blocking=blocks)), floor) == []
    wrong = floor_problems(report(finding(severity=severity, blocking=not blocks)), floor)
    assert len(wrong) == 1 and "r1-1" in wrong[0]


@given(st.sampled_from(SEVERITIES), st.sampled_from(SEVERITIES))
def test_raising_the_floor_never_makes_a_finding_block(severity: Severity, floor: Severity) -> None:
    stricter = SEVERITIES[: SEVERITIES.index(floor) + 1]
    assert all(blocking_for(severity, f) <= blocking_for(severity, floor) for f in stricter)


def test_a_mismatch_names_the_finding_the_floor_and_the_expected_value() -> None:
    (problem,) = floor_problems(report(finding(severity="minor", blocking=True)), "major")
    assert problem == (
        "finding r1-1 is minor and the severity floor is major: blocking must be false, not true"
    )
    (problem,) = floor_problems(report(finding(severity=None, blocking=False)), "major")
    assert "has no severity" in problem and "critical, major, minor, info" in problem
    question = finding(kind="question", severity=None, blocking=False)
    assert floor_problems(report(question), "major") == []
    minor_question = finding(kind="question", severity="minor", blocking=True)
    assert len(floor_problems(report(minor_question), "major")) == 1


@pytest.mark.parametrize(
    ("earlier", "now", "evidence", "refused"),
    [
        pytest.param("critical", "minor", None, True, id="downgrade-without-evidence"),
        pytest.param("minor", "critical", "  ", True, id="upgrade-with-blank-evidence"),
        pytest.param("critical", "minor", "the path is unreachable", False, id="with-evidence"),
        pytest.param("major", "major", None, False, id="unchanged"),
        pytest.param(None, "major", None, True, id="severity-given-later"),
    ],
)
def test_a_severity_change_needs_severity_evidence(
    earlier: str | None, now: str, evidence: str | None, refused: bool
) -> None:
    problems = severity_problems(
        {"r1-1": earlier}, report(finding(severity=now, severityEvidence=evidence))
    )
    assert bool(problems) is refused
    if refused:
        assert "r1-1" in problems[0] and "severityEvidence" in problems[0]


def test_a_new_finding_needs_no_severity_evidence() -> None:
    assert severity_problems({}, report(finding(severity="minor", blocking=False))) == []


def test_a_history_rewrite_finding_blocks_whatever_its_severity() -> None:
    rewrite = finding(severity="info", blocking=False, humanDecisionKind="history-rewrite")
    verdict = verdict_from_findings(report(rewrite))
    assert not verdict.converged
    assert history_rewrite_ids([rewrite]) == ["r1-1"]
    assert history_rewrite_ids([{**rewrite, "transition": "resolved"}]) == []


@pytest.mark.parametrize("transition", ["resolved", "superseded"])
def test_a_history_rewrite_finding_cannot_be_closed_on_the_same_head(transition: str) -> None:
    closed = report(finding(transition=transition, humanDecisionKind="history-rewrite"))
    (problem,) = rewrite_closure_problems(["r1-1"], closed, same_head=True)
    assert "r1-1" in problem and "/pair retry" in problem
    assert rewrite_closure_problems(["r1-1"], closed, same_head=False) == []
    still = report(finding(humanDecisionKind="history-rewrite"))
    assert rewrite_closure_problems(["r1-1"], still, same_head=True) == []


def proof(**fields: Any) -> dict[str, Any]:
    return {"id": "rf-1", "head": HEAD, "reproduced": False, "observed": "200 OK", **fields}


@pytest.mark.parametrize(
    ("observed", "findings", "proofs", "expected"),
    [
        pytest.param(HEAD, [], [proof()], None, id="re-proved-gone"),
        pytest.param(
            HEAD,
            [finding(kind="regression", requiredFinding="rf-1")],
            [proof(reproduced=True)],
            None,
            id="re-proved-present-as-regression",
        ),
        pytest.param(OLD, [], [proof()], "observed at ffffffffffff", id="another-sha"),
        pytest.param(HEAD, [], [], "not re-proved", id="no-proof"),
        pytest.param(
            HEAD, [], [proof(head=OLD)], "re-proved at ffffffffffff", id="proof-elsewhere"
        ),
        pytest.param(
            HEAD,
            [finding(requiredFinding="rf-1")],
            [proof(reproduced=True)],
            'kind "regression"',
            id="present-but-not-a-regression",
        ),
    ],
)
def test_required_findings_are_re_proved_on_the_same_reviewed_head(
    observed: str,
    findings: list[dict[str, Any]],
    proofs: list[dict[str, Any]],
    expected: str | None,
) -> None:
    problems = required_problems(
        [("rf-1", observed)], report(*findings, requiredProofs=proofs), HEAD
    )
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0] and "rf-1" in problems[0]


def test_the_review_comment_says_what_a_human_decides_and_what_regressed() -> None:
    from app.domain.review.review_comment import render_review

    claim = {
        "obligation": "AC-1",
        "reproducer": "pytest -k login",
        "passingHead": OLD,
        "failingHead": HEAD,
        "introducedBy": "fix-1",
        "closureAssertions": ["login works"],
        "boundaries": ["auth"],
    }
    body = render_review(
        report(
            finding(humanDecisionKind="history-rewrite"),
            finding(id="r1-2", kind="regression", regressionRisk=claim),
            finding(id="r1-3", severity="critical", severityEvidence="reachable from the API"),
        ),
        head=HEAD,
        review_round=1,
        converged=False,
    )
    assert "`r1-1` can only be fixed by rewriting the branch's Git history" in body
    assert "`r1-2` is a regression introduced by fix-1 (obligation AC-1)" in body
    assert "`r1-3` changed severity: reachable from the API" in body
    plain = render_review(report(finding()), head=HEAD, review_round=1, converged=False)
    assert "changed severity" not in plain and "Git history" not in plain
