"""`lessons: {where: default-branch}` end to end on the `local` host: a finished card's lesson
is proposed to the base branch through a reviewed PR of its own, once, and reaches a later
proposal on the same files only after that PR is merged.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from app.domain.reports.lesson import parse_lesson
from tests.support.card_project import MAINTAINER, CardProject
from tests.support.git import git

pytestmark = pytest.mark.slow

DEFAULT_BRANCH = {"lessons": {"where": "default-branch"}}


def drive(project: CardProject, limit: int = 20) -> str:
    """Step the current card until a step runs nothing; its last status."""
    for _ in range(limit):
        step = project.step()
        if step.result.state in ("nothing-ready", "blocked", "awaiting-approval"):
            return step.status
    raise AssertionError(f"card #{project.card} found no quiet state in {limit} steps")


def lesson_pulls(project: CardProject) -> list[dict[str, Any]]:
    pulls = [json.loads(p.read_text()) for p in (project.forge.root / "pulls").glob("*.json")]
    return [p for p in pulls if p["head_branch"].startswith("pair/lessons/")]


def propose_instructions(project: CardProject, card: int) -> str:
    log = project.scratch / "agent-log.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    [call] = [c for c in calls if c["change"] == f"card-{card}" and c["transition"] == "propose"]
    text: str = call["instructions"]
    return text


def test_a_merged_cards_lesson_is_proposed_once_and_read_after_its_pr_merges(
    tmp_path: Path,
) -> None:
    project = CardProject.create(
        tmp_path,
        body="AC-1: widget.py accepts an empty input\n",
        files={"widget.py": "x = 1\n"},
        config=DEFAULT_BRANCH,
    )
    first = project.card
    project.script({f"card-{first}:apply": ["break-tests", "ok"]})
    project.env_extra["PAIR_TEST_TOUCH"] = "widget.py"
    project.command("implement until: merged merge: never")
    assert drive(project) == "merged"

    [pull] = lesson_pulls(project)
    assert pull["title"] == f"pairbot: lesson from card #{first}"
    assert (pull["base_branch"], pull["state"], pull["draft"]) == ("main", "open", False)
    assert "Review it like any change" in pull["body"]
    [event] = project.cycle_events("lesson-pr")
    assert event["number"] == pull["number"]
    branch = pull["head_branch"]
    name = branch.removeprefix("pair/lessons/") + ".md"
    assert name.startswith(f"card-{first}-")
    forge = project.forge.repo
    changed = git(forge, "diff", "--name-only", f"main...{branch}").split()
    assert changed == [f".pair/lessons/{name}"]  # the lesson and nothing else
    lesson = parse_lesson(git(forge, "show", f"{branch}:.pair/lessons/{name}") + "\n")
    assert lesson is not None and (lesson.card, lesson.ending) == (first, "merged")
    assert "widget.py" in lesson.files
    # Not beside the run-state: unreviewed, it reaches no proposal.
    assert not (project.root / ".pair" / "lessons").exists()

    project.step()  # a re-run of the finished card proposes nothing again
    assert len(lesson_pulls(project)) == 1
    assert len(project.cycle_events("lesson-pr")) == 1

    second = project.forge.seed_card(
        "Log the widget", "AC-1: widget.py logs what it accepts\n", author=MAINTAINER
    )
    project.env_extra["PAIR_TEST_TOUCH"] = ""
    project.card = second
    project.command("implement")
    drive(project)
    assert "Lesson from card" not in propose_instructions(project, second)  # PR not merged yet
    project.command("abandon")  # after work, but it struggled with nothing: no lesson, no PR
    assert project.labels(second) == ["pr-state:abandoned"]
    assert len(lesson_pulls(project)) == 1
    assert project.cycle_events("lesson-pr-failed") == []

    host = project.host
    head = asyncio.run(host.get_pull(pull["number"])).head_sha
    assert asyncio.run(host.merge(pull["number"], head, "merge")).merged
    third = project.forge.seed_card(
        "Test the widget", "AC-1: widget.py has a test\n", author=MAINTAINER
    )
    project.card = third
    project.command("implement")
    drive(project)
    text = propose_instructions(project, third)
    assert f"Lesson from card #{first}, {lesson.date} (merged; its files:" in text
    assert "new failing test" in text
    assert len(lesson_pulls(project)) == 1  # cards 2 and 3 struggled with nothing


def test_a_lesson_pr_that_cannot_be_opened_is_journaled_and_retried_by_a_later_step(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, config=DEFAULT_BRANCH)
    project.script({"apply": ["break-tests", "ok"]})
    project.command("implement")
    assert drive(project) == "ready-for-merge"
    # A file where the lesson's worktree goes: its branch cannot be made.
    blocker = project.root / ".pair" / "worktrees" / f"lesson-card-{project.card}"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("in the way\n")
    project.command("abandon")
    assert project.labels(project.card) == ["pr-state:abandoned"]  # abandoned all the same
    [failed] = project.cycle_events("lesson-pr-failed")
    assert "git worktree add" in failed["reason"] and "already exists" in failed["reason"]
    assert lesson_pulls(project) == []

    blocker.unlink()
    project.step()  # a later step of the abandoned card opens it
    [pull] = lesson_pulls(project)
    assert pull["head_branch"].startswith(f"pair/lessons/card-{project.card}-")
    project.step()
    project.step()
    assert len(lesson_pulls(project)) == 1
    [event] = project.cycle_events("lesson-pr")
    assert event["number"] == pull["number"]
