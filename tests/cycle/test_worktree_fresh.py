"""A card's worktree is fresh at every step (`app.cycle.worktree.prepare`), whatever the step
before it left there: staged, unstaged and deleted changes, new files, untracked and ignored
files, a merge stopped on a conflict, another branch checked out. Real repositories."""

from __future__ import annotations

from pathlib import Path

from app.cycle.worktree import prepare
from tests.support.git import commit_files as commit
from tests.support.git import git, run_git


def test_prepare_throws_away_everything_the_last_step_left(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = {"a.txt": "base\n", "b.txt": "b\n", "c.txt": "c\n", "d/f.txt": "f\n"}
    commit(repo, {**base, ".gitignore": "*.log\n"}, "base")
    git(repo, "checkout", "-q", "-b", "other")
    commit(repo, {"a.txt": "other\n"}, "other")
    git(repo, "checkout", "-q", "-b", "pair/card-1", "main")
    tip = commit(repo, {"a.txt": "card\n"}, "card work")
    git(repo, "checkout", "-q", "main")
    first = prepare(repo, "card-1", "pair/card-1", "main")  # no origin: the local branch
    tree = first.path
    assert first.start == tip

    # What a step may leave: a merge stopped on a conflict, and every kind of change.
    assert run_git(tree, "merge", "other").returncode != 0
    assert run_git(tree, "rev-parse", "-q", "--verify", "MERGE_HEAD").returncode == 0
    (tree / "b.txt").write_text("staged\n")
    git(tree, "add", "b.txt")
    (tree / "c.txt").write_text("unstaged\n")
    (tree / "new.txt").write_text("new\n")
    git(tree, "add", "new.txt")
    git(tree, "rm", "-q", "d/f.txt")
    (tree / "untracked.txt").write_text("u\n")
    (tree / "build.log").write_text("ignored\n")

    again = prepare(repo, "card-1", "pair/card-1", "main")
    assert again == first
    assert git(tree, "rev-parse", "HEAD") == tip
    assert git(tree, "symbolic-ref", "--short", "HEAD") == "pair/card-1"
    assert git(tree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    assert run_git(tree, "rev-parse", "-q", "--verify", "MERGE_HEAD").returncode != 0
    assert (tree / "a.txt").read_text() == "card\n"
    assert [(tree / n).read_text() for n in ("b.txt", "c.txt", "d/f.txt")] == ["b\n", "c\n", "f\n"]
    assert not (tree / "new.txt").exists() and not (tree / "untracked.txt").exists()
    assert not (tree / "build.log").exists()


def test_prepare_moves_a_worktree_left_on_another_commit_back_to_the_tip(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit(repo, {"a.txt": "base\n"}, "base")
    git(repo, "checkout", "-q", "-b", "pair/card-2")
    tip = commit(repo, {"a.txt": "card\n"}, "card work")
    git(repo, "checkout", "-q", "main")
    tree = prepare(repo, "card-2", "pair/card-2", "main").path
    # Left on a detached commit the branch never got, with files the tip does not have: the
    # next step starts at the branch's tip all the same.
    git(tree, "checkout", "-q", "--detach")
    commit(tree, {"a.txt": "refused\n", "extra.txt": "x\n"}, "refused work")
    assert prepare(repo, "card-2", "pair/card-2", "main").start == tip
    assert git(tree, "rev-parse", "HEAD", "pair/card-2").split() == [tip, tip]
    assert git(tree, "symbolic-ref", "--short", "HEAD") == "pair/card-2"
    assert (tree / "a.txt").read_text() == "card\n" and not (tree / "extra.txt").exists()
    assert git(tree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
