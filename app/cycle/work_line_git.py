"""`GitWorkTree`: the git side of a plain batch's work line and PR group branches.

The engine (`app/engine/work_line.py`) decides which commit belongs to which change and which group;
this class only runs git, through the product's one runner (`hosts.git.run_git`), in plumbing
that never moves the checkout's HEAD or branch:

- a snapshot reads the previous snapshot's tree into a throwaway index (`GIT_INDEX_FILE`),
  `git add --all` the working tree into it (the project's `.gitignore` applies; pairbot's own
  run-state is excluded), and commits the tree on the work line `pair-work/<batch>`;
- a group branch is built on its base by applying each recorded delta
  (`git diff --binary parent commit | git apply --cached`) to a throwaway index, one commit per
  change, with the identity and dates of the change's last snapshot, so the same work always
  builds the same SHAs and a re-run after a crash pushes nothing new;
- on a checkout that never held the recorded work (a fresh Actions runner), `resume` fetches the
  work line from the remote and checks its tree out, so the next agent continues from it.

When `push` is given (the Action), every snapshot pushes the work line before the step ends:
nothing a step made is left only in a runner's working tree.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.cycle.worktree import exclude_agent_command_files
from app.engine.work_line import GroupBuild, Snapshot
from app.errors import OperatorError
from hosts.git import GitError, GitResult, run_git

IDENTITY = {"name": "pairbot", "email": "pairbot@users.noreply.invalid"}
# pairbot's own files in the checkout: run-state, the App's store, the Action's owed reactions
# (action/acks.py). Never part of the work.
RUN_STATE = (
    ".pair/batches/*/run/*",
    ".pair/changes/*/.run/*",
    ".pair/app/*",
    ".pair/acks.json",
    ".pair/acks.json.tmp",
)
_TIMEOUT_S = 120.0


class WorkGitError(OperatorError):
    """git failed on the work line or a group branch; the PR step reports it as its blocker."""


@dataclass(frozen=True)
class GitWorkTree:
    """Work line and group branches of the checkout at `root`.

    `remote` (a remote's name or a repository path) is where `resume` fetches the work line
    from; `push`, when given, publishes the work line after each snapshot.
    """

    root: Path
    remote: str | None = None
    push: Callable[[str], Awaitable[object]] | None = None

    def _git(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        binary: bool = False,
        check: bool = True,
    ) -> GitResult:
        try:
            return run_git(
                args,
                cwd=self.root,
                env=env,
                stdin=stdin,
                binary=binary,
                check=check,
                timeout_s=_TIMEOUT_S,
            )
        except GitError as err:
            raise WorkGitError(str(err)) from None

    def _resolve(self, ref: str) -> str | None:
        found = self._git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return found.stdout.strip() or None

    def _identity(self, dates_of: str | None) -> dict[str, str]:
        env = {
            "GIT_AUTHOR_NAME": IDENTITY["name"],
            "GIT_AUTHOR_EMAIL": IDENTITY["email"],
            "GIT_COMMITTER_NAME": IDENTITY["name"],
            "GIT_COMMITTER_EMAIL": IDENTITY["email"],
        }
        if dates_of is not None:
            stamp = self._git("log", "-1", "--format=%ad", "--date=raw", dates_of).stdout.strip()
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = stamp
        return env

    async def resume(self, branch: str, last: str) -> bool:
        """Restore the work up to `last` when this checkout never held it."""
        # Every snapshot moves the local work branch, so a checkout whose branch is at `last`
        # (or past it: a snapshot a crash kept from the journal) made that work itself, and its
        # working tree holds it. A clone (a fresh runner) has at most a remote-tracking copy.
        local = self._resolve(f"refs/heads/{branch}")
        if local is not None and (
            local == last or self._git("merge-base", "--is-ancestor", last, local, check=False).ok
        ):
            return False
        if self._resolve(last) is None and self.remote is None:
            raise WorkGitError(
                f"the batch's recorded work {last[:12]} is not in {self.root} and there is no "
                "remote to fetch it from"
            )
        private = f"refs/pairbot/work/{branch}"
        if self._resolve(last) is None and self.remote is not None:
            refspec = f"+refs/heads/{branch}:{private}"
            self._git("fetch", "--quiet", "--no-tags", "--refmap=", self.remote, refspec)
        if self._resolve(last) is None:
            raise WorkGitError(f"the work line {branch} on {self.remote} lacks {last[:12]}")
        # A two-tree read-tree moves index and working tree from HEAD to the work's tree,
        # deletions included, and refuses to overwrite a local edit.
        self._git("read-tree", "-m", "-u", "HEAD", last)
        self._git("update-ref", f"refs/heads/{branch}", last)
        return True

    async def snapshot(self, branch: str, parent: str | None, message: str) -> Snapshot | None:
        """Commit the working tree after `parent` (None: HEAD) on `branch`."""
        inside = self._git("rev-parse", "--is-inside-work-tree", check=False)
        if inside.stdout.strip() != "true":
            return None
        start = parent or self._resolve("HEAD")
        with tempfile.TemporaryDirectory(prefix="pair-work-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if start is not None:
                self._git("read-tree", start, env=index)
            exclude_agent_command_files(self.root)  # pairbot's own, never the work's
            # Add everything, then put the run-state back as `start` had it: git refuses an
            # `:(exclude)` pathspec that names an ignored directory (exit 1, "paths are
            # ignored"), as `pairbot init`'s `app/` is once the App has created `.pair/app`.
            self._git("add", "--all", "--", ".", env=index)
            if start is not None:
                self._git("reset", "-q", start, "--", *RUN_STATE, env=index)
            else:
                self._git(
                    "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *RUN_STATE, env=index
                )
            tree = self._git("write-tree", env=index).stdout.strip()
        if start is not None and tree == self._resolve(f"{start}^{{tree}}"):
            return Snapshot(commit=start, parent=start, files=())
        parents = ["-p", start] if start is not None else []
        commit = self._git(
            "commit-tree", tree, *parents, "-m", message, env=self._identity(None)
        ).stdout.strip()
        self._git("update-ref", f"refs/heads/{branch}", commit)
        files: tuple[str, ...] = ()
        if start is not None:
            listed = self._git("diff-tree", "-r", "-z", "--name-only", start, commit)
            files = tuple(name for name in listed.stdout.split("\0") if name)
        if self.push is not None:
            await self.push(branch)
        return Snapshot(commit=commit, parent=start, files=files)

    async def build_stack(self, batch: str, groups: Sequence[GroupBuild]) -> list[str]:
        """Build every group's branch on the previous one; returns the head SHAs."""
        heads: list[str] = []
        onto: str | None = None
        for group in groups:
            if onto is None:
                onto = self._base(group.base_branch)
            for work in group.changes:
                onto = self._commit_change(batch, onto, work.change, work.deltas)
            self._git("update-ref", f"refs/heads/{group.head_branch}", onto)
            heads.append(onto)
        return heads

    def _base(self, branch: str) -> str:
        for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}", branch):
            found = self._resolve(ref)
            if found is not None:
                return found
        raise WorkGitError(f"base branch {branch!r} does not exist in {self.root}")

    def _commit_change(
        self, batch: str, onto: str, change: str, deltas: Sequence[tuple[str, str]]
    ) -> str:
        with tempfile.TemporaryDirectory(prefix="pair-group-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self._git("read-tree", onto, env=index)
            for parent, commit in deltas:
                patch = self._git(
                    "diff", "--binary", "--full-index", "--no-renames", parent, commit, binary=True
                ).raw
                if not patch:
                    continue
                applied = self._git("apply", "--cached", "-", env=index, stdin=patch, check=False)
                if not applied.ok:
                    raise WorkGitError(
                        f"change {change}'s work ({commit[:12]}) does not apply on "
                        f"{onto[:12]}: {applied.stderr.strip()}"
                    )
            tree = self._git("write-tree", env=index).stdout.strip()
        if tree == self._resolve(f"{onto}^{{tree}}"):
            return onto  # the change's steps cancelled out: nothing to commit
        message = f"{batch}: {change}\n\nThe work of change {change} in batch {batch}.\n"
        return self._git(
            "commit-tree", tree, "-p", onto, "-m", message, env=self._identity(deltas[-1][1])
        ).stdout.strip()

    async def discard(self, branch: str, snap: Snapshot) -> None:
        """Undo a refused step: the working tree back to `snap.parent` and `branch` with it.

        A throwaway index holding the refused snapshot lets `read-tree --reset -u` move the
        files from its tree to the parent's (files the step added are removed, edited and
        deleted ones restored) without touching the checkout's own index or HEAD.
        """
        if snap.parent is None or snap.commit == snap.parent:
            return
        with tempfile.TemporaryDirectory(prefix="pair-discard-") as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self._git("read-tree", snap.commit, env=index)
            self._git("read-tree", "--reset", "-u", snap.parent, env=index)
        self._git("update-ref", f"refs/heads/{branch}", snap.parent, snap.commit)
