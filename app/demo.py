"""`pairbot demo`: set up the bundled example repository and advance its batch step by step.

This is the quickstart's main job on embedded defaults: the `local` host, the plain local
locus, and a scripted stand-in agent, so it needs no account, no server and no network. Run
it again on the same directory and it resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from app.engine.render import status_text
from app.engine.runner import apply_batch, batch_status
from app.engine.step import EngineDeps
from hosts.git import run_git

EXAMPLE = Path(__file__).parent / "examples" / "demo"
BATCH = "hello"


def _git(directory: Path, *args: str) -> None:
    run_git(args, cwd=directory)  # hosts.git: no inherited GIT_DIR, no prompt, GitError on failure


def prepare(directory: Path) -> bool:
    """Create the example repository in `directory`; False if one is already there (resume)."""
    if (directory / ".pair").is_dir():
        return False
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / "pair", directory / ".pair", dirs_exist_ok=True)
    (directory / "README.md").write_text("# pairbot demo\n\nA repository pairbot works on.\n")
    _git(directory, "init", "-q", "-b", "main")
    _git(directory, "add", "-A")
    _git(
        directory,
        "-c",
        "user.name=pairbot demo",
        "-c",
        "user.email=demo@pairbot.invalid",
        "commit",
        "-qm",
        "pairbot demo: initial commit",
    )
    return True


def run_demo(directory: Path, deps: EngineDeps, *, max_steps: int) -> int:
    """Advance the example batch until it is done or a step needs a human."""
    fresh = prepare(directory)
    print(f"{'created' if fresh else 'resuming'} example repository in {directory}")
    for number in range(1, max_steps + 1):
        result = asyncio.run(apply_batch(directory, BATCH, deps))
        print(
            f"step {number}: {result.state} {result.transition} {result.change} — {result.message}"
        )
        if result.state != "advanced":
            break
    status = batch_status(directory, BATCH)
    print(status_text(status))
    return 0 if status.done else 1
