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

How it touches the repository, and why plumbing. The user's checkout, index and current branch
are never read or written: the branch is fetched into a private ref
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
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from action.acks import ACKS_FILE
from action.lockknobs import DEFAULT_STALE_AFTER_S
from app.engine.names import NAME_PATTERN
from app.errors import OperatorError, PairbotError
from hosts.git import GitError, GitResult, run_git

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
    "run_locked",
]

LOCK_FILE = "lock.json"
DELIVERIES_FILE = ".pair/deliveries.json"
_STATE_FILES = (ACKS_FILE, DELIVERIES_FILE)
LOCK_POLL_S = 10.0
IDENTITY = ("-c", "user.name=pairbot", "-c", "user.email=pairbot@users.noreply.invalid")
# Network operations get a bound: a hung remote must not hold a runner until the job timeout.
NETWORK_TIMEOUT_S = 120.0
_RELEASE_ATTEMPTS = 3
_BATCH = NAME_PATTERN.pattern.removeprefix("^").removesuffix("$")
_RUN_FILE = re.compile(rf"^\.pair/batches/(?P<batch>{_BATCH})/run/(?:journal\.jsonl|state\.json)$")
_MANIFEST = re.compile(rf"^\.pair/batches/(?P<batch>{_BATCH})/batch\.yaml$")
_LESSON = re.compile(r"^\.pair/lessons/card-[1-9][0-9]*-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.md$")
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_BRANCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_REGULAR_MODES = ("100644", "100755")
_CREDENTIAL_IN_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


class StateBranchConflict(PairbotError):
    """The state branch moved since we fetched it; our push was refused and nothing overwritten."""


class LeaseNotHeldError(OperatorError):
    """A state push was attempted without holding the branch lock it requires."""


class StateBranchGitError(OperatorError):
    """A git command on the state branch failed for a reason other than a lost race."""


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


@dataclass(frozen=True)
class _Entry:
    mode: str
    sha: str


def is_state_path(path: str) -> bool:
    """Whether a branch-relative path is a run-state file this module carries (not the lock)."""
    return (
        path in _STATE_FILES
        or _RUN_FILE.match(path) is not None
        or _MANIFEST.match(path) is not None
        or _LESSON.match(path) is not None
    )


