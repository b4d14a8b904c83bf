"""End to end on the `local` host: a blocking review's findings routed by kind.

An approved test that fails goes to a green-fix on the same seal (once; a second time is
failed-fix), a contract gap to a red-spec revision of only its group (row ids kept, a successor
seal) or to a re-plan, a question to needs-input, a finding handed to a person to the review's
escalate with the run's one escalation comment. The scripted agent reports findings files the
tests write (`file:<name>`); everything else is the real cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.card_project import CardProject


def findings_file(project: CardProject, name: str, *findings: dict[str, Any], **extra: Any) -> None:
    data = {"acTests": {"AC-1": "checks::r1-1"}, "findings": list(findings), **extra}
    (project.scratch / f"{name}.json").write_text(json.dumps(data))


def finding(ident: str = "r1-1", kind: str = "defect", **fields: Any) -> dict[str, Any]:
    base = {"id": ident, "kind": kind, "severity": "critical", "blocking": True, "ac": "AC-1"}
    return {**base, "summary": f"{kind} {ident}", **fields}


BLOCKS = {"verdict": "1 critical issue(s) found"}


def transitions(steps: list[Any]) -> list[str]:
    return [s.result.transition for s in steps if s.result.transition]


def routes(project: CardProject) -> list[tuple[str, int]]:
    return [(r["route"], r["round"]) for r in project.cycle_events("routed")]


def first_round(project: CardProject, *later: str) -> None:
    """verify 1 blocks on r1-1 (AC-1); red seals group 1; fix; then the reviews `later`."""
    findings_file(project, "first", finding(), **BLOCKS)
    project.script({"verify": ["file:first", *(f"file:{name}" for name in later)]})


def test_an_approved_test_failing_goes_to_a_green_fix_on_the_same_seal(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    first_round(project, "approved")
    approved = finding("r2-1", "approved-test-failing", summary="checks::r1-1 fails again")
    findings_file(project, "approved", finding(transition="resolved"), approved, **BLOCKS)
    project.command("implement")
    steps = project.until_quiet()
    assert transitions(steps)[-7:] == [
        "red",
        "verify-red",
        "fix",
        "verify",
        "fix",
        "verify",
        "publish",
    ]
    assert steps[-1].status == "ready-for-merge"
    assert routes(project) == [("red", 1), ("green-fix", 2)]
    green = project.cycle_events("routed")[1]
    assert (green["seal"], green["findings"]) == ("r1-g1", ["r2-1"])
    assert len(project.cycle_events("sealed")) == 1  # no new red: the same seal
    fix_calls = [c for c in agent_calls(project) if c["transition"] == "fix"]
    assert "Green-fix: an approved test fails" in fix_calls[-1]["instructions"]


def test_a_second_failure_on_the_same_seal_is_failed_fix(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    first_round(project, "approved", "approved")
    approved = finding("r2-1", "approved-test-failing")
    findings_file(project, "approved", finding(transition="resolved"), approved, **BLOCKS)
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "failed-fix"
    assert "fails again after its green-fix on the same seal" in (steps[-1].result.message or "")
    assert routes(project) == [("red", 1), ("green-fix", 2)]  # the third review routed nowhere
    assert project.labels(project.card) == ["pr-state:failed-fix"]
    assert project.step().status == "failed-fix"  # derived again, the same


def test_a_contract_gap_revises_its_group_keeping_row_ids_in_a_successor_seal(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    first_round(project, "gap")
    gap = finding("r2-1", "contract-gap", reproducer="needs gap-closed")
    findings_file(project, "gap", finding(transition="resolved"), gap, **BLOCKS)
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "ready-for-merge"
    assert routes(project) == [("red", 1), ("red-spec", 2)]
    first, revised = project.cycle_events("sealed")
    assert (first["seal"], first["rows"], first["acs"]) == ("r1-g1", ["r1-1"], {"r1-1": "AC-1"})
    assert revised["seal"] == "r2-g1-rev1"
    assert revised["supersedes"] == "r1-g1"
    assert (revised["group"], revised["revision"]) == (1, 1)
    assert revised["rows"] == ["r1-1", "r2-1"]  # the group's row id kept, the gap's added
    assert revised["ids"] == ["checks::r2-1"]  # only the changed row newly fails
    assert set(revised["paths"]) == {"checks/r1-1.check", "checks/r2-1.check"}
    assert revised["fixScope"] == first["fixScope"] == [f"card-{project.card}.txt"]
    red_calls = [c for c in agent_calls(project) if c["transition"] == "red"]
    assert "Revise only seal group g1" in red_calls[-1]["instructions"]


def test_a_gap_the_plan_does_not_cover_is_a_re_plan(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    first_round(project, "offplan")
    gap = finding("r2-1", "contract-gap", ac="AC-7")
    findings_file(project, "offplan", finding(transition="resolved"), gap, **BLOCKS)
    project.command("implement")
    steps = project.until_quiet()
    after = transitions(steps)[transitions(steps).index("fix") + 1 :]
    assert after[:3] == ["verify", "propose", "apply"]
    assert routes(project) == [("red", 1), ("re-plan", 2)]
    propose_calls = [c for c in agent_calls(project) if c["transition"] == "propose"]
    assert "Routed by the review's findings (re-plan)" in propose_calls[-1]["instructions"]
    assert "AC-7" in propose_calls[-1]["instructions"]
    # The re-plan keeps the seal: the new plan's apply may not break a sealed test (the
    # scripted apply rewrites the file the sealed check reads, and is sent back for it).
    sent_back = [s for s in steps if s.result.state == "sent-back"]
    assert sent_back and "checks::r1-1" in (sent_back[0].result.message or "")


def test_a_question_waits_for_an_answer_that_the_next_review_reads(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    question = finding(kind="question", severity=None, summary="which database should it use?")
    findings_file(project, "question", question, **BLOCKS)
    project.script({"verify": ["file:question"]})
    project.command("implement")
    steps = project.until_quiet()
    assert transitions(steps) == ["propose", "apply", "verify"][-len(transitions(steps)) :]
    assert steps[-1].status == "needs-input"
    assert "which database should it use?" in (steps[-1].result.message or "")
    assert project.labels(project.card) == ["pr-state:needs-input"]
    # What the card shows next is the review the answer re-runs, never the finding's red.
    assert steps[-1].explanation is not None and steps[-1].explanation.next == "verify"
    assert "**Next step:** verify" in _tracking(project)
    answered = project.command("answer use sqlite")
    assert answered.result.transition == "verify"
    review = [c for c in agent_calls(project) if c["transition"] == "verify"][-1]
    assert "use sqlite" in review["instructions"]
    assert "a person answered" in review["instructions"]
    rest = project.until_quiet()
    assert rest[-1].status == "ready-for-merge"
    assert project.cycle_events("sealed") == []  # no red: a question is no defect


def test_a_finding_handed_to_a_person_is_the_reviews_escalate(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    handed = finding(transition="human", summary="needs a product decision")
    findings_file(project, "handed", handed, **BLOCKS)
    project.script({"verify": ["file:handed"]})
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "escalate"
    assert project.labels(project.card) == ["pr-state:escalate"]
    escalations = [
        c["body"] for c in project.comments(project.card) if "pair:escalation" in c["body"]
    ]
    assert len(escalations) == 1
    assert "needs a product decision" in escalations[0]
    assert "`r1-1`" in escalations[0]
    explanation = steps[-1].explanation
    assert explanation is not None and "review handed a decision" in explanation.why
    assert explanation.next == "verify"  # the review that reads the person's word, not red
    assert "**Next step:** red" not in _tracking(project)
    assert project.step().status == "escalate"  # nothing runs until a person's word
    retried = project.command("retry")
    assert retried.result.transition == "verify"
    assert project.until_quiet()[-1].status == "ready-for-merge"
    assert project.cycle_events("sealed") == []


def _tracking(project: CardProject) -> str:
    (body,) = [c["body"] for c in project.comments(project.card) if "pair:tracking" in c["body"]]
    return str(body)


def agent_calls(project: CardProject) -> list[dict[str, Any]]:
    log = project.scratch / "agent-log.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def test_a_history_rewrite_is_escalated_through_the_runs_one_escalation_comment(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    rewrite = finding(humanDecisionKind="history-rewrite", summary="a secret is in commit 1")
    findings_file(project, "rewrite", rewrite, **BLOCKS)
    project.script({"verify": ["file:rewrite"]})
    project.command("implement")
    steps = project.until_quiet()
    # The review's escalate (seed 004), not a gate's awaiting-human; the next step a person's
    # rewrite leads to is a review, never the finding's red.
    assert steps[-1].status == "escalate"
    assert steps[-1].explanation.next == "verify"
    project.step()  # waiting again edits nothing and adds nothing
    escalations = [
        c["body"] for c in project.comments(project.card) if "pair:escalation" in c["body"]
    ]
    assert len(escalations) == 1
    assert "only a rewrite of the branch's Git history fixes it" in escalations[0]
    assert "No command waives it." in escalations[0]
    assert [e["stage"] for e in project.cycle_events("escalated")] == ["history-rewrite"]


def test_a_refine_that_reached_its_plan_is_target_ready(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("refine")
    steps = project.until_quiet()
    assert steps[-1].status == "target-ready"
    assert project.labels(project.card) == ["pr-state:target-ready"]
    explanation = steps[-1].explanation
    assert explanation is not None and "the plan is ready" in explanation.why
    assert "/pair implement" in explanation.what_you_can_do
