"""A `when …` gate that fires escalates: `pr-state:escalated` and one escalation comment per run.

End to end on the `local` host: the prepare gate after a plan, the merge gate at the merge.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.card_project import CardProject


def _escalations(project: CardProject) -> list[str]:
    return [
        c["body"]
        for c in project.comments(project.card)
        if c["body"].startswith("<!-- pair:escalation ")
    ]


def test_prepare_when_escalates_with_the_label_and_one_comment(tmp_path: Path) -> None:
    project = CardProject.create(
        tmp_path, cycle={"prepare": "when has:needs-design"}, labels=("needs-design",)
    )
    step = project.command("implement")
    assert (step.result.transition, step.result.state) == ("propose", "awaiting-approval")
    assert step.status == "escalated"
    assert project.labels(project.card) == ["pr-state:escalated"]
    [comment] = _escalations(project)
    assert "`prepare` gate" in comment and "`has:needs-design`" in comment
    assert "`/pair approve`" in comment and "`/pair feedback" in comment
    # Reading the status again keeps it escalated (the park is the plan's approval).
    again = project.command("status")
    assert again.status == "escalated"
    assert len(_escalations(project)) == 1
    # The maintainer approves the plan: the card goes on and the escalation is history.
    approved = project.command("approve")
    assert approved.status != "escalated"
    assert len(_escalations(project)) == 1


def test_prepare_when_that_does_not_fire_posts_no_escalation(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "when has:needs-design"})
    step = project.command("implement")
    assert step.status != "escalated"
    assert _escalations(project) == []


def test_prepare_always_parks_for_approval_without_escalating(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    step = project.command("implement")
    assert step.status == "awaiting-approval"
    assert _escalations(project) == []


def test_merge_when_escalation_is_one_comment_however_often_it_is_read(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, labels=("risky",))
    project.command("implement until: merged merge: when has:risky")
    steps = project.until_quiet()
    assert steps[-1].status == "escalated"
    project.command("status")
    project.command("status")
    [comment] = _escalations(project)
    assert "`merge` gate" in comment and "`has:risky`" in comment
    assert project.cycle_events("escalated")[0]["conditions"] == ["has:risky"]
