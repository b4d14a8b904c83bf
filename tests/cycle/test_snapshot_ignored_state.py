"""Snapshots and step commits when pairbot's own state sits in an ignored directory.

`pairbot init` writes `.pair/.gitignore` with `app/`; once `pairbot serve` has created
`.pair/app` (the store, the webhook secret), an `:(exclude).pair/app/*` pathspec makes
`git add` exit 1 ("paths are ignored"). The work line and step commits must not trip on it,
and must still leave the run-state and the excluded files out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.cli.init import IGNORED
from app.cycle import worktree as wt
from app.cycle.work_line_git import GitWorkTree
from hosts.git import run_git


def _repo(root: Path) -> str:
    root.mkdir()
    (root / ".pair").mkdir()
    (root / ".pair" / ".gitignore").write_text(IGNORED)
    (root / "README.md").write_text("hello\n")
    run_git(("init", "-q", "-b", "main"), cwd=root)
    run_git(("add", "-A"), cwd=root)
    run_git(
        ("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "init"), cwd=root
    )
    (root / ".pair" / "app").mkdir()
    (root / ".pair" / "app" / "pairbot.sqlite3").write_text("store")
    return run_git(("rev-parse", "HEAD"), cwd=root).stdout.strip()


def test_a_snapshot_with_the_app_store_present_commits_the_work_only(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    start = _repo(root)
    run_dir = root / ".pair" / "batches" / "b" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "journal.jsonl").write_text("{}\n")
    (root / "work.py").write_text("x = 1\n")
    snap = asyncio.run(GitWorkTree(root).snapshot("pair-work/b", start, "work"))
    assert snap is not None
    assert snap.files == ("work.py",)


def test_a_step_commit_keeps_an_excluded_tracked_file_as_head_has_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _repo(root)
    (root / "junit.xml").write_text("<old/>")
    run_git(("add", "junit.xml"), cwd=root)
    run_git(("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "j"), cwd=root)
    before = wt.head(root)
    (root / "junit.xml").write_text("<new/>")
    (root / "feature.py").write_text("y = 2\n")
    after = wt.commit_all(root, "step", exclude=["junit.xml"])
    changed = run_git(("diff", "--name-only", before, after), cwd=root).stdout.split()
    assert changed == ["feature.py"]
    assert run_git(("show", f"{after}:junit.xml"), cwd=root).stdout == "<old/>"
