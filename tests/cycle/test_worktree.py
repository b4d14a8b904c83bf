"""Where a card's step starts (`app.cycle.worktree.branch_tip`), with real repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cycle.worktree import WorktreeError, branch_tip, prepare
from tests.support.git import git


def commit(cwd: Path, name: str) -> str:
    (cwd / name).write_text(f"{name}\n")
    git(cwd, "add", name)
    git(cwd, "commit", "-q", "-m", name)
    return git(cwd, "rev-parse", "HEAD")


@pytest.fixture
def remote_and_clone(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote, a long-lived clone of it (the worker's), and a second clone (a person)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    person = tmp_path / "person"
    git(tmp_path, "clone", "-q", str(remote), str(person))
    git(person, "checkout", "-q", "-b", "main")
    commit(person, "first")
    git(person, "push", "-q", "origin", "main")
    worker = tmp_path / "worker"
    git(tmp_path, "clone", "-q", str(remote), str(worker))
    return remote, worker, person


def test_a_new_card_starts_from_the_remotes_base_as_it_is_now(
    remote_and_clone: tuple[Path, Path, Path],
) -> None:
    _, worker, person = remote_and_clone
    newer = commit(person, "second")  # main moved on after the worker's clone
    git(person, "push", "-q", "origin", "main")
    assert git(worker, "rev-parse", "origin/main") != newer  # the worker's view is stale
    assert branch_tip(worker, "pair/card-1", "main") == newer
    # The user's remote-tracking refs are left alone: pairbot fetched into a private ref.
    assert git(worker, "rev-parse", "origin/main") != newer
    assert prepare(worker, "card-1", "pair/card-1", "main").start == newer


def test_a_cards_pushed_branch_wins_over_the_base(
    remote_and_clone: tuple[Path, Path, Path],
) -> None:
    _, worker, person = remote_and_clone
    git(person, "checkout", "-q", "-b", "pair/card-2")
    pushed = commit(person, "card work")
    git(person, "push", "-q", "origin", "pair/card-2")
    git(person, "checkout", "-q", "main")
    commit(person, "later on main")
    git(person, "push", "-q", "origin", "main")
    assert branch_tip(worker, "pair/card-2", "main") == pushed


def test_an_unreachable_remote_falls_back_to_the_local_base(
    remote_and_clone: tuple[Path, Path, Path],
) -> None:
    remote, worker, _ = remote_and_clone
    local = git(worker, "rev-parse", "main")
    remote.rename(remote.with_name("moved.git"))  # the remote is gone (offline, revoked)
    assert branch_tip(worker, "pair/card-3", "main") == local


def test_a_base_that_exists_nowhere_is_an_error_naming_it(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "only")
    with pytest.raises(WorktreeError, match="'trunk'"):
        branch_tip(tmp_path, "pair/card-4", "trunk")


def test_a_worktree_lives_outside_git_and_out_of_the_checkouts_status(
    remote_and_clone: tuple[Path, Path, Path],
) -> None:
    # Agents' edit tools refuse paths under .git/ (claude's acceptEdits): the worktree is in
    # .pair/worktrees, and the checkout, with no .gitignore of pairbot's, still shows nothing.
    _, worker, _ = remote_and_clone
    made = prepare(worker, "card-1", "pair/card-1", "main")
    assert made.path == worker / ".pair" / "worktrees" / "card-1"
    assert ".git" not in made.path.relative_to(worker).parts
    assert git(worker, "status", "--porcelain", "--untracked-files=all") == ""
    again = prepare(worker, "card-1", "pair/card-1", "main")  # reused; one exclude line
    assert again.path == made.path
    exclude = (worker / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.pair/worktrees/") == 1


def test_a_worktree_an_older_pairbot_made_inside_git_is_moved(
    remote_and_clone: tuple[Path, Path, Path],
) -> None:
    _, worker, _ = remote_and_clone
    older = worker / ".git" / "pair-worktrees" / "card-1"
    git(worker, "worktree", "add", "-q", "--detach", str(older), "main")
    git(older, "checkout", "-q", "-b", "pair/card-1")  # the branch is checked out there
    made = prepare(worker, "card-1", "pair/card-1", "main")
    assert made.path == worker / ".pair" / "worktrees" / "card-1" and not older.exists()
    assert git(made.path, "rev-parse", "--abbrev-ref", "HEAD") == "pair/card-1"
