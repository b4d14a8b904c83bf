"""The bookkeeper's shell on a real git repository: writing, reading and choosing lessons."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from app.cycle.lesson_files import (
    changed_files,
    commit_lesson,
    cycle_records,
    lessons_for_proposal,
    read_lessons,
    record_lesson,
)
from app.domain.reports.lesson import Lesson, render_lesson
from app.engine.instructions import InstructionContext, build_instructions
from app.engine.manifest import LessonsConfig
from tests.support.git import git, init_repo

ON = LessonsConfig()
OFF = LessonsConfig(where="off")
SENT_BACK: list[dict[str, Any]] = [
    {"kind": "cycle", "key": "card-1", "data": {"event": "bound", "run": "old"}},
    {"kind": "outcome", "key": "card-1", "state": "sent-back", "message": "earlier cycle"},
    {"kind": "cycle", "key": "card-1", "data": {"event": "bound", "run": "run2"}},
    {"kind": "outcome", "key": "card-2", "state": "sent-back", "message": "another card"},
    {
        "kind": "outcome",
        "key": "card-1",
        "at": "2026-11-02T10:00:00+00:00",
        "transition": "apply",
        "state": "sent-back",
        "message": "broke ```a test```",
    },
]


def write(root: Path, name: str, text: str) -> None:
    path = root / ".pair" / "lessons" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cycle_records_start_at_the_runs_bound_entry() -> None:
    mine = cycle_records(SENT_BACK, "card-1", "run2")
    assert [r.get("message") for r in mine] == [None, "broke ```a test```"]
    assert len(cycle_records(SENT_BACK, "card-1", "unknown-run")) == 4


def test_record_lesson_writes_once_and_only_when_it_should(tmp_path: Path) -> None:
    args: dict[str, Any] = {"card": 1, "key": "card-1", "ending": "merged", "files": ["a.py"]}
    assert record_lesson(tmp_path, OFF, SENT_BACK, run="run2", **args) is None
    assert record_lesson(tmp_path, ON, SENT_BACK, run=None, **args) is None
    assert record_lesson(tmp_path, ON, SENT_BACK, run="../escape", **args) is None
    assert record_lesson(tmp_path, ON, SENT_BACK[:3], run="run2", **args) is None  # no struggle
    assert not (tmp_path / ".pair" / "lessons").exists()
    path = record_lesson(tmp_path, ON, SENT_BACK, run="run2", **args)
    assert path == tmp_path / ".pair" / "lessons" / "card-1-run2.md"
    text = path.read_text()
    assert "earlier cycle" not in text and "another card" not in text
    assert "date: '2026-11-02'" in text
    stamp = path.stat().st_mtime_ns
    assert record_lesson(tmp_path, ON, SENT_BACK, run="run2", **args) == path
    assert path.stat().st_mtime_ns == stamp


def test_read_lessons_skips_what_is_not_one(tmp_path: Path) -> None:
    assert read_lessons(tmp_path) == []
    good = Lesson(card=2, run="r", ending="abandoned", date="2026-01-01", files=("a.py",), body="b")
    write(tmp_path, "card-2-r.md", render_lesson(good))
    write(tmp_path, "card-3-r.md", "not a lesson")
    write(tmp_path, "card-4-r.md", "x" * 300_000)
    write(tmp_path, "notes.md", render_lesson(good))  # not named like a lesson
    (tmp_path / ".pair" / "lessons" / "card-5-dir.md").mkdir()
    assert [lesson.card for lesson in read_lessons(tmp_path)] == [2]


def test_a_proposal_gets_lessons_for_its_text_plan_and_changed_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init_repo(repo, {"README.md": "# x\n"})
    for card, name in ((1, "named.py"), (2, "planned.py"), (3, "changed.py"), (4, "other.py")):
        lesson = Lesson(
            card=card, run="r", ending="merged", date="2026-01-01", files=(name,), body=f"L{card}"
        )
        write(repo, f"card-{card}-r.md", render_lesson(lesson))
    plan = repo / ".pair" / "changes" / "card-9" / "plan.md"
    plan.parent.mkdir(parents=True)
    plan.write_text("Tasks: edit planned.py\n")
    git(repo, "checkout", "-q", "-b", "pair/card-9")
    (repo / "changed.py").write_text("x\n")
    git(repo, "add", "changed.py")
    git(repo, "commit", "-q", "-m", "work")
    found = lessons_for_proposal(
        repo, ON, card_text="Fix named.py", tree=repo, key="card-9", base="main"
    )
    assert sorted(lesson.card for lesson in found) == [1, 2, 3]
    assert (
        lessons_for_proposal(repo, OFF, card_text="named.py", tree=repo, key="k", base="main") == ()
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        lessons_for_proposal(empty, ON, card_text="named.py", tree=empty, key="k", base="main")
        == ()
    )


def test_changed_files_prefers_the_fetched_base_and_survives_a_missing_ref(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init_repo(repo, {"README.md": "# x\n"})
    (repo / "merged.py").write_text("x\n")
    git(repo, "add", "merged.py")
    git(repo, "commit", "-q", "-m", "another card, merged on the remote")
    git(repo, "update-ref", "refs/pairbot/bases/main", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # the local main lags behind
    git(repo, "checkout", "-q", "-b", "card", "refs/pairbot/bases/main")
    (repo / ".pair").mkdir()
    (repo / ".pair" / "plan.md").write_text("p\n")
    (repo / "mine.py").write_text("y\n")
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "this card")
    assert changed_files(repo, "main", "HEAD") == ["mine.py"]
    assert changed_files(repo, "no-such-branch", "HEAD") == []


def test_instructions_quote_each_lesson_in_a_fence_it_cannot_close() -> None:
    lesson = Lesson(
        card=3,
        run="r",
        ending="merged",
        date="2026-11-02",
        files=("a.py",),
        body="# Lesson\n\n- broke ```` a test\n- <!-- hidden --> shown\n",
    )

    def delegate(agent: str, command: str, key: str, arguments: list[str]) -> str:
        return "\n".join([f"/{command} {key}", *arguments])

    ctx = InstructionContext(
        transition="propose", key="card-4", batch="card-4", phase=None, lessons=(lesson,)
    )
    text = build_instructions(ctx, delegate)
    assert "Lesson from card #3, 2026-11-02 (merged; its files: a.py):" in text
    assert "`````text\n" in text  # longer than the four backticks inside
    assert "hidden" not in text


def test_a_proposal_reads_the_run_states_lessons_and_the_checkouts_committed_ones(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    both = Lesson(card=1, run="r", ending="merged", date="2026-01-01", files=("a.py",), body="S")
    write(state, both.name, render_lesson(both))
    # The same file name committed in the checkout: one lesson, not two.
    write(tree, both.name, render_lesson(dataclasses.replace(both, body="T")))
    merged = Lesson(card=2, run="r", ending="merged", date="2026-01-02", files=("a.py",), body="M")
    write(tree, merged.name, render_lesson(merged))
    found = lessons_for_proposal(
        state, ON, card_text="Fix a.py", tree=tree, key="card-9", base="main"
    )
    assert sorted((lesson.card, lesson.body) for lesson in found) == [(1, "S"), (2, "M")]


def test_commit_lesson_commits_the_file_once_on_its_own_branch(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init_repo(repo, {"README.md": "# x\n", ".pair/.gitignore": "lessons/\n"})
    lesson = Lesson(card=3, run="r1", ending="merged", date="2026-01-01", files=("a.py",))
    branch = commit_lesson(repo, lesson, "main", remote="origin")
    assert branch == "pair/lessons/card-3-r1"
    shown = git(repo, "show", f"{branch}:.pair/lessons/card-3-r1.md")  # despite .gitignore
    assert shown == render_lesson(lesson).strip()
    listed = git(repo, "diff", "--name-only", f"main...{branch}")
    assert listed.split() == [".pair/lessons/card-3-r1.md"]
    tip = git(repo, "rev-parse", branch)
    assert commit_lesson(repo, lesson, "main", remote="origin") == branch
    assert git(repo, "rev-parse", branch) == tip  # an earlier attempt's commit is kept
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # the checkout is left alone
