"""End to end on the `local` host: a card from `/pair implement` to a reviewed, merged PR.

The scripted agent runs through the real process runtime in the card's real worktree; tests
run through a real runner writing JUnit; the forge is the local host's directory. After every
step the harness checks that every pairbot comment exists once and that the card and its PR
carry exactly one, the same, `pr-state:*` label.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hosts.models import Target
from tests.support.card_project import CardProject
from tests.support.git import git


def test_implement_reaches_ready_for_merge_with_the_status_on_the_reviewed_head(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    first = project.command("implement")
    assert first.result.transition == "propose"
    steps = [first, *project.until_quiet()]
    assert [s.result.transition for s in steps if s.result.transition] == [
        "propose",
        "apply",
        "verify",
        "publish",
    ]
    last = steps[-1]
    assert last.status == "ready-for-merge"
    pull = project.pull()
    assert pull is not None and last.pr == pull
    reviewed = project.cycle_events("reviewed")[-1]["head"]
    assert project.forge.head_of(pull) == reviewed
    assert project.statuses(pull)[reviewed]["state"] == "success"
    assert project.labels(project.card) == ["pr-state:ready-for-merge"]
    markers = project.marker_counts()
    assert any("pair:synthesis" in m for m in markers)
    assert any("pair:review" in m for m in markers)
    assert any("pair:tracking" in m for m in markers)
    # The plan and the work are on the card's branch, committed by the engine.
    files = git(project.forge.repo, "ls-tree", "-r", "--name-only", reviewed).splitlines()
    assert f"card-{project.card}.txt" in files
    assert f".pair/changes/card-{project.card}/plan.md" in files
    assert ".pair/junit.xml" not in files
    # A further step changes nothing and writes nothing.
    before = json.dumps(project.journal())
    again = project.step()
    assert again.result.state == "nothing-ready"
    assert again.status == "ready-for-merge"
    assert len(project.journal()) == len(json.loads(before))


def test_prepare_always_parks_after_propose_until_approved(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    step = project.command("implement")
    assert step.result.state == "awaiting-approval"
    assert step.status == "awaiting-approval"
    tracking = next(
        c for c in project.comments(project.card) if "pair:tracking" in c["body"].splitlines()[0]
    )
    assert "AC-1" in tracking["body"]  # the plan is shown for approval
    assert project.step().result.state == "awaiting-approval"  # nothing runs while parked
    resumed = project.command("approve")
    assert resumed.result.transition == "apply"


def test_blocking_finding_goes_red_then_fix_then_converges(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    project.command("implement")
    steps = project.until_quiet()
    transitions = [s.result.transition for s in steps if s.result.transition]
    assert transitions == ["apply", "verify", "red", "verify-red", "fix", "verify", "publish"]
    pull = project.pull()
    assert pull is not None
    statuses = project.statuses(pull)
    heads = [e["head"] for e in project.cycle_events("reviewed")]
    assert statuses[heads[0]]["state"] == "failure"
    assert statuses[heads[-1]]["state"] == "success"
    sealed = project.cycle_events("sealed")
    assert sealed and sealed[0]["ids"] == ["checks::r1-1"]
    assert steps[-1].status == "ready-for-merge"


@pytest.mark.parametrize(
    ("behaviour", "transition", "expected"),
    [
        pytest.param("break-tests", "apply", "new failing test", id="apply-breaks-tests"),
        pytest.param("red-passing", "red", "no test newly fails", id="red-tests-pass"),
        pytest.param("edit-sealed", "fix", "sealed", id="fix-edits-sealed-test"),
    ],
)
def test_a_refused_iteration_is_sent_back_and_nothing_is_pushed(
    tmp_path: Path, behaviour: str, transition: str, expected: str
) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], transition: [behaviour, "ok"]})
    project.command("implement")
    steps = project.until_quiet()
    sent_back = [s for s in steps if s.result.state == "sent-back"]
    assert len(sent_back) == 1
    assert sent_back[0].result.transition == transition
    assert expected in (sent_back[0].result.message or "")
    # The retry succeeds and the card still reaches readiness.
    assert steps[-1].status == "ready-for-merge"
    pull = project.pull()
    assert pull is not None
    tree = git(project.forge.repo, "ls-tree", "-r", "--name-only", project.forge.head_of(pull))
    assert "checks/broken.check" not in tree.splitlines()


def test_until_merged_with_merge_never_merges_the_reviewed_head(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement until: merged merge: never")
    steps = project.until_quiet()
    assert steps[-1].result.transition == "merge" or steps[-1].status == "merged"
    pull = project.pull()
    assert pull is not None
    merged = project.cycle_events("merged")
    reviewed = project.cycle_events("reviewed")[-1]["head"]
    assert merged and merged[-1]["head"] == reviewed
    assert project.labels(project.card) == ["pr-state:merged"]


def test_a_head_moved_before_merge_is_re_reviewed_not_merged(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement until: merged merge: always")
    steps = project.until_quiet()
    assert steps[-1].status == "awaiting-human"
    pull = project.pull()
    assert pull is not None
    moved = project.forge.move_head(pull)
    step = project.command("approve")
    assert step.result.transition == "verify"  # a delta re-review, never a merge
    assert not project.cycle_events("merged")
    assert project.cycle_events("reviewed")[-1]["head"] == moved


@pytest.mark.parametrize(
    ("labels", "parks"),
    [
        pytest.param(("needs-design",), True, id="condition-fires"),
        pytest.param((), False, id="condition-quiet"),
    ],
)
def test_prepare_when_parks_only_when_its_condition_fires(
    tmp_path: Path, labels: tuple[str, ...], parks: bool
) -> None:
    project = CardProject.create(
        tmp_path, cycle={"prepare": "when has:needs-design"}, labels=labels
    )
    step = project.command("implement")
    assert step.result.transition == "propose"
    assert (step.result.state == "awaiting-approval") is parks


def test_merge_when_escalates_on_a_fired_condition_and_merges_otherwise(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, labels=("risky",))
    project.command("implement until: merged merge: when has:risky")
    steps = project.until_quiet()
    assert steps[-1].status == "escalated"
    assert not project.cycle_events("merged")
    approved = project.command("approve")  # a maintainer takes the escalation
    assert approved.result.transition == "merge"
    assert (
        project.cycle_events("merged")[-1]["head"] == project.cycle_events("reviewed")[-1]["head"]
    )


def test_a_changed_card_is_re_reviewed_and_an_unrelated_edit_is_not(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    assert project.until_quiet()[-1].status == "ready-for-merge"
    reviews = len(project.cycle_events("reviewed"))
    # A label is not part of the card hash: nothing is invalidated.
    project.forge.set_labels(Target("card", project.card), ("pr-state:ready-for-merge", "docs"))
    assert project.command("status").status == "ready-for-merge"
    assert project.step().result.transition == ""
    assert len(project.cycle_events("reviewed")) == reviews
    # The body is: the card is reviewed again as a delta, then republished.
    card = project.forge.root / "cards" / f"{project.card}.json"
    data = json.loads(card.read_text())
    data["body"] = "AC-1: it works\nAC-2: it also logs\n"
    card.write_text(json.dumps(data))
    step = project.step()
    assert step.result.transition == "verify"
    calls = [json.loads(x) for x in (project.scratch / "agent-log.jsonl").read_text().splitlines()]
    assert "Delta re-review" in calls[-1]["instructions"]
    assert project.until_quiet()[-1].status == "ready-for-merge"


def test_a_red_whose_record_was_lost_after_its_push_is_redone_and_sealed(tmp_path: Path) -> None:
    """A runner killed after red pushed its failing tests, before the run-state was saved."""
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    project.command("implement")
    while project.step().result.transition != "red":
        pass
    journal = project.root / ".pair" / "batches" / f"card-{project.card}" / "run" / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    started = max(
        i
        for i, line in enumerate(lines)
        if json.loads(line).get("kind") == "step-started"
        and json.loads(line).get("transition") == "red"
    )
    journal.write_text("".join(lines[:started]))  # the run-state push never happened
    redo = project.step()
    assert (redo.result.transition, redo.result.state) == ("red", "advanced")
    assert project.cycle_events("red-contract")[-1]["ids"] == ["checks::r1-1"]
    verified = project.step()  # the red contract verifier accepts: then it is sealed
    assert (verified.result.transition, verified.result.state) == ("verify-red", "advanced")
    assert project.cycle_events("sealed")[-1]["ids"] == ["checks::r1-1"]
    assert project.until_quiet()[-1].status == "ready-for-merge"


def test_a_tick_also_runs_committed_batches_and_skips_waiting_cards(tmp_path: Path) -> None:
    import asyncio

    import yaml

    from app.cycle.driver import tick

    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")  # the card now waits for approval: a tick leaves it alone
    manifest = {"prGrouping": "off", "phases": [{"name": "only", "changes": ["alpha"]}]}
    (project.root / ".pair" / "batches" / "plain").mkdir(parents=True)
    (project.root / ".pair" / "batches" / "plain" / "batch.yaml").write_text(
        yaml.safe_dump(manifest)
    )
    step = asyncio.run(tick(project.env()))
    assert (step.change, step.transition) == ("alpha", "propose")  # type: ignore[union-attr]