def lock_is_stale(
    content: Mapping[str, object] | None, now: datetime, stale_after_s: float
) -> bool:
    """Whether a lock may be reclaimed: its `at` is more than `stale_after_s` before `now`.

    A lock whose content cannot be read (`None`) or has no parseable `at` was not written by a
    live pairbot tick that we could wait for, so it counts as stale.
    """
    if content is None:
        return True
    at = _parse_time(content.get("at"))
    if at is None:
        return True
    return (now - at).total_seconds() > stale_after_s


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
        self._remote_ref = f"refs/heads/{branch}"
        self._local_ref = f"refs/pairbot/state/{remote}/{branch}"
        self._base: str | None = None
        # Git objects never change, so what was read or written once is kept for the tick:
        # a commit's flattened tree, a blob's bytes, and the tree object of a set of entries.
        self._trees: dict[str, dict[str, _Entry]] = {}
        self._blobs: dict[str, bytes] = {}
        self._tree_ids: dict[frozenset[tuple[str, _Entry]], str] = {}

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
            blobs = self._read_blobs([entry.sha for entry in wanted.values()])
            for path, entry in sorted(wanted.items()):
                _write_bytes_atomic(into / path, blobs[entry.sha])
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
        sha = self._hash_bytes(payload)
        self._blobs[sha] = payload  # `push` and `release` read the lock back from here
        files[LOCK_FILE] = _Entry("100644", sha)
        verb = "reclaim stale lock" if LOCK_FILE in tree else "lock"
        commit = self._commit(files, tip, f"pairbot: {verb} for run {run_id} on {self.host_id}")
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
        commit = self._commit(files, base, message)
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
            commit = self._commit(files, tip, f"pairbot: unlock run {lease.run_id}")
            if self._push(commit, tip):
                return True
        raise StateBranchConflict(
            f"could not release the lock of run {lease.run_id} on {self.remote}/{self.branch}:"
            f" the branch kept moving ({_RELEASE_ATTEMPTS} attempts); it goes stale after"
            f" {self.stale_after_s:.0f}s"
        )

    # -- decisions --------------------------------------------------------------------------

    def _holds(self, tree: Mapping[str, _Entry], lease: LockLease) -> bool:
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
        self, from_dir: Path, tree: Mapping[str, _Entry], card_batches: Iterable[str]
    ) -> dict[str, _Entry]:
        """The run-state files under `from_dir` to lay over `tree`, hashed into the store."""
        paths: set[str] = set()
        batches_dir = from_dir / ".pair" / "batches"
        for pattern in ("*/run/journal.jsonl", "*/run/state.json"):
            for found in batches_dir.glob(pattern):
                relative = found.relative_to(from_dir).as_posix()
                if _RUN_FILE.match(relative) and found.is_file():
                    paths.add(relative)
        for found in (from_dir / ".pair" / "lessons").glob("card-*.md"):
            relative = found.relative_to(from_dir).as_posix()
            if _LESSON.match(relative) and found.is_file():
                paths.add(relative)
        recorded = {m["batch"] for path in tree if (m := _MANIFEST.match(path)) is not None}
        for batch in {*card_batches, *recorded}:
            relative = f".pair/batches/{batch}/batch.yaml"
            if not _MANIFEST.match(relative):
                raise ValueError(f"not a batch name: {batch!r}")
            if (from_dir / relative).is_file():
                paths.add(relative)
        paths.update(name for name in _STATE_FILES if (from_dir / name).is_file())
        ordered = sorted(paths)
        shas = self._hash_files([from_dir / path for path in ordered])
        return {path: _Entry("100644", sha) for path, sha in zip(ordered, shas, strict=True)}

    # -- git --------------------------------------------------------------------------------

    def _fetch(self) -> str | None:
        """Fetch the branch into the private ref; its sha, or None when the remote lacks it."""
        fetch = self._run(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-write-fetch-head",
            self.remote,
            f"+{self._remote_ref}:{self._local_ref}",
            timeout=NETWORK_TIMEOUT_S,
        )
        if fetch.returncode == 0:
            # The commit and its root tree in one process; the tree id lets a commit of the
            # same entries (the unlock of a tick that changed nothing) skip building it again.
            tip, tree = self._git(
                "rev-parse",
                f"{self._local_ref}^{{commit}}",
                f"{self._local_ref}^{{tree}}",
            ).split()
            self._base = tip
            if tip not in self._trees:
                self._tree_ids[frozenset(self._tree(tip).items())] = tree
            return tip
        # `ls-remote --exit-code` answers 2 exactly when the remote has no such ref.
        reachable, current = self._remote_tip()
        if not reachable or current is not None:
            raise _git_error(("fetch", self.remote, self._remote_ref), fetch)
        self._git("update-ref", "-d", self._local_ref)
        self._base = None
        return None

    def _push(self, commit: str, expected: str | None) -> bool:
        """Compare-and-swap the remote branch from `expected` to `commit`; False when rejected."""
        result = self._run(
            "push",
            "--no-verify",
            f"--force-with-lease={self._remote_ref}:{expected or ''}",
            self.remote,
            f"{commit}:{self._remote_ref}",
            timeout=NETWORK_TIMEOUT_S,
        )
        if result.returncode != 0:
            # Whatever git said ("[rejected] (stale info)", or "[remote rejected]" when another
            # push won between the lease check and the ref update, or a dropped connection),
            # the remote's current tip tells what happened.
            reachable, current = self._remote_tip()
            if not reachable or current == expected:
                raise _git_error(("push", self.remote, self._remote_ref), result)
            if current != commit:
                return False  # someone else moved the branch: we lost the race
            # Our commit is there: the push landed and only its report was lost.
        # The private ref is not moved here: the next fetch force-updates it, and the commit
        # is reachable from the remote branch (one git process less per push).
        self._base = commit
        return True

    def _remote_tip(self) -> tuple[bool, str | None]:
        """(reachable, the remote branch's sha or None when it does not exist)."""
        probe = self._run(
            "ls-remote",
            "--exit-code",
            self.remote,
            self._remote_ref,
            timeout=NETWORK_TIMEOUT_S,
        )
        if probe.returncode not in (0, 2):
            return False, None
        for line in probe.stdout.splitlines():
            sha, _, ref = line.partition("\t")
            if ref == self._remote_ref:
                return True, sha
        return True, None

    def _tree(self, commit: str) -> dict[str, _Entry]:
        known = self._trees.get(commit)
        if known is not None:
            return dict(known)
        out = self._git("ls-tree", "-r", "-z", "--full-tree", commit)
        entries: dict[str, _Entry] = {}
        for record in out.split("\0"):
            if not record:
                continue
            meta, path = record.split("\t", 1)
            mode, kind, sha = meta.split(" ")
            if kind == "blob":
                entries[path] = _Entry(mode, sha)
        self._trees[commit] = entries
        return dict(entries)

    def _read_blobs(self, shas: Sequence[str]) -> dict[str, bytes]:
        blobs = {sha: self._blobs[sha] for sha in shas if sha in self._blobs}
        unique = sorted(set(shas) - blobs.keys())
        if not unique:
            return blobs
        out = self._run_bytes("cat-file", "--batch", stdin="".join(f"{s}\n" for s in unique))
        offset = 0
        for sha in unique:
            header_end = out.index(b"\n", offset)
            header = out[offset:header_end].decode("ascii").split(" ")
            if len(header) != 3 or header[1] != "blob":
                raise StateBranchGitError(f"state branch object {sha} is not a blob: {header}")
            size = int(header[2])
            start = header_end + 1
            blobs[sha] = self._blobs[sha] = out[start : start + size]
            offset = start + size + 1  # the blob is followed by a newline
        return blobs

    def _read_lock(self, entry: _Entry) -> dict[str, object] | None:
        raw = self._read_blobs([entry.sha])[entry.sha]
        try:
            value = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    def _hash_bytes(self, payload: bytes) -> str:
        return self._run_bytes("hash-object", "-w", "--stdin", stdin=payload).decode().strip()

    def _hash_files(self, paths: Sequence[Path]) -> list[str]:
        if not paths:
            return []
        # --no-filters: the project's .gitattributes (eol, clean filters) must not alter state.
        out = self._git(
            "hash-object",
            "-w",
            "--no-filters",
            "--stdin-paths",
            stdin="".join(f"{path.resolve()}\n" for path in paths),
        )
        return out.split()

    def _commit(self, files: Mapping[str, _Entry], parent: str | None, message: str) -> str:
        """A commit of exactly `files` on `parent` (None: an orphan), built on a throwaway index
        (or on the tree object of the same entries, when this tick has seen or written one)."""
        key = frozenset(files.items())
        tree = self._tree_ids.get(key)
        if tree is None:
            with tempfile.TemporaryDirectory(prefix="pairbot-state-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                info = "".join(f"{e.mode} {e.sha}\t{path}\0" for path, e in sorted(files.items()))
                self._git("update-index", "--add", "-z", "--index-info", stdin=info, env=env)
                tree = self._tree_ids[key] = self._git("write-tree", env=env).strip()
        parents = ("-p", parent) if parent is not None else ()
        commit = self._git("commit-tree", tree, *parents, "-m", message).strip()
        self._trees[commit] = dict(files)
        return commit

    def _git(
        self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        result = self._run(*args, stdin=stdin, env=env)
        if result.returncode != 0:
            raise _git_error(args, result)
        return result.stdout

    def _run(
        self,
        *args: str,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> GitResult:
        # hosts.git: no inherited location variables, no prompt; `env` goes on top (the
        # throwaway GIT_INDEX_FILE), and PATH, HOME and the runner's credential config stay.
        try:
            return run_git(self._argv(args), stdin=stdin, env=env, timeout_s=timeout, check=False)
        except GitError as err:
            if err.timed_out:
                raise StateBranchGitError(
                    f"git {args[0]} on {self.remote}/{self.branch} timed out after "
                    f"{timeout or 0:.0f}s"
                ) from None
            raise StateBranchGitError(_mask(str(err))) from None

    def _run_bytes(self, *args: str, stdin: str | bytes) -> bytes:
        try:
            result = run_git(
                self._argv(args), stdin=stdin, timeout_s=None, check=False, binary=True
            )
        except GitError as err:
            raise StateBranchGitError(_mask(str(err))) from None
        if result.returncode != 0:
            raise _git_error(args, result)
        return result.raw

    def _argv(self, args: Sequence[str]) -> list[str]:
        return [
            "-C",
            str(self.repo),
            *IDENTITY,
            # commit-tree would otherwise honour a user's commit.gpgSign and prompt for a key.
            "-c",
            "commit.gpgSign=false",
            *args,
        ]


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
        from app.cycle.schedule import card_batches, card_key  # noqa: PLC0415

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


def _git_error(args: Sequence[str], result: GitResult) -> StateBranchGitError:
    stderr = _mask(result.stderr.strip()) or "(no output)"
    return StateBranchGitError(
        f"git {' '.join(_mask(a) for a in args[:3])} failed (exit {result.returncode}): {stderr}"
    )


def _mask(text: str) -> str:
    """Hide the `user:secret@` part of any URL git printed."""
    return _CREDENTIAL_IN_URL.sub(r"\g<scheme>***@", text)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Replace `path` with `payload` via a temp file in the same directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
