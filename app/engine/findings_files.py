"""The findings files a step's verifiers reported with, taken out of the tree they wrote them in.

A verifier (`verify`, `verify-red`) reports its verdict with `batch report --complete …
--findings FILE`; the report reads FILE into the journal, and records where it lay in the
agent's tree (`findingsFile`, app.cli.batch) when it lay there. An agent told to change nothing
writes that file where it works more often than not, so before the step's work is judged or
kept, the engine removes each such file it finds untracked in the tree: it is the report's
medium, never a change — not a change the red verifier is refused for, not a file a review
leaves in the pull request. A file git tracks is left alone (the agent pointed at a file of
the project's own).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

from app.engine import jsonl

REPORTING_STEPS = frozenset({"verify", "verify-red"})


def remove_reported_findings(root: Path, journal: Path, key: str, since: int) -> list[str]:
    """Remove the findings files `key`'s completions from journal entry `since` on recorded in
    `root`, when untracked; the tree-relative paths removed."""
    removed: list[str] = []
    top = root.resolve()
    for record in jsonl.read_records(journal, since):
        relative = record.get("findingsFile")
        if record.get("kind") != "completion" or record.get("key") != key:
            continue
        if not isinstance(relative, str) or not relative or relative in removed:
            continue
        path = root / relative
        if not path.is_file() or not path.resolve().is_relative_to(top):
            continue  # gone already, or not a file in the tree
        if _tracked(root, relative):
            continue  # the project's own file
        with contextlib.suppress(OSError):  # left in place: the vet then sees it as it is
            path.unlink()
            removed.append(relative)
    return removed


def _tracked(root: Path, relative: str) -> bool:
    """Whether git tracks `relative` in `root` (unsure — git missing or hung — counts as
    tracked: the file stays). git directly, as app.engine.phase_steps runs it: the engine
    knows no host, hosts.git included; a caller's GIT_* location is not inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--error-unmatch", "--", relative],
            cwd=root,
            env=env,
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return True
    return listed.returncode == 0
