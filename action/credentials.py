"""Take the token actions/checkout persisted out of every file the agent could read.

With `persist-credentials: true` (its default) actions/checkout leaves the token where any later
process can read it: up to v5 as `http.<server>/.extraheader` in the checkout's `.git/config`;
from v6 in a config file under RUNNER_TEMP that `.git/config` includes with
`includeIf.gitdir:<path>.path` entries (https://github.com/actions/checkout/releases/tag/v6.0.0).
An agent reads the first through its worktree's git, and the second wherever RUNNER_TEMP is
readable. pairbot needs neither: its own git authenticates through its environment
(`action.run.locked`, with each CI's `git_credentials`). So before any agent runs,
`drop_persisted_credentials` removes the extraheader entries and the includes of a file that
holds one, and makes such a file readable by the runner's user only (0600; checkout's post-job
step still deletes it).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from hosts.git import run_git

__all__ = ["drop_persisted_credentials"]

_EXTRAHEADER = r"^http\..*\.extraheader$"
_INCLUDE = r"^include(if\..*)?\.path$"
# Both kinds listed by one `git config` process (its patterns are POSIX extended regexps).
_EITHER = r"^(http\..*\.extraheader|include(if\..*)?\.path)$"


def _entries(root: Path, pattern: str) -> list[tuple[str, str]]:
    listed = run_git(
        ["config", "--local", "--null", "--get-regexp", pattern], cwd=root, check=False
    )
    pairs: list[tuple[str, str]] = []
    for item in listed.stdout.split("\0"):
        key, _, value = item.partition("\n")
        if key:
            pairs.append((key, value))
    return pairs


def drop_persisted_credentials(root: Path) -> int:
    """Remove persisted credentials from the checkout at `root`; how many entries went."""
    removed = 0
    entries = _entries(root, _EITHER)
    headers = [key for key, _ in entries if re.match(_EXTRAHEADER, key, re.IGNORECASE)]
    for key in dict.fromkeys(headers):
        run_git(["config", "--local", "--unset-all", key], cwd=root, check=False)
        removed += 1
    for key, value in entries:
        if not re.match(_INCLUDE, key, re.IGNORECASE):
            continue
        included = (root / ".git" / value) if not Path(value).is_absolute() else Path(value)
        try:
            text = included.read_text(errors="replace")
        except OSError:
            continue
        if "extraheader" not in text.lower():
            continue
        run_git(
            ["config", "--local", "--fixed-value", "--unset-all", key, value],
            cwd=root,
            check=False,
        )
        with contextlib.suppress(OSError):
            included.chmod(0o600)
        removed += 1
    return removed
