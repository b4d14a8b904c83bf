"""`pairbot clean` on real card cycles (local host, scripted agent, real git): the worktree,
the pushed card branch and its tip ref go; a dirty worktree and an unpushed branch stay;
`--dry-run` changes nothing; a held step lock refuses (exit 3); an unknown batch exit 2."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from app.engine import lock
from app.engine.runstate import RunLocus
from tests.support.card_project import CardProject
from tests.support.git import git
from tests.support.project import cli


def refs(root: Path) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname)").split()


def worktrees(root: Path) -> str:
    return git(root, "worktree", "list")


def ready(tmp_path: Path) -> CardProject:
    project = CardProject.create(tmp_path)
    project.command("implement")
    assert project.until_quiet()[-1].status == "ready-for-merge"
    return project


def test_clean_removes_the_worktree_and_the_pushed_branch_after_a_dry_run(
    tmp_path: Path,
) -> None:
    project = ready(tmp_path)
    root, card = project.root, project.card
    tree = root / ".pair" / "worktrees" / f"card-{card}"
    assert tree.is_dir() and f"refs/heads/pair/card-{card}" in refs(root)

    dry = cli("clean", "--dry-run", cwd=root)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        f"would remove worktree .pair/worktrees/card-{card} (card-{card})",
        f"would remove branch pair/card-{card} (card-{card})",
        f"would remove tip ref refs/pairbot/tips/pair/card-{card} (card-{card})",
    ]
    assert tree.is_dir() and f"refs/heads/pair/card-{card}" in refs(root)

    done = cli("clean", f"card-{card}", cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        f"removed worktree .pair/worktrees/card-{card} (card-{card})"
    )
    assert not tree.exists()
    assert str(tree) not in worktrees(root)
    assert f"refs/heads/pair/card-{card}" not in refs(root)
    assert f"refs/pairbot/tips/pair/card-{card}" not in refs(root)
    # The remote keeps the branch; the run-state is untouched; the card goes on as before.
    assert f"refs/heads/pair/card-{card}" in refs(project.forge.repo)
    assert (RunLocus.for_batch(root, f"card-{card}").journal).is_file()
    assert project.step().status == "ready-for-merge"
    assert cli("clean", cwd=root).stdout.startswith("removed worktree")  # the step made it again
    assert cli("clean", cwd=root).stdout == "nothing to clean\n"


def test_a_dirty_worktree_and_an_unpushed_branch_are_kept(tmp_path: Path) -> None:
    project = ready(tmp_path)
    root, card = project.root, project.card
    tree = root / ".pair" / "worktrees" / f"card-{card}"
    (tree / "notes.txt").write_text("mine\n")
    kept = cli("clean", cwd=root)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.startswith(
        f"kept worktree .pair/worktrees/card-{card} (card-{card}): dirty: 1 uncommitted"
    )
    assert (tree / "notes.txt").read_text() == "mine\n"
    assert f"refs/heads/pair/card-{card}" in refs(root)

    # Committed but never pushed: the worktree goes, the branch holding the commit stays.
    git(tree, "add", "notes.txt")
    git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "local only")
    done = cli("clean", f"card-{card}", cwd=root)
    assert done.returncode == 0, done.stderr
    assert not tree.exists()
    assert f"kept branch pair/card-{card} (card-{card}): unpushed" in done.stdout
    assert git(root, "log", "-1", "--format=%s", f"pair/card-{card}") == "local only"


def test_a_held_lock_refuses_and_an_unknown_batch_is_named(tmp_path: Path) -> None:
    project = ready(tmp_path)
    root, card = project.root, project.card
    tree = root / ".pair" / "worktrees" / f"card-{card}"
    held = lock.acquire(RunLocus.for_batch(root, f"card-{card}").lock, now=datetime.now(UTC))
    try:
        refused = cli("clean", cwd=root)
        assert refused.returncode == 3
        assert "another pairbot step is running for this batch" in refused.stderr
        assert tree.is_dir()
    finally:
        lock.release(held)

    unknown = cli("clean", "card-404", cwd=root)
    assert unknown.returncode == 2
    assert "no batch 'card-404'" in unknown.stderr and f"card-{card}" in unknown.stderr
    hostile = cli("clean", "../..", cwd=root)
    assert hostile.returncode == 2 and "no batch '../..'" in hostile.stderr
    alone = cli("clean", "--archive-run", cwd=root)
    assert alone.returncode == 2 and "name its batch" in alone.stderr
    assert tree.is_dir()
