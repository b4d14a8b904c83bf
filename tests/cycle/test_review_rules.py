"""End to end on the `local` host: the review's verdict rules as a card lives them.

A severity downgrade without evidence fails the review closed; a history-rewrite finding
sends the card to a human and nothing waives it; a remediation that breaks an approved
obligation is rewound, repaired and discharged; required findings are re-proved on the same
head and refused on another. The scripted agent reports findings files the tests write
(`file:<name>`), with the real heads of the run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cycle.driver import handle_scope_decision
from app.errors import UserError
from tests.support.card_project import CardProject
from tests.support.git import git


def findings_file(project: CardProject, name: str, *findings: dict[str, Any], **extra: Any) -> None:
    data = {"acTests": {"AC-1": "checks::r1-1"}, "findings": list(findings), **extra}
    (project.scratch / f"{name}.json").write_text(json.dumps(data))


def finding(ident: str = "r1-1", **fields: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "kind": "defect",
        "severity": "critical",
        "blocking": True,
        "summary": "off by one",
        **fields,
    }


def steps_until(project: CardProject, transition: str, limit: int = 10) -> None:
    """Step until a step of `transition` was taken (accepted or not)."""
    for _ in range(limit):
        step = project.step()
        project.assert_invariants()
        if step.result.transition == transition:
            return
    raise AssertionError(f"no {transition} step within {limit} steps")


def test_a_severity_downgrade_without_evidence_fails_the_review_closed(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    findings_file(project, "downgrade", finding(severity="minor", blocking=False))
    project.script({"verify": ["findings-blocking", "file:downgrade"]})
    project.command("implement")
    steps = project.until_quiet()
    assert [s.result.transition for s in steps if s.result.transition][:5] == [
        "apply",
        "verify",
        "red",
        "verify-red",
        "fix",
    ]
    last = steps[-1]
    assert last.status == "failed-verify"
    message = last.result.message or ""
    assert "r1-1 changed severity from critical to minor without severityEvidence" in message
    # Nothing was recorded as reviewed for the refused review: the last review still blocks.
    assert len(project.cycle_events("reviewed")) == 1


def test_a_history_rewrite_finding_escalates_and_nothing_waives_it(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    findings_file(
        project,
        "rewrite",
        finding(humanDecisionKind="history-rewrite", summary="a secret is in commit 1"),
        verdict="1 critical issue(s) found",
    )
    project.script({"verify": ["file:rewrite"]})
    project.command("implement")
    steps = project.until_quiet()
    transitions = [s.result.transition for s in steps if s.result.transition]
    assert transitions == ["apply", "verify"]  # no red, no seal, no fix
    # Seed 004's review status `escalate` (it used to be `awaiting-human`, a gate's word),
    # and the next step is the review a person's rewrite leads to, never the finding's red.
    assert steps[-1].status == "escalate"
    assert steps[-1].explanation.next == "verify"
    assert "rewriting the branch's Git history" in (steps[-1].result.message or "")
    assert "rewriting the branch's Git history" in steps[-1].explanation.why
    assert project.labels(project.card) == ["pr-state:escalate"]
    assert project.cycle_events("sealed") == []
    # No command waives it.
    for verb in ("approve", "feedback drop it", "answer it is fine"):
        with pytest.raises(UserError, match="cannot waive"):
            project.command(verb)
    # A scope decision (or any event) wakes the card, and nothing runs.
    pull = project.pull()
    assert pull is not None
    woken = asyncio.run(handle_scope_decision(project.env(), pull))
    assert woken.status == "escalate"  # type: ignore[union-attr]
    # `/pair retry` on the same head reviews nothing: the history was not rewritten.
    same = project.command("retry")
    assert same.status == "escalate" and same.result.transition == ""
    assert len(project.cycle_events("reviewed")) == 1
    # The human rewrites the history (a new head) and retries: a new review of the new head,
    # which finds the finding gone, and the card goes on.
    project.forge.move_head(pull)
    waiting = project.step()  # a new head alone is not the human's word: still waiting
    assert waiting.status == "escalate"
    assert "the branch has a new head" in (waiting.result.message or "")
    project.script({"verify": ["ok"]})
    rerun = project.command("retry")
    assert rerun.result.transition == "verify"
    rest = project.until_quiet()
    assert rest[-1].status == "ready-for-merge"
    reviewed = [e["head"] for e in project.cycle_events("reviewed")]
    assert len(reviewed) == 2 and reviewed[0] != reviewed[1]


def write_config(project: CardProject, **review: Any) -> None:
    path = project.root / ".pair" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["review"] = review
    path.write_text(yaml.safe_dump(config))


def required(head: str, card: int) -> dict[str, Any]:
    return {
        "id": "rf-1",
        "card": card,
        "observedHead": head,
        "kind": "defect",
        "severity": "major",
        "summary": "logout leaves the session alive",
        "oracle": "GET /me after logout answers 401",
        "probe": "curl -b jar /logout && curl -b jar /me",
        "observed": "200 OK",
    }


def test_required_findings_are_re_proved_on_the_same_head_and_refused_on_another(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["file:proof"]})
    project.command("implement")
    steps_until(project, "apply")
    head = project.cycle_events("pushed")[-1]["sha"]
    write_config(project, requiredFindings=[required(head, project.card)])
    findings_file(
        project,
        "proof",
        requiredProofs=[{"id": "rf-1", "head": head, "reproduced": False, "observed": "401"}],
    )
    steps = project.until_quiet()
    assert steps[0].result.transition == "verify"
    assert steps[-1].status == "ready-for-merge"
    instructions = [
        json.loads(line)["instructions"]
        for line in (project.scratch / "agent-log.jsonl").read_text().splitlines()
        if json.loads(line)["transition"] == "verify"
    ]
    assert "rf-1: observed at " + head in instructions[-1]
    assert "Severity floor: major" in instructions[-1]


def test_required_findings_observed_at_another_head_fail_the_review(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    other = "0123456789abcdef0123456789abcdef01234567"
    write_config(project, requiredFindings=[required(other, project.card)])
    findings_file(
        project,
        "proof",
        requiredProofs=[{"id": "rf-1", "head": other, "reproduced": True, "observed": "200"}],
    )
    project.script({"verify": ["file:proof"]})
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "failed-verify"
    assert "required finding rf-1 was observed at 0123456789ab" in (steps[-1].result.message or "")


def test_a_remediation_that_breaks_an_obligation_is_rewound_repaired_and_discharged(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "file:regress", "file:discharge"]})
    project.command("implement")
    steps_until(project, "fix")  # apply, verify (r1-1 blocks), red, fix-1
    passing = project.cycle_events("reviewed")[0]["head"]
    failing = project.cycle_events("remediation")[0]["head"]
    target = f"card-{project.card}.txt"
    claim = {
        "obligation": "AC-1",
        "reproducer": "checks/r2-1.check",
        "passingHead": passing,
        "failingHead": failing,
        "introducedBy": "fix-1",
        "closureAssertions": [f"{target} contains repaired r2-1"],
        "boundaries": [target],
    }
    resolved = finding(transition="resolved")
    regression = finding("r2-1", kind="regression", summary="fix-1 broke AC-1")
    findings_file(
        project,
        "regress",
        resolved,
        {**regression, "regressionRisk": claim},
        verdict="1 critical issue(s) found",
    )
    step = project.step()  # the review proves fix-1 introduced r2-1: rewound
    told = [
        json.loads(line)["instructions"]
        for line in (project.scratch / "agent-log.jsonl").read_text().splitlines()
    ][-1]
    assert f"fix-1 produced {failing}" in told and passing in told
    assert step.result.transition == "verify" and step.status == "in-progress"
    (opened,) = project.cycle_events("risk")
    assert (opened["action"], opened["risk"], opened["batchFindings"]) == (
        "opened",
        f"card-{project.card}:r2-1:fix-1",
        ["r1-1"],
    )
    # The same path: red, its contract verified, fix, delta review.
    assert project.step().result.transition == "red"
    assert project.step().result.transition == "verify-red"
    assert project.step().result.transition == "fix"
    repaired = project.cycle_events("remediation")[1]["head"]
    assert [e["action"] for e in project.cycle_events("risk")] == ["opened", "repaired"]
    # Nothing in Git moved back: the failing head is an ancestor of the repaired one.
    git(project.forge.repo, "merge-base", "--is-ancestor", failing, repaired)
    closure = {
        "head": repaired,
        "assertions": claim["closureAssertions"],
        "obligationPassing": True,
        "boundaries": [target],
    }
    findings_file(
        project,
        "discharge",
        resolved,
        {**regression, "regressionRisk": claim, "transition": "resolved", "closure": closure},
    )
    rest = project.until_quiet()
    assert [s.result.transition for s in rest if s.result.transition] == ["verify", "publish"]
    assert rest[-1].status == "ready-for-merge"
    assert [e["action"] for e in project.cycle_events("risk")] == [
        "opened",
        "repaired",
        "discharged",
    ]
    pull = project.pull()
    assert pull is not None
    synthesis = next(c["body"] for c in project.comments(pull) if "pair:synthesis" in c["body"])
    tail = json.loads(synthesis.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert tail["regressionRisks"] == {
        "active": {"activeRegressionRisks": 0},
        "history": {
            "invalidatedRemediations": 1,
            "regressionRepairs": 1,
            "dischargedRegressionRisks": 1,
        },
    }


def test_closing_a_regression_without_its_closure_fails_the_review_closed(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "file:regress", "file:waive"]})
    project.command("implement")
    steps_until(project, "fix")
    claim = {
        "obligation": "AC-1",
        "reproducer": "checks/r2-1.check",
        "passingHead": project.cycle_events("reviewed")[0]["head"],
        "failingHead": project.cycle_events("remediation")[0]["head"],
        "introducedBy": "fix-1",
        "closureAssertions": ["repaired"],
        "boundaries": ["card"],
    }
    resolved = finding(transition="resolved")
    regression = finding("r2-1", kind="regression", regressionRisk=claim)
    findings_file(project, "regress", resolved, regression, verdict="1 critical issue(s) found")
    findings_file(project, "waive", resolved, {**regression, "transition": "resolved"})
    steps = project.until_quiet()
    assert steps[-1].status == "failed-verify"
    assert "carries the active regression risk" in (steps[-1].result.message or "")
    assert [e["action"] for e in project.cycle_events("risk")] == ["opened", "repaired"]
