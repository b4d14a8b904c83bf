"""The local forge: a code host and PM tool kept in one directory, and its `Host` adapter.

It is the reference implementation of `hosts.base.Host`, pairbot's embedded default (try pairbot
with no account) and the fast target of end-to-end tests. Its layout:

    <root>/
      repo.git/             bare git repository: every branch
      forge.lock            flock'ed around every read-modify-write
      counters.json         {"number": n, "comment": n}; cards and pulls share one number space,
                            as issues and pull requests do on GitHub
      cards/<n>.json        title, body, labels, assignees, state, author
      pulls/<n>.json        head and base branch, head SHA (live from repo.git while open),
                            state, draft, labels, merge commit
      comments/<n>.json     the comments on card or pull <n>, oldest first
      statuses/<n>.json     {"<head sha>": {state, description, context}} for pull <n>
      reactions/<n>.json    reactions on card or pull <n> and on its comments
      collaborators.json    {"<login>": "<permission>"}; a login not listed has "none"

Every document is written whole to a temp file in its directory and `os.replace`d, so a reader
never sees half a file; every read-modify-write holds an exclusive `fcntl.flock` on `forge.lock`,
so two processes (two pairbot ticks, a test and pairbot) never lose each other's update. That lock
waits rather than skips (CONVENTIONS 3 is about the engine's step lock): it stands in for the
server a real forge serialises requests on, and holds for milliseconds.

Two classes, on purpose apart:

    LocalHost    the `Host` operations — what pairbot does. Protocol methods are `async` but do
                 their file and git work synchronously: each is milliseconds of local I/O.
    LocalForge   forge administration — what the world around pairbot does: a human opens a card,
                 comments, pushes to a pull's branch, grants access. Tests and end-to-end scenarios
                 use it; pairbot never does.

Merging happens in the bare repository without a checkout: `merge` is a real two-parent merge
commit and `squash` one commit on the base, both built with `git merge-tree --write-tree` (git
2.38+); `rebase` replays the pull's commits onto the base in a temporary worktree. The base
branch moves with a compare-and-swap `update-ref`, and the commit merged is the pinned `head_sha`,
never whatever the branch points at by then.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast, get_args

from hosts.base import Reaction
from hosts.cardhash import card_hash
from hosts.decisions import scope_decision_in
from hosts.errors import Conflict, HostUnavailable, NotFound
from hosts.labels import PrState, plan_state_labels
from hosts.markers import plan_upsert
from hosts.models import (
    Author,
    Card,
    Comment,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    PullState,
    ReviewState,
    ReviewStatus,
    Target,
    Upserted,
    UpsertResult,
)

if TYPE_CHECKING:
    from hosts.base import Host

__all__ = [
    "DEFAULT_HUMAN",
    "DEFAULT_IDENTITY",
    "LocalForge",
    "LocalHost",
]

DEFAULT_IDENTITY = Author(login="pairbot", id="local:pairbot", is_bot=True)
DEFAULT_HUMAN = Author(login="maintainer", id="local:maintainer")
DEFAULT_BRANCH = "main"
GIT_TIMEOUT_S = 60.0

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
        id=rec["id"], body=rec["body"], author=_author(rec["author"]), created_at=rec["created_at"]
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
    )


class _Store:
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
        self, author: Author, head: str, base: str, title: str, body: str, *, draft: bool
    ) -> _PullRec:
        """Open a pull record (caller holds the lock and has checked both branches)."""
        rec: _PullRec = {
            "number": self.next_id("number"),
            "head_branch": head,
            "base_branch": base,
            "head_sha": self.require_branch(head),
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
    ) -> subprocess.CompletedProcess[str]:
        """Run git on the bare repository (or in `cwd` when given)."""
        argv = ["git", *(() if cwd else (f"--git-dir={self.repo}",)), *args]
        try:
            done = subprocess.run(
                argv,
                cwd=cwd,
                input=stdin,
                env={**os.environ, **(env or {})},
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HostUnavailable(f"local forge: git {args[0]} failed: {exc}") from None
        if check and done.returncode != 0:
            raise HostUnavailable(f"local forge: git {args[0]} failed: {done.stderr.strip()}")
        return done

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
        done = subprocess.run(
            ["git", "check-ref-format", f"refs/heads/{branch}"],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostUnavailable(f"local forge: git check-ref-format failed: {exc}") from None
    return done.returncode == 0


def _git_identity(author: Author) -> dict[str, str]:
    email = f"{author.login}@local.invalid"
    return {
        "GIT_AUTHOR_NAME": author.login,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": author.login,
        "GIT_COMMITTER_EMAIL": email,
    }


class LocalHost:
    """`Host` over a local forge directory (created on first use)."""

    name = "local"

    def __init__(self, root: Path, *, identity: Author | None = None) -> None:
        self.root = Path(root)
        self._identity = identity or DEFAULT_IDENTITY
        self._store = _Store(self.root)
        self._store.ensure()
        self.write_count = 0  # mutations this instance made (tests: "unchanged means no write")

    @property
    def repo(self) -> Path:
        """The forge's bare repository: where card branches are pushed and fetched from."""
        return self._store.repo

    def _wrote(self) -> None:
        self.write_count += 1

    async def identity(self) -> Author:
        return self._identity

    # -- cards ----------------------------------------------------------------------------------

    async def get_card(self, number: int) -> Card:
        return _card(self._store.card(number))

    async def card_hash(self, number: int) -> str:
        rec = self._store.card(number)
        return card_hash(rec["title"], rec["body"])

    async def create_card(self, title: str, body: str, labels: tuple[str, ...] = ()) -> Card:
        with self._store.locked():
            rec: _CardRec = {
                "number": self._store.next_id("number"),
                "title": title,
                "body": body,
                "labels": list(dict.fromkeys(labels)),
                "assignees": [],
                "state": "open",
                "author": _author_rec(self._identity),
                "created_at": _now(),
            }
            self._store.write(f"cards/{rec['number']}.json", rec)
            self._wrote()
        return _card(rec)

    async def update_card(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> Card:
        with self._store.locked():
            rec = self._store.card(number)
            new = (
                rec["title"] if title is None else title,
                rec["body"] if body is None else body,
            )
            if new != (rec["title"], rec["body"]):  # an edit to the same text writes nothing
                rec["title"], rec["body"] = new
                self._store.write(f"cards/{number}.json", rec)
                self._wrote()
        return _card(rec)

    # -- comments -------------------------------------------------------------------------------

    async def list_comments(self, target: Target) -> list[Comment]:
        self._store.target(target)
        return [_comment(rec) for rec in self._store.comments(target.number)]

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        store = self._store
        with store.locked():
            store.target(target)
            comments = [_comment(rec) for rec in store.comments(target.number)]
            plan = plan_upsert(comments, marker, body, self._identity)
            if plan.action is Upserted.UNCHANGED:
                keeper = next(c for c in comments if c.id == plan.comment_id)
                return UpsertResult(Upserted.UNCHANGED, keeper, plan.duplicates)
            if plan.action is Upserted.CREATED:
                comment_id = store.add_comment(target.number, self._identity, plan.body)["id"]
            else:
                comment_id = cast(str, plan.comment_id)
                store.edit_comment(target.number, comment_id, plan.body)
            self._wrote()
            # Read back, as every adapter does: the write counts only once it is there.
            back = next(
                (_comment(r) for r in store.comments(target.number) if r["id"] == comment_id), None
            )
        if back is None or back.body != plan.body:
            raise HostUnavailable(f"comment {comment_id} on #{target.number} did not read back")
        return UpsertResult(plan.action, back, plan.duplicates)

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        if reaction not in _REACTIONS:
            raise ValueError(f"{reaction!r} is not a reaction pairbot uses")
        store = self._store
        with store.locked():
            store.target(target)
            if comment_id is not None and all(
                rec["id"] != comment_id for rec in store.comments(target.number)
            ):
                raise NotFound(f"comment {comment_id} is not on #{target.number}")
            path = f"reactions/{target.number}.json"
            reactions = cast(list[_ReactionRec], store.read(path) or [])
            rec: _ReactionRec = {
                "comment_id": comment_id,
                "content": reaction,
                "user": _author_rec(self._identity),
            }
            if rec not in reactions:  # one reaction of a kind per user, as on GitHub
                store.write(path, [*reactions, rec])
                self._wrote()

    # -- people ---------------------------------------------------------------------------------

    async def permission(self, user: str) -> Permission:
        granted = cast(dict[str, str], self._store.read("collaborators.json") or {})
        # Logins are case-insensitive, as on GitHub.
        level = next((p for u, p in granted.items() if u.casefold() == user.casefold()), "none")
        if level not in _PERMISSIONS:
            raise HostUnavailable(
                f"local forge: collaborators.json gives {user!r} the unknown permission {level!r}"
            )
        return cast(Permission, level)

    # -- code -----------------------------------------------------------------------------------

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        store = self._store
        if not _branch_ok(branch):
            raise NotFound(f"{branch!r} is not a branch name")
        local = store.git(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo_dir, check=False
        )
        if local.returncode != 0:
            raise NotFound(f"branch {branch!r} does not exist in {repo_dir}")
        before = store.branch_sha(branch)
        ref = f"refs/heads/{branch}"
        args = ["push", "--quiet", *(["--force"] if force else []), str(store.repo), f"{ref}:{ref}"]
        done = store.git(*args, cwd=repo_dir, check=False)
        if done.returncode != 0:
            if "rejected" in done.stderr or "fetch first" in done.stderr:
                raise Conflict(f"push of {branch!r} rejected: the forge has commits it lacks")
            raise HostUnavailable(f"local forge: push of {branch!r} failed: {done.stderr.strip()}")
        sha = store.require_branch(branch)
        if sha != before:
            self._wrote()
        return sha

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        store = self._store
        with store.locked():
            store.require_branch(head)
            store.require_branch(base)
            if head == base:
                raise Conflict(f"a pull request needs two branches; head and base are {head!r}")
            # One open pull per head branch: the same head (whatever the base) returns it.
            rec = store.open_pull_for(head)
            if rec is None:
                rec = store.new_pull(self._identity, head, base, title, body, draft=draft)
                self._wrote()
        return self._pull(rec)

    async def get_pull(self, number: int) -> Pull:
        return self._pull(self._store.pull(number))

    def _pull(self, rec: _PullRec) -> Pull:
        store = self._store
        head = store.live_head(rec)
        state = cast(PullState, rec["state"])
        mergeable: bool | None = None
        base = store.branch_sha(rec["base_branch"])
        if state == "open" and base is not None:
            probe = store.git(
                "merge-tree", "--write-tree", "--no-messages", base, head, check=False
            )
            mergeable = {0: True, 1: False}.get(probe.returncode)
        return Pull(
            number=rec["number"],
            head_branch=rec["head_branch"],
            head_sha=head,
            base_branch=rec["base_branch"],
            state=state,
            draft=rec["draft"],
            mergeable=mergeable,
            title=rec["title"],
            body=rec["body"],
            labels=tuple(rec["labels"]),
            assignees=tuple(rec["assignees"]),
        )

    # -- review status --------------------------------------------------------------------------

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        if state not in _REVIEW_STATES:
            raise ValueError(f"{state!r} is not a review state")
        store = self._store
        with store.locked():
            store.pull(pull)
            sha = store.commit_sha(head_sha)
            if sha is None:
                raise NotFound(f"commit {head_sha!r} does not exist on the local forge")
            path = f"statuses/{pull}.json"
            statuses = cast(dict[str, _StatusRec], store.read(path) or {})
            status = ReviewStatus(head_sha=sha, state=state, description=description)
            rec: _StatusRec = {
                "state": state,
                "description": description,
                "context": status.context,
            }
            if statuses.get(sha) != rec:  # re-setting the same status writes nothing
                statuses[sha] = rec
                store.write(path, statuses)
                self._wrote()
        return status

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        store = self._store
        store.pull(pull)
        statuses = cast(dict[str, _StatusRec], store.read(f"statuses/{pull}.json") or {})
        sha = store.commit_sha(head_sha)
        rec = statuses.get(sha) if sha else None
        if rec is None:
            return None
        return ReviewStatus(
            head_sha=cast(str, sha),
            state=cast(ReviewState, rec["state"]),
            description=rec["description"],
            context=rec["context"],
        )

    # -- labels ---------------------------------------------------------------------------------

    async def set_state_label(self, target: Target, state: PrState) -> bool:
        store = self._store
        with store.locked():
            rec = store.target(target)
            plan = plan_state_labels(rec["labels"], state)
            if plan.noop:
                return False
            kept = [lb for lb in rec["labels"] if lb not in plan.remove]
            rec["labels"] = [*kept, *plan.add]
            store.save_target(target, rec)
            self._wrote()
        return True

    # -- scope ----------------------------------------------------------------------------------

    async def read_scope_decision(
        self, pull: int, comment_ref: str | None = None
    ) -> Comment | None:
        self._store.pull(pull)
        comments = [_comment(rec) for rec in self._store.comments(pull)]
        return scope_decision_in(comments, comment_ref, identity=self._identity)

    # -- merge and close ------------------------------------------------------------------------

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        if method not in _MERGE_METHODS:
            raise ValueError(f"{method!r} is not a merge method")
        store = self._store
        with store.locked():
            rec = store.pull(pull)
            if rec["state"] == "merged" and rec.get("head_sha") == head_sha:
                # Idempotent: a resumed merge of the same reviewed head gets the first result,
                # as GitHub answers (a crash between merging and recording must not strand it).
                return MergeResult(merged=True, sha=rec.get("merge_sha"))
            if rec["state"] != "open":
                raise Conflict(f"pull request #{pull} is {rec['state']}, not open")
            head = store.live_head(rec)
            if head != head_sha:
                raise Conflict(
                    f"pull request #{pull} head is {head[:12]}, not the reviewed {head_sha[:12]}"
                )
            base_branch = rec["base_branch"]
            base = store.require_branch(base_branch)
            if method == "rebase":
                new = self._rebased(head, base)
            else:
                tree = self._merged_tree(base, head)
                if method == "merge":
                    message = f"Merge pull request #{pull} from {rec['head_branch']}\n\n"
                    message += rec["title"] + "\n"
                    new = store.commit(tree, [base, head], message, self._identity)
                else:
                    message = f"{rec['title']} (#{pull})\n"
                    new = store.commit(tree, [base], message, self._identity)
            store.move_branch(base_branch, new, base)
            # A draft is marked ready as part of the merge (GitHub needs that step too).
            rec["state"], rec["head_sha"], rec["merge_sha"] = "merged", head, new
            rec["draft"] = False
            store.write(f"pulls/{pull}.json", rec)
            self._wrote()
        return MergeResult(merged=True, sha=new)

    def _merged_tree(self, base: str, head: str) -> str:
        """The tree of `base` merged with `head`, or Conflict when they do not merge cleanly."""
        done = self._store.git(
            "merge-tree", "--write-tree", "--no-messages", base, head, check=False
        )
        if done.returncode == 1:
            raise Conflict("the pull request does not merge cleanly into its base")
        if done.returncode != 0 or not done.stdout.strip():
            raise HostUnavailable(f"local forge: git merge-tree failed: {done.stderr.strip()}")
        return done.stdout.split()[0]

    def _rebased(self, head: str, base: str) -> str:
        """`head`'s own commits replayed onto `base` in a throwaway worktree; the new tip."""
        store = self._store
        work = Path(tempfile.mkdtemp(prefix="pair-rebase-"))
        tree = work / "tree"
        try:
            store.git("worktree", "add", "--detach", "--quiet", str(tree), head)
            done = store.git(
                "rebase", "--quiet", base, cwd=tree, env=_git_identity(self._identity), check=False
            )
            if done.returncode != 0:
                store.git("rebase", "--abort", cwd=tree, check=False)
                raise Conflict("the pull request does not rebase cleanly onto its base")
            return store.git("rev-parse", "HEAD", cwd=tree).stdout.strip()
        finally:
            store.git("worktree", "remove", "--force", str(tree), check=False)
            shutil.rmtree(work, ignore_errors=True)
            store.git("worktree", "prune", check=False)

    async def close(self, target: Target) -> None:
        store = self._store
        with store.locked():
            if target.kind == "pull":
                pull = store.pull(target.number)
                if pull["state"] == "merged":
                    raise Conflict(f"pull request #{target.number} is merged; it cannot close")
                if pull["state"] == "open":
                    pull["state"], pull["head_sha"] = "closed", store.live_head(pull)
                    store.save_target(target, pull)
                    self._wrote()
                return
            card = store.card(target.number)
            if card["state"] != "closed":  # closing a closed card writes nothing
                card["state"] = "closed"
                store.save_target(target, card)
                self._wrote()


class LocalForge:
    """Forge administration: what humans and the rest of the world do on a local forge.

    Not `Host` operations — pairbot never calls these. Tests, demos and end-to-end scenarios use
    them to seed cards and pulls, to comment as someone, to push to a pull's branch and to grant
    access. Commits are made straight in the bare repository (no checkout needed).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._store = _Store(self.root)
        self._store.ensure()
        self._ticks = 0

    @property
    def repo(self) -> Path:
        """The bare repository holding every branch (a remote for `git push`/`git clone`)."""
        return self._store.repo

    def host(self, identity: Author | None = None) -> LocalHost:
        """pairbot's adapter on this forge."""
        return LocalHost(self.root, identity=identity)

    def grant(self, login: str, permission: Permission) -> None:
        """Give `login` a permission level on the repository ("none" revokes)."""
        if permission not in _PERMISSIONS:
            raise ValueError(f"{permission!r} is not a permission level")
        store = self._store
        with store.locked():
            granted = cast(dict[str, str], store.read("collaborators.json") or {})
            granted[login] = permission
            store.write("collaborators.json", granted)

    def commit(
        self,
        branch: str,
        files: Mapping[str, str],
        message: str,
        *,
        author: Author = DEFAULT_HUMAN,
        start: str | None = None,
    ) -> str:
        """Commit `files` (path → text) on top of `branch` (or of `start` when `branch` is new).

        A branch that exists nowhere yet, with no `start`, begins with a root commit.
        """
        store = self._store
        if not _branch_ok(branch):
            raise ValueError(f"{branch!r} is not a branch name")
        with store.locked():
            old = store.branch_sha(branch)
            parent = old or (store.require_branch(start) if start else None)
            with tempfile.TemporaryDirectory(prefix="pair-index-") as scratch:
                env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
                if parent:
                    store.git("read-tree", parent, env=env)
                for path, text in files.items():
                    blob = store.git("hash-object", "-w", "--stdin", stdin=text).stdout.strip()
                    store.git(
                        "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env
                    )
                tree = store.git("write-tree", env=env).stdout.strip()
            new = store.commit(tree, [parent] if parent else [], message + "\n", author)
            store.move_branch(branch, new, old)
        return new

    def branch_sha(self, branch: str) -> str | None:
        """Where `branch` points, or None."""
        return self._store.branch_sha(branch)

    def seed_card(
        self,
        title: str,
        body: str,
        labels: tuple[str, ...] = (),
        assignees: tuple[str, ...] = (),
        *,
        author: Author = DEFAULT_HUMAN,
    ) -> int:
        """A card a human created; its number."""
        store = self._store
        with store.locked():
            number = store.next_id("number")
            rec: _CardRec = {
                "number": number,
                "title": title,
                "body": body,
                "labels": list(labels),
                "assignees": list(assignees),
                "state": "open",
                "author": _author_rec(author),
                "created_at": _now(),
            }
            store.write(f"cards/{number}.json", rec)
        return number

    def seed_pull(
        self,
        head_branch: str,
        base_branch: str = DEFAULT_BRANCH,
        *,
        title: str | None = None,
        body: str = "",
        draft: bool = False,
        author: Author = DEFAULT_HUMAN,
    ) -> int:
        """An open pull for `head_branch`; the base and head branches are made if missing."""
        if self.branch_sha(base_branch) is None:
            self.commit(base_branch, {"README.md": "# local forge\n"}, "initial", author=author)
        if self.branch_sha(head_branch) is None:
            self.commit(
                head_branch,
                {f"{head_branch}.txt": f"{head_branch}\n"},
                f"work on {head_branch}",
                author=author,
                start=base_branch,
            )
        store = self._store
        with store.locked():
            rec = store.new_pull(
                author, head_branch, base_branch, title or f"Merge {head_branch}", body, draft=draft
            )
        return rec["number"]

    def head_of(self, pull: int) -> str:
        """The pull's head SHA as the forge sees it."""
        return self._store.live_head(self._store.pull(pull))

    def move_head(self, pull: int, *, author: Author = DEFAULT_HUMAN) -> str:
        """Someone pushes one more commit to the pull's branch; the new head SHA."""
        rec = self._store.pull(pull)
        self._ticks += 1
        stamp = f"{_now()} {self._ticks}"
        return self.commit(
            rec["head_branch"],
            {f"moved-{pull}.txt": stamp + "\n"},
            f"more work on #{pull}",
            author=author,
        )

    def comment_as(self, author: Author, target: Target, body: str) -> str:
        """A comment written by `author` (a human, another bot, a forger); its id."""
        store = self._store
        with store.locked():
            store.target(target)
            return store.add_comment(target.number, author, body)["id"]

    def edit_comment(self, target: Target, comment_id: str, body: str) -> None:
        """Someone edits a comment (e.g. a human appends text under pairbot's section)."""
        store = self._store
        with store.locked():
            store.target(target)
            store.edit_comment(target.number, comment_id, body)

    def set_labels(self, target: Target, labels: tuple[str, ...]) -> None:
        """A human sets a card's or pull's labels."""
        store = self._store
        with store.locked():
            rec = store.target(target)
            rec["labels"] = list(labels)
            store.save_target(target, rec)

    def reactions(self, number: int) -> list[tuple[str | None, str, str]]:
        """(comment id or None, reaction, login) on card or pull `number`."""
        recs = cast(list[_ReactionRec], self._store.read(f"reactions/{number}.json") or [])
        return [(r["comment_id"], r["content"], r["user"]["login"]) for r in recs]


if TYPE_CHECKING:  # LocalHost is a Host: checked by mypy, costs nothing at run time.

    def _is_a_host(host: LocalHost) -> Host:
        return host
