"""Where a review that did not converge sends the card, by the kinds of its findings. Pure.

Seed 004: a finding carries a kind (defect, regression, approved-test-failing, contract-gap,
question), and each kind has its own way on. `route_findings(RoutingFacts) -> Routing` decides
from the last review's active findings, in this order (the first that applies wins):

    a finding handed to a human (transition `human`)      escalate: the review's escalate; a
                                                          person decides, then `/pair retry`
    a blocking `question`                                  needs-input: `/pair answer`
        (after the human's word, either one: `verify`, a delta re-review that reads it)
    a blocking `contract-gap` whose AC the plan has        red-spec: `red` revises only the seal
                                                          group that covers the AC (row ids kept,
                                                          a successor seal), or writes a new group
    a blocking `contract-gap` naming no AC of the plan     re-plan: `propose` again
    only `approved-test-failing` findings block            green-fix: `fix` on the same seal, once;
                                                          a second time on that seal: failed-fix
    anything else (`defect`, `regression`, a mix)          red, then fix, as ever

A history-rewrite finding never gets here: the card waits for a human before any routing
(`app.domain.review.verdict.history_rewrite_ids`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

Route = Literal["red", "green-fix", "red-spec", "re-plan", "needs-input", "escalate", "verify"]
ROUTES: Final[tuple[Route, ...]] = (
    "red",
    "green-fix",
    "red-spec",
    "re-plan",
    "needs-input",
    "escalate",
    "verify",
)
# How many green-fix rounds one seal allows before the card is failed-fix (the seed: "once").
GREEN_FIXES_PER_SEAL: Final = 1
_AC: Final = re.compile(r"\bAC-\d+\b")


@dataclass(frozen=True)
class RoutingFacts:
    """What the route is decided from.

    `findings` are the last accepted review's; `plan_acs` the acceptance criteria the plan
    names; `groups` the seal group (its number) that covers each AC, the newest winning;
    `green_fixes` how many green-fix rounds the current seal already had; `human_word` whether
    a person answered or retried since that review.
    """

    findings: Sequence[Mapping[str, Any]]
    plan_acs: frozenset[str] = frozenset()
    groups: Mapping[str, int] | None = None
    green_fixes: int = 0
    human_word: bool = False


@dataclass(frozen=True)
class Routing:
    """The route, the findings that decided it, and why (for the step's message)."""

    route: Route
    findings: tuple[str, ...]
    reason: str
    group: int | None = None  # red-spec: the seal group it revises (None: a new group)
    failed_fix: bool = False  # green-fix asked for a second time on the same seal


def plan_acs(plan_text: str) -> frozenset[str]:
    """The acceptance criteria a plan names (`AC-1`, `**AC-2**`, …)."""
    return frozenset(_AC.findall(plan_text))


def _active(findings: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [f for f in findings if str(f.get("transition", "open")) in ("open", "human")]


def _ids(findings: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(str(f.get("id")) for f in findings)


def route_findings(facts: RoutingFacts) -> Routing:
    """The way on for a review that did not converge (see the module table)."""
    active = _active(facts.findings)
    handed = [f for f in active if f.get("transition") == "human"]
    blocking = [f for f in active if f.get("blocking") is True]
    questions = [f for f in blocking if f.get("kind") == "question"]
    for waiting, route in ((handed, "escalate"), (questions, "needs-input")):
        if not waiting:
            continue
        if facts.human_word:
            why = "a person answered; the review reads the answer"
            return Routing("verify", _ids(waiting), why)
        what = "handed to a person" if route == "escalate" else "asks a question"
        summary = "; ".join(str(f.get("summary") or f.get("id")) for f in waiting)
        return Routing(route, _ids(waiting), f"the review {what}: {summary}")  # type: ignore[arg-type]
    gaps = [f for f in blocking if f.get("kind") == "contract-gap"]
    if gaps:
        return _contract_gap(facts, gaps)
    approved = [f for f in blocking if f.get("kind") == "approved-test-failing"]
    if approved and len(approved) == len(blocking):
        if facts.green_fixes >= GREEN_FIXES_PER_SEAL:
            why = "an approved test fails again after its green-fix on the same seal"
            return Routing("green-fix", _ids(approved), why, failed_fix=True)
        why = "an approved test fails: green-fix on the same seal"
        return Routing("green-fix", _ids(approved), why)
    return Routing("red", _ids(blocking), "blocking findings: red writes failing tests for them")


def _contract_gap(facts: RoutingFacts, gaps: Sequence[Mapping[str, Any]]) -> Routing:
    """A re-plan when a gap names no AC of the plan (the plan itself is wrong), else a red-spec
    revision of the group covering the first gap's AC (or a new group when none covers it)."""
    off_plan = [f for f in gaps if str(f.get("ac") or "") not in facts.plan_acs]
    if off_plan:
        which = ", ".join(str(f.get("ac") or "no AC") for f in off_plan)
        why = f"a contract gap the plan does not cover ({which}): the plan is proposed again"
        return Routing("re-plan", _ids(off_plan), why)
    groups = facts.groups or {}
    ac = str(gaps[0].get("ac"))
    group = groups.get(ac)
    if group is None:
        why = f"a contract gap on {ac}, which no seal covers: red writes a new group"
    else:
        why = f"a contract gap on {ac}: red revises only seal group g{group}"
    return Routing("red-spec", _ids(gaps), why, group=group)
