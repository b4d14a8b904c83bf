"""`pairbot report cohort --pair-state`: the card journals CI runs keep on `pair-state`.

The GitHub Action and the Azure Pipelines entry keep each card's run-state on the orphan branch
`pair-state` of the repository (docs/action.md), not in a checkout. In a checkout of that
repository this module brings the branch's card journals into reach of the cohort report:

    fetch_state_branch(root, remote) -> commit | None   `git fetch <remote> pair-state` into a
                                                         private ref; None: no such branch
    copy_journals(root, commit, into) -> how many        the branch's card journals written
                                                         under `into/.pair/batches/…`

`app.cli.report` then reduces the checkout and that copy together (`cohort_of`: a card found in
both is the journal with more records, the later copy). Nothing else is touched: the branch is
fetched into `refs/pairbot/report/<remote>/pair-state` (never a branch of yours, never the work
tree or the index), and read with `ls-tree` and one `cat-file --batch`. git runs through
`hosts.git.run_git` (no prompt, credentials never printed).
"""

from __future__ import annotations

import re
from pathlib import Path

from app.errors import UserError
from hosts.git import GitError, run_git

BRANCH = "pair-state"
_REMOTE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_JOURNAL = re.compile(r"^\.pair/batches/card-[1-9][0-9]{0,8}/run/journal\.jsonl$")
_MISSING = ("couldn't find remote ref", "could not find remote ref")


def fetch_state_branch(root: Path, remote: str) -> str | None:
    """Fetch `remote`'s `pair-state` into a private ref; its commit, None when `remote` has no
    such branch (no card ran in CI yet). UserError for a bad remote name or a failed fetch."""
    if not _REMOTE.match(remote):
        raise UserError(
            f"--pair-state takes the name of a git remote of this checkout (e.g. origin), "
            f"got {remote!r}"
        )
    ref = f"refs/pairbot/report/{remote}/{BRANCH}"
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote]
    try:
        done = run_git([*args, f"+refs/heads/{BRANCH}:{ref}"], cwd=root, check=False)
    except GitError as error:  # git missing or the remote not answering in time
        raise UserError(f"could not fetch {BRANCH} from {remote}: {error}") from None
    if done.returncode != 0:
        if any(text in done.stderr.lower() for text in _MISSING):
            return None
        raise UserError(
            f"could not fetch {BRANCH} from {remote} (exit {done.returncode}): "
            f"{done.stderr.strip() or 'git said nothing'}; check the remote and its credential"
        )
    return run_git(["rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=root).stdout.strip()


def copy_journals(root: Path, commit: str, into: Path) -> int:
    """Write every card journal of `commit`'s tree under `into` at the same path; how many."""
    listing = run_git(["ls-tree", "-r", "-z", commit, "--", ".pair/batches"], cwd=root)
    wanted: dict[str, str] = {}  # blob sha → path
    for entry in listing.stdout.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] in ("100644", "100755") and _JOURNAL.match(path):
            wanted.setdefault(parts[2], path)
    if not wanted:
        return 0
    batch = run_git(
        ["cat-file", "--batch"], cwd=root, stdin="\n".join(wanted) + "\n", binary=True
    ).raw
    at = 0
    for sha, path in wanted.items():
        # Each answer: "<sha> blob <size>\n<bytes>\n", in the order asked.
        header_end = batch.index(b"\n", at)
        name, kind, size = batch[at:header_end].decode().split()
        if name != sha or kind != "blob":
            raise UserError(f"{BRANCH} at {commit[:12]}: {path} is not a readable blob")
        start = header_end + 1
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[start : start + int(size)])
        at = start + int(size) + 1
    return len(wanted)
