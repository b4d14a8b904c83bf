"""The bookkeeper end to end on the `local` host: a finished card's lesson reaches the next
proposal on the same files, and only that one.

Card 1 touches `widget.py`, is sent back once (its apply broke a test) and is merged: its
lesson is written under `.pair/lessons/`. Card 2 names `widget.py` and its propose step's
instructions (as the scripted agent received them) quote that lesson, attributed and fenced;
card 3 is about `gadget.py` and receives none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.domain.reports.lesson import parse_lesson
from tests.support.card_project import MAINTAINER, CardProject

pytestmark = pytest.mark.slow


def drive(project: CardProject, limit: int = 20) -> str:
    """Step the current card until a step runs nothing; its last status."""
    for _ in range(limit):
        step = project.step()
        if step.result.state in ("nothing-ready", "blocked", "awaiting-approval"):
            return step.status
    raise AssertionError(f"card #{project.card} found no quiet state in {limit} steps")


def agent_calls(project: CardProject, change: str, transition: str) -> list[dict[str, Any]]:
    log = project.scratch / "agent-log.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return [c for c in calls if c["change"] == change and c["transition"] == transition]


def lesson_files(root: Path) -> list[Path]:
    return sorted((root / ".pair" / "lessons").glob("card-*.md"))


def test_a_merged_cards_lesson_reaches_the_next_proposal_on_its_files(tmp_path: Path) -> None:
    project = CardProject.create(
        tmp_path, body="AC-1: widget.py accepts an empty input\n", files={"widget.py": "x = 1\n"}
    )
    first = project.card
    project.script({f"card-{first}:apply": ["break-tests", "ok"]})
    project.env_extra["PAIR_TEST_TOUCH"] = "widget.py"
    project.command("implement until: merged merge: never")
    assert drive(project) == "merged"

    [path] = lesson_files(project.root)
    lesson = parse_lesson(path.read_text())
    assert lesson is not None
    assert (lesson.card, lesson.ending) == (first, "merged")
    assert "widget.py" in lesson.files and f"card-{first}.txt" in lesson.files
    journal = project.journal()
    assert lesson.date == journal[-1]["at"][:10]  # the journal's date, not the clock's
    assert lesson.run == next(r["data"]["run"] for r in journal if r.get("data", {}).get("run"))
    assert "## Sent back by the engine" in path.read_text()
    assert "new failing test" in path.read_text()

    second = project.forge.seed_card(
        "Log the widget", "AC-1: widget.py logs what it accepts\n", author=MAINTAINER
    )
    third = project.forge.seed_card("Add the gadget", "AC-1: gadget.py exists\n", author=MAINTAINER)
    project.env_extra["PAIR_TEST_TOUCH"] = ""
    for card in (second, third):
        project.card = card
        project.command("implement")
        drive(project)

    [proposal] = agent_calls(project, f"card-{second}", "propose")
    text = proposal["instructions"]
    heading = f"Lesson from card #{first}, {lesson.date} (merged; its files:"
    assert heading in text
    after = text[text.index(heading) :]
    fence_open = after.index("```text\n")
    quoted = after[fence_open : after.index("\n```", fence_open + 8)]
    assert "new failing test" in quoted  # the reason, inside the fence
    assert "data, not instructions" in text

    [other] = agent_calls(project, f"card-{third}", "propose")
    assert "Lesson from card" not in other["instructions"]
    # Cards 2 and 3 struggled with nothing: they leave no lesson of their own.
    assert len(lesson_files(project.root)) == 1


def test_lessons_off_writes_none_and_an_abandoned_card_after_work_leaves_one(
    tmp_path: Path,
) -> None:
    off = CardProject.create(tmp_path / "off", config={"lessons": {"where": "off"}})
    off.script({"apply": ["break-tests", "ok"]})
    off.command("implement until: merged merge: never")
    assert drive(off) == "merged"
    assert lesson_files(off.root) == []

    on = CardProject.create(tmp_path / "on")
    on.script({"apply": ["break-tests", "ok"]})
    on.command("implement")
    assert drive(on) == "ready-for-merge"
    assert lesson_files(on.root) == []  # not finished yet
    blocker = on.root / ".pair" / "lessons"
    blocker.write_text("a file where the lessons directory goes\n")
    on.command("abandon")  # the lesson cannot be written: the card is abandoned all the same
    assert on.labels(on.card) == ["pr-state:abandoned"]
    blocker.unlink()
    on.step()  # a later step of the abandoned card writes it
    [path] = lesson_files(on.root)
    lesson = parse_lesson(path.read_text())
    assert lesson is not None and lesson.ending == "abandoned"
    assert f"card-{on.card}.txt" in lesson.files
    before = path.stat().st_mtime_ns
    on.step()  # an abandoned card's later step rewrites nothing
    assert path.stat().st_mtime_ns == before
