"""The local forge's storage: locked, atomic JSON documents and the bare git repository.

`Store` is what `LocalHost` and `LocalForge` share: the directory layout (see `hosts.local`),
the `flock` around every read-modify-write, documents written whole and `os.replace`d, and git
on `repo.git` through `hosts.git` (no inherited `GIT_DIR`, no prompt). The `_…Rec` typed dicts
are the documents' shapes; the `_…` helpers turn them into models. Both are package-private.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypedDict, cast, get_args

from hosts.base import Reaction
from hosts.errors import Conflict, HostUnavailable, NotFound
from hosts.git import GitError, GitResult, run_git
from hosts.models import (
    Author,
    Card,
    Comment,
    MergeMethod,
    Permission,
    ReviewState,
    Target,
)

DEFAULT_IDENTITY = Author(login="pairbot", id="local:pairbot", is_bot=True)
DEFAULT_HUMAN = Author(login="maintainer", id="local:maintainer")
DEFAULT_BRANCH = "main"
GIT_TIMEOUT_S = 60.0
# How often a publication waiting for another process's lock tries again (it holds for ms).
LOCK_POLL_S = 0.005

_PERMISSIONS: frozenset[str] = frozenset(get_args(Permission))
_REVIEW_STATES: frozenset[str] = frozenset(get_args(ReviewState))
_MERGE_METHODS: frozenset[str] = frozenset(get_args(MergeMethod))
_REACTIONS: frozenset[str] = frozenset(get_args(Reaction))


class _AuthorRec(TypedDict):
    login: str
    id: str
    is_bot: bool


class _CardRec(TypedDict):
    number: int
    title: str
    body: str
    labels: list[str]
    assignees: list[str]
    state: str
    author: _AuthorRec
    created_at: str


class _PullRec(TypedDict):
    number: int
    head_branch: str
    base_branch: str
    head_sha: str
    state: str
    draft: bool
    title: str
    body: str
    labels: list[str]
    assignees: list[str]
    author: _AuthorRec
    created_at: str
    merge_sha: str | None


class _CommentRec(TypedDict):
    id: str
    body: str
    author: _AuthorRec
    created_at: str
    updated_at: str


class _StatusRec(TypedDict):
    state: str
    description: str
    context: str


class _CheckRec(TypedDict):
    name: str
    state: str
    url: str
    required: bool
    summary: str


class _ReactionRec(TypedDict):
    comment_id: str | None
    content: str
    user: _AuthorRec


def _now() -> str:
    """A fixed-width UTC timestamp, so text order is time order."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _author_rec(author: Author) -> _AuthorRec:
    return {"login": author.login, "id": author.id, "is_bot": author.is_bot}


def _author(rec: _AuthorRec) -> Author:
    return Author(login=rec["login"], id=rec["id"], is_bot=rec["is_bot"])


def _comment(rec: _CommentRec) -> Comment:
    return Comment(
        id=rec["id"],
        body=rec["body"],
        author=_author(rec["author"]),
        created_at=rec["created_at"],
        updated_at=rec.get("updated_at", "") or rec["created_at"],
    )


def _card(rec: _CardRec) -> Card:
    state: Literal["open", "closed"] = "closed" if rec["state"] == "closed" else "open"
    return Card(
        number=rec["number"],
        title=rec["title"],
        body=rec["body"],
        labels=tuple(rec["labels"]),
        assignees=tuple(rec["assignees"]),
        state=state,
        author=_author(rec["author"]) if rec.get("author") else None,
    )


