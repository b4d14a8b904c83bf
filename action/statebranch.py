"""Run-state that outlives a GitHub Actions runner: the orphan branch `pair-state` on `origin`.

Each Actions tick runs on a fresh runner, so the run-state files a local run keeps under
`.pair/batches/<batch>/run/` (see `app.engine.runstate`) travel on an orphan branch of the
workspace checkout's remote instead: fetched at the start of a tick (`pull`), committed and
pushed at its end (`push`). The branch holds

    .pair/batches/<batch>/run/journal.jsonl     the batch journal
    .pair/batches/<batch>/run/state.json        its parked steps
    .pair/batches/<batch>/batch.yaml            a card batch's manifest (not committed on main)
    .pair/lessons/card-<n>-<run>.md             a finished card's lesson (app.cycle.lesson_files)
    .pair/acks.json                             reactions still owed to commands (action.acks)
    .pair/deliveries.json                       notifications already handled (action.azure)
    lock.json                                   {"runId", "host", "at"} while a tick holds it

and shares no history with the project's branches. `step.lock` does not travel: a file lock
means nothing across runners. The lock is `lock.json`, taken by pushing a commit that adds it
on top of the fetched tip with a compare-and-swap; a rejected push means another tick moved the
branch first, and this tick skips (it never waits). A lock older than `stale_after_s` belongs to
a run that no longer exists and is reclaimed by a commit replacing it. Every push is a
compare-and-swap against the tip this object last saw (`--force-with-lease=<ref>:<sha>`, with
an empty sha meaning "the branch must not exist yet"), so nothing another writer pushed is ever
overwritten; a rejected `push` raises `StateBranchConflict` and the caller re-pulls.

`run_locked` is the one run of a CI entry on the branch, shared by the GitHub Action and the
Azure Pipelines entry (`action.azure`): take the lock (a tick skips when it is held, a command
waits for it, bounded), pull, act with checkpoints, push what the step journaled even when it
failed, release.

How it touches the repository, and why plumbing (`action.stategit` runs the git processes;
`action.statefiles` names the files the branch carries). The user's checkout, index and current
branch are never read or written: the branch is fetched into a private ref
(`refs/pairbot/state/<remote>/<branch>`), blobs are read with `cat-file`, and a commit is built
with `hash-object --no-filters` → `update-index` on a throwaway index file (`GIT_INDEX_FILE` in
a temp dir) → `write-tree` → `commit-tree`, then pushed by sha. That needs no work tree at all.
`git worktree add` would register an admin entry in `.git/worktrees/` that a killed tick leaves
behind (it then needs `worktree prune`), and `--work-tree=<tmp>` with `git add` would apply the
project's `.gitattributes` filters and `.gitignore` to the state files; plumbing does neither
and keeps the bytes exact. Pushes pass `--no-verify`, so a user's pre-push hook does not run.

Every git process is a fork and exec on the runner, so a tick spends as few as it can: git
objects never change, so a commit's tree listing, a blob read or written and the tree object
of a set of entries are kept for the tick (`push` re-reads nothing, and the unlock of a tick
that changed nothing reuses the tree of the tip it locked); the pull right after the lock reads
the lock commit it just pushed without fetching; the release first tries a compare-and-swap
from the last tip it saw and fetches only when that is refused. A locked run with nothing to
do runs 9 git processes on the state branch (lock 7, release 2), where a fetch before every
operation ran 23; both CI entries answer an idle scheduled tick from one unlocked `pull`
into a scratch directory instead (4 processes, nothing pushed: `action.run.locked`).

Git runs with `GIT_TERMINAL_PROMPT=0` (a missing credential fails instead of hanging) and a
fixed identity (`-c user.name=pairbot -c user.email=pairbot@users.noreply.invalid`), so a fresh
runner without git config can commit. Credentials are never stored or printed: the remote is
named, not spelled out, and any `scheme://user:secret@` in git's stderr is masked before it
reaches an error message.

Errors:

    PairbotError
    ├── StateBranchConflict         the branch moved under us (a CAS push was rejected); transient:
    │                               the caller re-pulls and repeats, nothing was overwritten
    └── OperatorError
        ├── LeaseNotHeldError       `push` without a current lease (released, reclaimed by another
        │                           tick, or never taken): a bug or a tick that ran past its lock
        └── StateBranchGitError     git failed (network, authentication, a protected branch):
                                    the message carries git's masked stderr for the operator
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from action.lockknobs import DEFAULT_STALE_AFTER_S
from action.statefiles import (
    DELIVERIES_FILE,
    LOCK_FILE,
    is_state_path,
    lock_is_stale,
    state_paths,
    write_bytes_atomic,
)
from action.stategit import Entry, StateBranchGitError, StateGit, Tree
from app.cycle.schedule import card_batches, card_key
from app.errors import OperatorError, PairbotError

__all__ = [
    "DEFAULT_STALE_AFTER_S",
    "DELIVERIES_FILE",
    "LOCK_FILE",
    "LeaseNotHeldError",
    "LockLease",
    "PullResult",
    "StateBranch",
    "StateBranchConflict",
    "StateBranchGitError",
    "is_state_path",
    "lock_is_stale",
    "run_locked",
]

LOCK_POLL_S = 10.0
_RELEASE_ATTEMPTS = 3
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_BRANCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_REGULAR_MODES = ("100644", "100755")


class StateBranchConflict(PairbotError):
    """The state branch moved since we fetched it; our push was refused and nothing overwritten."""


class LeaseNotHeldError(OperatorError):
    """A state push was attempted without holding the branch lock it requires."""


@dataclass(frozen=True)
class LockLease:
    """Proof that this tick holds the state-branch lock: the `lock.json` it pushed.

    Like `app.engine.lock.LockProof`, `StateBranch.push` takes it as a parameter so an unlocked
    write does not type-check; `push` also checks that the branch still carries this lock.
    """

    run_id: str
    host: str
    at: str
    commit: str


@dataclass(frozen=True)
class PullResult:
    """What `pull` found: the tip (None while the branch does not exist), the files written,
    and whether the tip carries a lock (`lock.json`, fresh or stale: `pull` does not judge)."""

    tip: str | None
    files: tuple[str, ...]
    locked: bool = False


class StateBranch:
    """The run-state branch of `repo`'s `remote`; one object per tick.

    It remembers the tip it last saw (`pull`, `try_lock`, `push`, `release`): every push is a
    compare-and-swap against that tip.
    """

    def __init__(
        self,
        repo: Path,
        *,
        remote: str = "origin",
        branch: str = "pair-state",
        clock: Callable[[], datetime],
        host_id: str,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
    ) -> None:
        if not _REMOTE_NAME.match(remote) or not _BRANCH_NAME.match(branch):
            # A name, never a URL: a URL may carry a token, and it would end up in a ref name.
            raise ValueError(f"expected a remote name and a branch name, got {remote!r} {branch!r}")
        self.repo = repo
        self.remote = remote
        self.branch = branch
        self.clock = clock
        self.host_id = host_id
        self.stale_after_s = stale_after_s
        self._git = StateGit(repo, remote, branch)
        self._base: str | None = None  # the tip last fetched or pushed

    # -- public API -------------------------------------------------------------------------

    def pull(self, into: Path, *, fetch: bool = True) -> PullResult:
        """Fetch the branch and write its run-state files under `into` (absent branch: none).

        Files on the branch replace the same paths under `into`; other files there are left
        alone. `lock.json` is not written: the lock lives on the branch only. `fetch=False`
        reads the tip this object last saw instead (right after `try_lock`, the lock commit it
        pushed itself: a fetch would bring back what it already has).
        """
        tip = self._fetch() if fetch else self._base
        written: list[str] = []
        locked = False
        if tip is not None:
            tree = self._tree(tip)
            locked = LOCK_FILE in tree
            wanted = {
                path: entry
                for path, entry in tree.items()
                if is_state_path(path) and entry.mode in _REGULAR_MODES
            }
            blobs = self._git.read_blobs([entry.sha for entry in wanted.values()])
            for path, entry in sorted(wanted.items()):
                write_bytes_atomic(into / path, blobs[entry.sha])
                written.append(path)
        return PullResult(tip=tip, files=tuple(written), locked=locked)

    def try_lock(self, run_id: str) -> LockLease | None:
        """Take the branch lock by pushing a `lock.json` commit; None when another tick has it.

        None when the fetched tip carries a lock that is not stale, or when our push is rejected
        because someone moved the branch first. Skips, never waits.
        """
        tip = self._fetch()
        tree = self._tree(tip) if tip is not None else {}
        if LOCK_FILE in tree:
            current = self._read_lock(tree[LOCK_FILE])
            if not lock_is_stale(current, self.clock(), self.stale_after_s):
                return None
        at = self.clock().isoformat()
        lock = {"runId": run_id, "host": self.host_id, "at": at}
        payload = (json.dumps(lock, separators=(",", ":")) + "\n").encode("utf-8")
        files = {path: entry for path, entry in tree.items() if path != LOCK_FILE}
        files[LOCK_FILE] = Entry("100644", self._git.hash_bytes(payload))
        verb = "reclaim stale lock" if LOCK_FILE in tree else "lock"
        commit = self._git.commit(files, tip, f"pairbot: {verb} for run {run_id} on {self.host_id}")
        if not self._push(commit, tip):
            return None
        return LockLease(run_id=run_id, host=self.host_id, at=at, commit=commit)

    def push(
        self,
        from_dir: Path,
        message: str,
        lease: LockLease,
        *,
        card_batches: Iterable[str] = (),
    ) -> str:
        """Commit the run-state files under `from_dir` onto the branch; returns the new tip.

        The new tree is the tip we last saw with these files laid over it: each batch's
        `journal.jsonl` and `state.json`, and the `batch.yaml` of every batch in `card_batches`
        or already recorded on the branch. Nothing is deleted and the lock stays.

        Raises `LeaseNotHeldError` unless the tip we last saw carries `lease`'s lock, and
        `StateBranchConflict` when the branch has moved since (re-pull, then push again).
        """
        base = self._base
        tree = self._tree(base) if base is not None else {}
        if not self._holds(tree, lease):
            raise LeaseNotHeldError(
                f"refusing to push run-state to {self.remote}/{self.branch}: run {lease.run_id}"
                f" on {lease.host} does not hold its lock at the tip last fetched"
                f" ({base or 'no branch'}); take the lock with try_lock first"
            )
        files = dict(tree)
        files.update(self._collect(from_dir, tree, card_batches))
        if files == tree:
            return str(base)  # nothing changed: no empty commit
        commit = self._git.commit(files, base, message)
        if not self._push(commit, base):
            raise StateBranchConflict(
                f"{self.remote}/{self.branch} moved since {base}; run-state push refused,"
                " nothing was overwritten: pull again and push again"
            )
        return commit

    def release(self, lease: LockLease) -> bool:
        """Remove `lock.json` if it is still `lease`'s; True when this call removed it.

        A lock that is no longer ours (reclaimed after it went stale) is left alone. A push lost
        to a concurrent writer is retried a few times before `StateBranchConflict` is raised.
        """
        for attempt in range(_RELEASE_ATTEMPTS + 1):
            # First from the tip this object last pushed or fetched (usually its own last
            # push), without a fetch: the push is a compare-and-swap, so a branch that moved
            # since is refused and the next attempts fetch.
            optimistic = attempt == 0
            tip = self._base if optimistic else self._fetch()
            if optimistic and tip is None:
                continue
            tree = self._tree(tip) if tip is not None else {}
            if not self._holds(tree, lease):
                if optimistic:
                    continue  # only what the remote holds now can say the lock is not ours
                return False
            files = {path: entry for path, entry in tree.items() if path != LOCK_FILE}
            commit = self._git.commit(files, tip, f"pairbot: unlock run {lease.run_id}")
            if self._push(commit, tip):
                return True
        raise StateBranchConflict(
            f"could not release the lock of run {lease.run_id} on {self.remote}/{self.branch}:"
            f" the branch kept moving ({_RELEASE_ATTEMPTS} attempts); it goes stale after"
            f" {self.stale_after_s:.0f}s"
        )

    # -- decisions --------------------------------------------------------------------------

    def _holds(self, tree: Mapping[str, Entry], lease: LockLease) -> bool:
        entry = tree.get(LOCK_FILE)
        if entry is None:
            return False
        current = self._read_lock(entry)
        return current is not None and (
            current.get("runId"),
            current.get("host"),
            current.get("at"),
        ) == (lease.run_id, lease.host, lease.at)

    def _collect(
        self, from_dir: Path, tree: Mapping[str, Entry], card_batches: Iterable[str]
    ) -> dict[str, Entry]:
        """The run-state files under `from_dir` to lay over `tree`, hashed into the store."""
        ordered = state_paths(from_dir, tree.keys(), card_batches)
        shas = self._git.hash_files([from_dir / path for path in ordered])
        return {path: Entry("100644", sha) for path, sha in zip(ordered, shas, strict=True)}

    def _read_lock(self, entry: Entry) -> dict[str, object] | None:
        raw = self._git.read_blobs([entry.sha])[entry.sha]
        try:
            value = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    # -- the tip this object last saw --------------------------------------------------------

    def _fetch(self) -> str | None:
        """Fetch the branch (`StateGit.fetch`); the tip it found becomes the one last seen."""
        self._base = self._git.fetch()
        return self._base

    def _push(self, commit: str, expected: str | None) -> bool:
        """Compare-and-swap from `expected` to `commit`; a push that lands moves the tip."""
        if not self._git.push(commit, expected):
            return False
        self._base = commit
        return True

    def _tree(self, commit: str) -> Tree:
        return self._git.tree(commit)


T = TypeVar("T")


async def run_locked(
    branch: StateBranch,
    root: Path,
    run_id: str,
    act: Callable[[Callable[[], Awaitable[None]]], Awaitable[T]],
    status_of: Callable[[T], str],
    *,
    wait_s: float = 0.0,
    poll_s: float = LOCK_POLL_S,
) -> T | None:
    """One CI run on the state branch; None when another run holds the lock past `wait_s`.

    `act(save)` runs the step; `save()` pushes a checkpoint of the run-state. Whatever the step
    journaled is pushed even when it raises (the record of what happened), then the lock is
    released; `status_of(result)` names the final push.
    """
    lease = branch.try_lock(run_id)
    deadline = time.monotonic() + wait_s
    while lease is None and time.monotonic() < deadline:
        await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
        lease = branch.try_lock(run_id)
    if lease is None:
        return None
    held = lease

    def push(status: str) -> None:
        cards = [card_key(n) for n in card_batches(root)]
        branch.push(root, f"pairbot: run {run_id} ({status})", held, card_batches=cards)

    async def save() -> None:
        push("checkpoint")

    try:
        branch.pull(root, fetch=False)  # the lock commit just pushed is the tip
        try:
            result = await act(save)
        except BaseException:
            push("failed")
            raise
        push(status_of(result))
    finally:
        branch.release(held)
    return result
