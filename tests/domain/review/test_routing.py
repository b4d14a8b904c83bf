"""Findings routed by kind (`app.domain.review.routing`): one route per review, in the order
the module documents, from the findings alone."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.review.routing import ROUTES, RoutingFacts, plan_acs, route_findings


def f(ident: str, kind: str = "defect", **fields: Any) -> dict[str, Any]:
    return {"id": ident, "kind": kind, "blocking": True, "transition": "open", **fields}


PLAN = frozenset({"AC-1", "AC-2"})


@pytest.mark.parametrize(
    ("findings", "route"),
    [
        pytest.param([f("r1-1")], "red", id="defect"),
        pytest.param([f("r1-1", "regression")], "red", id="regression"),
        pytest.param([f("r1-1", "approved-test-failing")], "green-fix", id="approved-failing"),
        pytest.param(
            [f("r1-1", "approved-test-failing"), f("r1-2")], "red", id="approved-and-defect"
        ),
        pytest.param([f("r1-1", "contract-gap", ac="AC-1")], "red-spec", id="gap-in-plan"),
        pytest.param([f("r1-1", "contract-gap", ac="AC-9")], "re-plan", id="gap-off-plan"),
        pytest.param([f("r1-1", "contract-gap")], "re-plan", id="gap-without-ac"),
        pytest.param([f("r1-1", "question"), f("r1-2")], "needs-input", id="question"),
        pytest.param(
            [f("r1-1", "question"), f("r1-2", transition="human")], "escalate", id="human"
        ),
    ],
)
def test_each_kind_has_its_route(findings: list[dict[str, Any]], route: str) -> None:
    routing = route_findings(RoutingFacts(findings=findings, plan_acs=PLAN))
    assert routing.route == route
    assert routing.route in ROUTES
    assert not routing.failed_fix


def test_resolved_and_non_blocking_findings_route_nothing() -> None:
    findings = [
        f("r1-1", "question", blocking=False),
        f("r1-2", "contract-gap", transition="resolved"),
        f("r1-3", "approved-test-failing"),
    ]
    routing = route_findings(RoutingFacts(findings=findings, plan_acs=PLAN))
    assert (routing.route, routing.findings) == ("green-fix", ("r1-3",))


def test_a_second_green_fix_on_the_same_seal_is_failed_fix() -> None:
    findings = [f("r3-1", "approved-test-failing")]
    once = route_findings(RoutingFacts(findings=findings, green_fixes=0))
    twice = route_findings(RoutingFacts(findings=findings, green_fixes=1))
    assert (once.route, once.failed_fix) == ("green-fix", False)
    assert (twice.route, twice.failed_fix) == ("green-fix", True)
    assert "again" in twice.reason


def test_a_gap_revises_the_group_that_covers_its_ac() -> None:
    findings = [f("r2-1", "contract-gap", ac="AC-2")]
    covered = route_findings(RoutingFacts(findings, plan_acs=PLAN, groups={"AC-2": 3}))
    assert (covered.route, covered.group) == ("red-spec", 3)
    assert "g3" in covered.reason
    uncovered = route_findings(RoutingFacts(findings, plan_acs=PLAN, groups={"AC-1": 1}))
    assert (uncovered.route, uncovered.group) == ("red-spec", None)
    assert "new group" in uncovered.reason


@pytest.mark.parametrize("kind", ["question", "escalate"])
def test_after_a_persons_word_the_review_reads_it(kind: str) -> None:
    finding = f("r1-1", "question") if kind == "question" else f("r1-1", transition="human")
    routing = route_findings(RoutingFacts([finding], human_word=True))
    assert (routing.route, routing.findings) == ("verify", ("r1-1",))


def test_the_plans_acceptance_criteria_are_read_in_every_written_form() -> None:
    text = "AC-1: it works\n- **AC-2**: it is fast\n- [ ] **AC-03: Title.** more\nNAC-4 no\n"
    assert plan_acs(text) == frozenset({"AC-1", "AC-2", "AC-03"})