class Store:
    """The forge directory: locked, atomic JSON documents and the bare repository."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repo.git"

    # -- files ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the forge's exclusive lock. Never nested: a second flock on another descriptor
        of the same file blocks even in the same process, so callers take it once, at the top.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "forge.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.asynccontextmanager
    async def publishing(self, number: int) -> AsyncIterator[None]:
        """Hold `locks/<number>.lock`: one publication (a comment upsert, a label change) on
        card or pull `number` at a time, across processes.

        A publication is several locked steps (read, write, read back), so `locked()` cannot
        span it. This lock is taken without blocking and polled with an async sleep: a
        blocking `flock` would stall the event loop, and with it another instance in the same
        process that holds the lock. Lock files are never removed (removing one while another
        process waits on it would let a third take a fresh one): one per card or pull.
        """
        path = self.root / "locks" / f"{number}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(LOCK_POLL_S)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def read(self, rel: str) -> Any:
        """The JSON document at `rel`, or None when there is none."""
        try:
            text = (self.root / rel).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise HostUnavailable(f"local forge: {rel} is not valid JSON ({exc.msg})") from None

    def write(self, rel: str, data: object) -> None:
        """Replace the document at `rel` atomically (temp file in the same dir, then replace)."""
        payload = (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def ensure(self) -> None:
        """Create the layout and the bare repository if they are missing (idempotent)."""
        with self.locked():
            if not (self.repo / "HEAD").exists():
                self.git("init", "--bare", "--quiet", f"--initial-branch={DEFAULT_BRANCH}")

    def next_id(self, key: Literal["number", "comment"]) -> int:
        """The next card/pull number or comment id (caller holds the lock)."""
        counters = cast(dict[str, int], self.read("counters.json") or {})
        value = counters.get(key, 0) + 1
        counters[key] = value
        self.write("counters.json", counters)
        return value

    # -- records --------------------------------------------------------------------------------

    def card(self, number: int) -> _CardRec:
        rec = self.read(f"cards/{number}.json")
        if rec is None:
            raise NotFound(f"card #{number} does not exist")
        return cast(_CardRec, rec)

    def pull(self, number: int) -> _PullRec:
        rec = self.read(f"pulls/{number}.json")
        if rec is None:
            raise NotFound(f"pull request #{number} does not exist")
        return cast(_PullRec, rec)

    def target(self, target: Target) -> _CardRec | _PullRec:
        """The card or pull a target names (NotFound when it names the other kind)."""
        return self.card(target.number) if target.kind == "card" else self.pull(target.number)

    def save_target(self, target: Target, rec: _CardRec | _PullRec) -> None:
        self.write(f"{target.kind}s/{target.number}.json", rec)

    def comments(self, number: int) -> list[_CommentRec]:
        return cast(list[_CommentRec], self.read(f"comments/{number}.json") or [])

    def add_comment(self, number: int, author: Author, body: str) -> _CommentRec:
        """Append a comment to card or pull `number` (caller holds the lock)."""
        comments = self.comments(number)
        now = _now()
        rec: _CommentRec = {
            "id": str(self.next_id("comment")),
            "body": body,
            "author": _author_rec(author),
            "created_at": now,
            "updated_at": now,
        }
        comments.append(rec)
        self.write(f"comments/{number}.json", comments)
        return rec

    def edit_comment(self, number: int, comment_id: str, body: str) -> None:
        """Replace a comment's body (caller holds the lock)."""
        comments = self.comments(number)
        for rec in comments:
            if rec["id"] == comment_id:
                rec["body"] = body
                rec["updated_at"] = _now()
                self.write(f"comments/{number}.json", comments)
                return
        raise NotFound(f"comment {comment_id} is not on #{number}")

    def new_pull(
        self,
        author: Author,
        head: str,
        base: str,
        title: str,
        body: str,
        *,
        head_sha: str,
        draft: bool,
    ) -> _PullRec:
        """Open a pull record (caller holds the lock and has read both branches: `head_sha` is
        the head branch's commit)."""
        rec: _PullRec = {
            "number": self.next_id("number"),
            "head_branch": head,
            "base_branch": base,
            "head_sha": head_sha,
            "state": "open",
            "draft": draft,
            "title": title,
            "body": body,
            "labels": [],
            "assignees": [],
            "author": _author_rec(author),
            "created_at": _now(),
            "merge_sha": None,
        }
        self.write(f"pulls/{rec['number']}.json", rec)
        return rec

    def open_pull_for(self, head: str) -> _PullRec | None:
        """The open pull whose head is `head`, if any."""
        pulls = self.root / "pulls"
        if not pulls.is_dir():
            return None
        for path in sorted(pulls.glob("*.json"), key=lambda p: int(p.stem)):
            rec = self.pull(int(path.stem))
            if rec["state"] == "open" and rec["head_branch"] == head:
                return rec
        return None

    # -- git ------------------------------------------------------------------------------------

    def git(
        self,
        *args: str,
        cwd: Path | None = None,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> GitResult:
        """Run git on the bare repository (or in `cwd` when given), through `hosts.git`."""
        argv = [*(() if cwd else (f"--git-dir={self.repo}",)), *args]
        try:
            return run_git(
                argv, cwd=cwd, stdin=stdin, env=env, timeout_s=GIT_TIMEOUT_S, check=check
            )
        except GitError as exc:
            detail = exc.stderr or str(exc)
            raise HostUnavailable(f"local forge: git {args[0]} failed: {detail}") from None

    def branch_sha(self, branch: str) -> str | None:
        """The commit `branch` points at in the bare repository, or None."""
        ref = f"refs/heads/{branch}^{{commit}}"
        done = self.git("rev-parse", "--verify", "--quiet", ref, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def require_branch(self, branch: str) -> str:
        sha = self.branch_sha(branch) if _branch_ok(branch) else None
        if sha is None:
            raise NotFound(f"branch {branch!r} does not exist on the local forge")
        return sha

    def commit_sha(self, rev: str) -> str | None:
        """The full SHA of commit `rev`, or None when the repository has no such commit."""
        if not rev or rev.startswith("-"):
            return None
        done = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def live_head(self, rec: _PullRec) -> str:
        """An open pull's head is its branch now; a closed one keeps the head it had."""
        if rec["state"] == "open":
            return self.branch_sha(rec["head_branch"]) or rec["head_sha"]
        return rec["head_sha"]

    def commit(
        self, tree: str, parents: Sequence[str], message: str, author: Author
    ) -> str:  # the one place commits are made, so the identity is always set
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        done = self.git(*args, "-F", "-", stdin=message, env=_git_identity(author))
        return done.stdout.strip()

    def move_branch(self, branch: str, new: str, old: str | None) -> None:
        """Compare-and-swap `branch` from `old` (None: must not exist) to `new`."""
        done = self.git(
            "update-ref", f"refs/heads/{branch}", new, old or "0" * len(new), check=False
        )
        if done.returncode != 0:
            raise Conflict(f"branch {branch!r} moved meanwhile")


def _branch_ok(branch: str) -> bool:
    """A plain branch name git accepts (never an option, never a full ref)."""
    if not branch or branch.startswith(("-", "refs/")):
        return False
    try:
        done = run_git(
            ["check-ref-format", f"refs/heads/{branch}"], timeout_s=GIT_TIMEOUT_S, check=False
        )
    except GitError as exc:
        raise HostUnavailable(f"local forge: git check-ref-format failed: {exc}") from None
    return done.ok


def _git_identity(author: Author) -> dict[str, str]:
    email = f"{author.login}@local.invalid"
    return {
        "GIT_AUTHOR_NAME": author.login,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": author.login,
        "GIT_COMMITTER_EMAIL": email,
    }
