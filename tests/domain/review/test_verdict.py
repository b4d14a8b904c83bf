"""Verifier verdicts: the findings models, the message pattern, convergence and finding ids."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.domain.review.verdict import (
    Finding,
    FindingsReport,
    ScopeChange,
    Verdict,
    finding_id_problems,
    has_verdict,
    verdict_from_findings,
    verdict_from_message,
)


def finding(fid: str, *, blocking: bool = True, transition: str = "open") -> dict[str, Any]:
    return {"id": fid, "kind": "defect", "blocking": blocking, "transition": transition}


def report(*findings: dict[str, Any], scope: int = 0) -> FindingsReport:
    return FindingsReport.model_validate(
        {
            "findings": list(findings),
            "scopeChanges": [{"id": f"sc-{i + 1}", "type": "feature"} for i in range(scope)],
        }
    )


# ---------------------------------------------------------------- the models


@pytest.mark.parametrize(
    "fid",
    [
        pytest.param("r1-1", id="round-and-number"),
        pytest.param("r12-340", id="multi-digit"),
        pytest.param("r2-sec-3", id="with-reviewer"),
        pytest.param("r1-a1b2-1", id="alphanumeric-reviewer"),
    ],
)
def test_valid_finding_ids(fid: str) -> None:
    assert Finding.model_validate(finding(fid)).id == fid


@pytest.mark.parametrize(
    "fid",
    [
        pytest.param("r0-1", id="round-zero"),
        pytest.param("r1-0", id="number-zero"),
        pytest.param("r01-1", id="leading-zero-round"),
        pytest.param("1-1", id="no-r"),
        pytest.param("R1-1", id="upper-r"),
        pytest.param("r1", id="no-number"),
        pytest.param("r1-Sec-1", id="upper-reviewer"),
        pytest.param("r1-1 ", id="trailing-space"),
        pytest.param("sc-1", id="scope-id"),
    ],
)
def test_invalid_finding_ids_name_the_shape(fid: str) -> None:
    with pytest.raises(ValidationError, match=r"must look like r<round>-<n>"):
        Finding.model_validate(finding(fid))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("kind", "nit", id="unknown-kind"),
        pytest.param("severity", "huge", id="unknown-severity"),
        pytest.param("transition", "closed", id="unknown-transition"),
        pytest.param("extra", 1, id="unknown-key"),
    ],
)
def test_finding_rejects_values_outside_the_closed_sets(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        Finding.model_validate({**finding("r1-1"), field: value})


@pytest.mark.parametrize(
    ("transition", "active"),
    [
        pytest.param("open", True, id="open"),
        pytest.param("human", True, id="human"),
        pytest.param("resolved", False, id="resolved"),
        pytest.param("superseded", False, id="superseded"),
    ],
)
def test_finding_active(transition: str, active: bool) -> None:
    assert Finding.model_validate(finding("r1-1", transition=transition)).active is active


def test_finding_transition_defaults_to_open() -> None:
    parsed = Finding.model_validate({"id": "r1-1", "kind": "question", "blocking": False})
    assert parsed.transition == "open"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        pytest.param({"id": "sc-0", "type": "x"}, "must look like sc-<n>", id="zero"),
        pytest.param({"id": "r1-1", "type": "x"}, "must look like sc-<n>", id="finding-id"),
        pytest.param({"id": "sc-1", "type": ""}, "at least 1 character", id="empty-type"),
    ],
)
def test_scope_change_rejects(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        ScopeChange.model_validate(data)


def test_scope_change_camel_case_keys() -> None:
    parsed = ScopeChange.model_validate({"id": "sc-2", "type": "api", "affectedAc": "AC-1"})
    assert parsed.affected_ac == "AC-1"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        pytest.param(
            {"findings": [finding("r1-1"), finding("r1-1")]},
            "duplicate finding id 'r1-1'",
            id="duplicate-finding",
        ),
        pytest.param(
            {"scopeChanges": [{"id": "sc-1", "type": "a"}, {"id": "sc-1", "type": "b"}]},
            "duplicate scope proposal id 'sc-1'",
            id="duplicate-scope",
        ),
        pytest.param({"verdict": "ok"}, "Extra inputs are not permitted", id="unknown-key"),
    ],
)
def test_findings_report_rejects(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        FindingsReport.model_validate(data)


def test_findings_report_reads_ac_tests() -> None:
    parsed = FindingsReport.model_validate({"acTests": {"AC-1": "tests/test_a.py::test_x"}})
    assert parsed.ac_tests == {"AC-1": "tests/test_a.py::test_x"}


# ---------------------------------------------------------------- the verdict line


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param("Ready for archive", Verdict(True, 0, "message"), id="ready"),
        pytest.param(
            "Final assessment: READY FOR ARCHIVE.",
            Verdict(True, 0, "message"),
            id="ready-any-case-in-prose",
        ),
        pytest.param("0 critical issues found", Verdict(True, 0, "message"), id="zero-critical"),
        pytest.param("1 critical issue found", Verdict(False, 1, "message"), id="one-critical"),
        pytest.param(
            "3 critical issue(s) found; fix first", Verdict(False, 3, "message"), id="issue-s-form"
        ),
        pytest.param(
            "12 Critical Issues Found", Verdict(False, 12, "message"), id="multi-digit-any-case"
        ),
        pytest.param(
            "2  critical   issues  found", Verdict(False, 2, "message"), id="extra-whitespace"
        ),
        pytest.param(
            "2 critical issues found. Not ready for archive.",
            Verdict(False, 2, "message"),
            id="count-before-negated-ready",
        ),
        pytest.param(
            "Ready for archive? No: 2 critical issues found.",
            Verdict(False, 2, "message"),
            id="a-positive-count-anywhere-blocks",
        ),
        pytest.param(
            "0 critical issues found. Ready for archive.",
            Verdict(True, 0, "message"),
            id="zero-count-and-ready",
        ),
        pytest.param(
            "Not ready for archive: 1 critical issue found",
            Verdict(False, 1, "message"),
            id="negated-ready-with-count",
        ),
        pytest.param("Not ready for archive", None, id="negated-ready-is-no-verdict"),
        pytest.param("NOT READY FOR ARCHIVE", None, id="negated-ready-any-case"),
        pytest.param("all done", None, id="no-verdict"),
        pytest.param("", None, id="empty"),
        pytest.param("ready for archival", None, id="near-miss-archival"),
        pytest.param("x2 critical issues found", None, id="count-glued-to-a-word"),
        pytest.param("critical issues found", None, id="no-count"),
    ],
)
def test_verdict_from_message(message: str, expected: Verdict | None) -> None:
    assert verdict_from_message(message) == expected
    assert has_verdict(message) is (expected is not None)


def test_a_critical_verdict_is_still_a_verdict() -> None:
    # Presence, not polarity: corroboration asks only whether a verdict was given.
    assert has_verdict("5 critical issues found")
    verdict = verdict_from_message("5 critical issues found")
    assert verdict is not None
    assert not verdict.converged


# ---------------------------------------------------------------- findings verdicts


@pytest.mark.parametrize(
    ("findings", "scope", "converged", "blocking"),
    [
        pytest.param([], 0, True, 0, id="no-findings"),
        pytest.param([finding("r1-1")], 0, False, 1, id="open-blocking"),
        pytest.param([finding("r1-1", transition="human")], 0, False, 1, id="human-blocking"),
        pytest.param([finding("r1-1", blocking=False)], 0, True, 0, id="open-non-blocking"),
        pytest.param([finding("r1-1", transition="resolved")], 0, True, 0, id="resolved"),
        pytest.param([finding("r1-1", transition="superseded")], 0, True, 0, id="superseded"),
        pytest.param(
            [finding("r1-1"), finding("r1-2"), finding("r1-3", transition="resolved")],
            0,
            False,
            2,
            id="counts-active-blocking-only",
        ),
        pytest.param([], 2, True, 0, id="scope-proposals-never-block"),
    ],
)
def test_verdict_from_findings(
    findings: list[dict[str, Any]], scope: int, converged: bool, blocking: int
) -> None:
    assert verdict_from_findings(report(*findings, scope=scope)) == Verdict(
        converged=converged, blocking=blocking, source="findings", pending_scope=scope
    )


# ---------------------------------------------------------------- ids across rounds


DROPPED = (
    "finding {} from an earlier round was dropped; carry it with a transition "
    "(open, resolved, superseded, human)"
)
INVENTED = "finding {} is new but names round {}; new findings in this review are r{}-<n>"


@pytest.mark.parametrize(
    ("earlier", "findings", "round_no", "problems"),
    [
        pytest.param([], [], 1, [], id="first-round-empty"),
        pytest.param([], ["r1-1", "r1-sec-2"], 1, [], id="first-round-new-ids"),
        pytest.param(["r1-1"], ["r1-1", "r2-1"], 2, [], id="carried-and-new"),
        pytest.param(["r1-1"], [], 2, [DROPPED.format("r1-1")], id="dropped"),
        pytest.param(["r1-1", "r1-1"], [], 2, [DROPPED.format("r1-1")], id="dropped-reported-once"),
        pytest.param([], ["r1-4"], 2, [INVENTED.format("r1-4", 1, 2)], id="invented-past-round"),
        pytest.param([], ["r3-1"], 2, [INVENTED.format("r3-1", 3, 2)], id="future-round"),
        pytest.param(
            ["r1-1", "r1-2"],
            ["r1-2", "r1-9"],
            2,
            [DROPPED.format("r1-1"), INVENTED.format("r1-9", 1, 2)],
            id="dropped-then-invented-in-order",
        ),
    ],
)
def test_finding_id_problems(
    earlier: list[str], findings: list[str], round_no: int, problems: list[str]
) -> None:
    got = finding_id_problems(earlier, report(*(finding(f) for f in findings)), round_no)
    assert got == problems


def test_carried_ids_may_change_transition() -> None:
    carried = report(finding("r1-1", transition="resolved"), finding("r1-2", transition="human"))
    assert finding_id_problems(iter(["r1-1", "r1-2"]), carried, 2) == []


def test_a_resolved_finding_carried_again_rounds_later_is_not_invented() -> None:
    report = FindingsReport.model_validate(
        {
            "findings": [
                {"id": "r1-1", "kind": "defect", "blocking": False, "transition": "resolved"}
            ]
        }
    )
    assert finding_id_problems([], report, 3, earlier_known=["r1-1"]) == []
    assert finding_id_problems([], report, 3) != []  # unknown and not of round 3: invented
