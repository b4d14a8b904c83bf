"""Outside evidence: which checks on a head block, wait, or are only mentioned."""

from __future__ import annotations

from typing import Any

from app.domain.review import evidence as ev
from app.domain.review.review_comment import render_review
from app.domain.review.verdict import FindingsReport
from hosts.models import HeadCheck

HEAD = "a" * 40


def check(name: str, state: Any, *, required: bool = False, summary: str = "") -> HeadCheck:
    return HeadCheck(name=name, source="check-run", state=state, required=required, summary=summary)


def test_the_project_list_marks_checks_required_beside_the_host() -> None:
    evidence = ev.of_head(
        HEAD,
        [
            check("lint", "failure"),
            check("build", "failure", required=True),
            check("docs", "pending"),
            check("e2e", "pending"),
            check("unit", "success"),
        ],
        required=["e2e", "unit"],
    )
    assert [c.name for c in evidence.checks] == ["build", "docs", "e2e", "lint", "unit"]
    assert [c.name for c in evidence.failing] == ["build", "lint"]
    assert [c.name for c in evidence.blocking] == ["build"]
    assert [c.name for c in evidence.waiting] == ["e2e"]
    assert ev.waiting_reason(evidence).startswith("waiting for required check(s) e2e on aaaa")
    assert ev.blocking_line(evidence) == "required check(s) failing on aaaaaaaaaaaa: build"


def test_a_summary_is_capped() -> None:
    evidence = ev.of_head(HEAD, [check("build", "failure", summary="x" * 5000)])
    assert len(evidence.checks[0].summary) == ev.SUMMARY_MAX


def test_the_record_round_trips_and_reads_a_malformed_one_closed() -> None:
    evidence = ev.of_head(HEAD, [check("build", "failure", required=True), check("ok", "success")])
    assert ev.from_record(ev.to_record(evidence)) == evidence
    odd = ev.from_record(
        {
            "head": HEAD,
            "checks": [
                {"name": "weird", "state": "purple", "source": "pigeon", "required": "yes"},
                {"state": "failure"},
                "not a check",
            ],
        }
    )
    assert odd.checks == (HeadCheck("weird", "status", "failure", "", False, ""),)
    assert ev.from_record({}).head == ""


def test_the_review_comment_shows_checks_and_a_failing_required_one_holds_it() -> None:
    external = [
        check("build", "failure", required=True, summary="2 tests failed"),
        check("docs", "pending"),
        check("unit", "success"),
    ]
    body = render_review(
        FindingsReport(), head=HEAD, review_round=1, converged=True, external=external
    )
    assert "**Verdict:** 1 blocking finding" in body
    assert "#### Outside evidence — checks on the reviewed head" in body
    assert "| build | check-run | failure | yes | 2 tests failed |" in body
    assert "| docs | check-run | pending | no |" in body
    assert "1 other check passed or did not apply." in body
    assert "A failing required check blocks convergence" in body


def test_the_review_comment_without_checks_has_no_evidence_section() -> None:
    body = render_review(FindingsReport(), head=HEAD, review_round=1, converged=True)
    assert "Outside evidence" not in body
    green = render_review(
        FindingsReport(),
        head=HEAD,
        review_round=1,
        converged=True,
        external=[check("unit", "success")],
    )
    assert "converged — nothing blocks" in green
    assert "1 other check passed" in green and "| Check |" not in green
    assert "blocks convergence" not in green
