"""The git plumbing under the state branch: objects read and written, one fetch, one CAS push.

`StateGit` runs every git process `action.statebranch.StateBranch` needs, on `repo` and its
`remote`'s `branch`, without a work tree: the branch is fetched into a private ref
(`refs/pairbot/state/<remote>/<branch>`), blobs are read with `cat-file`, and a commit is built
with `hash-object --no-filters` → `update-index` on a throwaway index file (`GIT_INDEX_FILE` in
a temp dir) → `write-tree` → `commit-tree`, then pushed by sha with
`--force-with-lease=<ref>:<sha>` (an empty sha: "the branch must not exist yet") and
`--no-verify`. Git objects never change, so a commit's tree listing, a blob read or written
and the tree object of a set of entries are kept for the tick.

Git runs with `GIT_TERMINAL_PROMPT=0` (`hosts.git`) and a fixed identity, and any
`scheme://user:secret@` in git's stderr is masked before it reaches an error message
(`StateBranchGitError`, an operator's error).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.errors import OperatorError
from hosts.git import GitError, GitResult, run_git

IDENTITY = ("-c", "user.name=pairbot", "-c", "user.email=pairbot@users.noreply.invalid")
# Network operations get a bound: a hung remote must not hold a runner until the job timeout.
NETWORK_TIMEOUT_S = 120.0
_CREDENTIAL_IN_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


class StateBranchGitError(OperatorError):
    """A git command on the state branch failed for a reason other than a lost race."""


@dataclass(frozen=True)
class Entry:
    """One file of a state-branch tree: its mode and its blob."""

    mode: str
    sha: str


Tree = dict[str, Entry]


class StateGit:
    """The git processes on `repo` for `remote`'s `branch`, with what the tick already read."""

    def __init__(self, repo: Path, remote: str, branch: str) -> None:
        self.repo = repo
        self.remote = remote
        self.branch = branch
        self.remote_ref = f"refs/heads/{branch}"
        self.local_ref = f"refs/pairbot/state/{remote}/{branch}"
        # Git objects never change, so what was read or written once is kept for the tick:
        # a commit's flattened tree, a blob's bytes, and the tree object of a set of entries.
        self._trees: dict[str, Tree] = {}
        self._blobs: dict[str, bytes] = {}
        self._tree_ids: dict[frozenset[tuple[str, Entry]], str] = {}

    def fetch(self) -> str | None:
        """Fetch the branch into the private ref; its sha, or None when the remote lacks it."""
        fetch = self.run(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-write-fetch-head",
            self.remote,
            f"+{self.remote_ref}:{self.local_ref}",
            timeout=NETWORK_TIMEOUT_S,
        )
        if fetch.returncode == 0:
            # The commit and its root tree in one process; the tree id lets a commit of the
            # same entries (the unlock of a tick that changed nothing) skip building it again.
            tip, tree = self.git(
                "rev-parse",
                f"{self.local_ref}^{{commit}}",
                f"{self.local_ref}^{{tree}}",
            ).split()
            if tip not in self._trees:
                self._tree_ids[frozenset(self.tree(tip).items())] = tree
            return tip
        # `ls-remote --exit-code` answers 2 exactly when the remote has no such ref.
        reachable, current = self.remote_tip()
        if not reachable or current is not None:
            raise git_error(("fetch", self.remote, self.remote_ref), fetch)
        self.git("update-ref", "-d", self.local_ref)
        return None

    def push(self, commit: str, expected: str | None) -> bool:
        """Compare-and-swap the remote branch from `expected` to `commit`; False when rejected."""
        result = self.run(
            "push",
            "--no-verify",
            f"--force-with-lease={self.remote_ref}:{expected or ''}",
            self.remote,
            f"{commit}:{self.remote_ref}",
            timeout=NETWORK_TIMEOUT_S,
        )
        if result.returncode != 0:
            # Whatever git said ("[rejected] (stale info)", or "[remote rejected]" when another
            # push won between the lease check and the ref update, or a dropped connection),
            # the remote's current tip tells what happened.
            reachable, current = self.remote_tip()
            if not reachable or current == expected:
                raise git_error(("push", self.remote, self.remote_ref), result)
            if current != commit:
                return False  # someone else moved the branch: we lost the race
            # Our commit is there: the push landed and only its report was lost.
        # The private ref is not moved here: the next fetch force-updates it, and the commit
        # is reachable from the remote branch (one git process less per push).
        return True

    def remote_tip(self) -> tuple[bool, str | None]:
        """(reachable, the remote branch's sha or None when it does not exist)."""
        probe = self.run(
            "ls-remote",
            "--exit-code",
            self.remote,
            self.remote_ref,
            timeout=NETWORK_TIMEOUT_S,
        )
        if probe.returncode not in (0, 2):
            return False, None
        for line in probe.stdout.splitlines():
            sha, _, ref = line.partition("\t")
            if ref == self.remote_ref:
                return True, sha
        return True, None

    def tree(self, commit: str) -> Tree:
        known = self._trees.get(commit)
        if known is not None:
            return dict(known)
        out = self.git("ls-tree", "-r", "-z", "--full-tree", commit)
        entries: dict[str, Entry] = {}
        for record in out.split("\0"):
            if not record:
                continue
            meta, path = record.split("\t", 1)
            mode, kind, sha = meta.split(" ")
            if kind == "blob":
                entries[path] = Entry(mode, sha)
        self._trees[commit] = entries
        return dict(entries)

    def read_blobs(self, shas: Sequence[str]) -> dict[str, bytes]:
        blobs = {sha: self._blobs[sha] for sha in shas if sha in self._blobs}
        unique = sorted(set(shas) - blobs.keys())
        if not unique:
            return blobs
        out = self.run_bytes("cat-file", "--batch", stdin="".join(f"{s}\n" for s in unique))
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

    def hash_bytes(self, payload: bytes) -> str:
        """Write `payload` as a blob; it is kept for the tick (`push` and `release` read the
        lock back from here)."""
        sha = self.run_bytes("hash-object", "-w", "--stdin", stdin=payload).decode().strip()
        self._blobs[sha] = payload
        return sha

    def hash_files(self, paths: Sequence[Path]) -> list[str]:
        if not paths:
            return []
        # --no-filters: the project's .gitattributes (eol, clean filters) must not alter state.
        out = self.git(
            "hash-object",
            "-w",
            "--no-filters",
            "--stdin-paths",
            stdin="".join(f"{path.resolve()}\n" for path in paths),
        )
        return out.split()

    def commit(self, files: Mapping[str, Entry], parent: str | None, message: str) -> str:
        """A commit of exactly `files` on `parent` (None: an orphan), built on a throwaway index
        (or on the tree object of the same entries, when this tick has seen or written one)."""
        key = frozenset(files.items())
        tree = self._tree_ids.get(key)
        if tree is None:
            with tempfile.TemporaryDirectory(prefix="pairbot-state-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                info = "".join(f"{e.mode} {e.sha}\t{path}\0" for path, e in sorted(files.items()))
                self.git("update-index", "--add", "-z", "--index-info", stdin=info, env=env)
                tree = self._tree_ids[key] = self.git("write-tree", env=env).strip()
        parents = ("-p", parent) if parent is not None else ()
        commit = self.git("commit-tree", tree, *parents, "-m", message).strip()
        self._trees[commit] = dict(files)
        return commit

    def git(
        self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        result = self.run(*args, stdin=stdin, env=env)
        if result.returncode != 0:
            raise git_error(args, result)
        return result.stdout

    def run(
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

    def run_bytes(self, *args: str, stdin: str | bytes) -> bytes:
        try:
            result = run_git(
                self._argv(args), stdin=stdin, timeout_s=None, check=False, binary=True
            )
        except GitError as err:
            raise StateBranchGitError(_mask(str(err))) from None
        if result.returncode != 0:
            raise git_error(args, result)
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


def git_error(args: Sequence[str], result: GitResult) -> StateBranchGitError:
    stderr = _mask(result.stderr.strip()) or "(no output)"
    return StateBranchGitError(
        f"git {' '.join(_mask(a) for a in args[:3])} failed (exit {result.returncode}): {stderr}"
    )


def _mask(text: str) -> str:
    """Hide the `user:secret@` part of any URL git printed."""
    return _CREDENTIAL_IN_URL.sub(r"\g<scheme>***@", text)
