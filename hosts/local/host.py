"""`LocalHost`: the `Host` operations on a local forge directory — what pairbot does there.

Protocol methods are `async` but do their file and git work synchronously: each is milliseconds
of local I/O. Merging happens in the bare repository without a checkout (see `hosts.local`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, cast, get_args

from hosts.adapter import HostAdapter, Labels
from hosts.base import Reaction
from hosts.errors import Conflict, HostUnavailable, NotFound
from hosts.labels import LabelPlan
from hosts.local.store import (
    _MERGE_METHODS,
    _PERMISSIONS,
    _REACTIONS,
    _REVIEW_STATES,
    DEFAULT_IDENTITY,
    Store,
    _author_rec,
    _branch_ok,
    _card,
    _CardRec,
    _CheckRec,
    _comment,
    _git_identity,
    _now,
    _PullRec,
    _ReactionRec,
    _StatusRec,
)
from hosts.models import (
    Author,
    Card,
    CheckState,
    Comment,
    HeadCheck,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    PullState,
    ReviewState,
    ReviewStatus,
    Target,
)
from hosts.vocabulary import LOCAL

if TYPE_CHECKING:
    from hosts.base import Host


class LocalHost(HostAdapter):
    """`Host` over a local forge directory (created on first use)."""

    name = "local"
    vocabulary = LOCAL

    def __init__(
        self, root: Path, *, identity: Author | None = None, store: Store | None = None
    ) -> None:
        """`store` is a seam: tests pass a `Store` whose disk fails or garbles a write."""
        super().__init__()
        self.root = Path(root)
        self._identity = identity or DEFAULT_IDENTITY
        self._store = store or Store(self.root)
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

    async def _post_comment(self, target: Target, text: str) -> str:
        with self._store.locked():
            self._store.target(target)
            comment_id = self._store.add_comment(target.number, self._identity, text)["id"]
            self._wrote()
        return comment_id

    async def _edit_comment(self, target: Target, comment_id: str, text: str) -> None:
        with self._store.locked():
            self._store.target(target)
            self._store.edit_comment(target.number, comment_id, text)
            self._wrote()

    def _exclusive(self, target: Target) -> contextlib.AbstractAsyncContextManager[None]:
        """The target's publication lock: other processes on this forge wait for it."""
        self._store.target(target)  # an unknown target is NotFound, and gets no lock file
        return self._store.publishing(target.number)

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
        ref = f"refs/heads/{branch}"
        local = store.git(
            "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=repo_dir, check=False
        )
        if local.returncode != 0:
            raise NotFound(f"branch {branch!r} does not exist in {repo_dir}")
        sha = local.stdout.strip()
        # The commit just read is what is pushed, so it is the head the forge has after the push
        # (no second read of either side); `--porcelain` says whether the ref moved.
        force_flag = ["--force"] if force else []
        done = store.git(
            "push",
            "--porcelain",
            *force_flag,
            str(store.repo),
            f"{sha}:{ref}",
            cwd=repo_dir,
            check=False,
        )
        said = done.stdout + done.stderr
        if done.returncode != 0:
            if "rejected" in said or "fetch first" in said:
                raise Conflict(f"push of {branch!r} rejected: the forge has commits it lacks")
            raise HostUnavailable(f"local forge: push of {branch!r} failed: {done.stderr.strip()}")
        if _push_moved(done.stdout, ref):
            self._wrote()
        return sha

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        store = self._store
        with store.locked():
            head_sha = store.require_branch(head)
            base_sha: str | None = store.require_branch(base)
            if head == base:
                raise Conflict(f"a pull request needs two branches; head and base are {head!r}")
            # One open pull per head branch: the same head (whatever the base) returns it.
            rec = store.open_pull_for(head)
            if rec is None:
                rec = store.new_pull(
                    self._identity, head, base, title, body, head_sha=head_sha, draft=draft
                )
                self._wrote()
            elif rec["base_branch"] != base:
                base_sha = store.branch_sha(rec["base_branch"])
            # Under the lock, the branches read above are the pull's: no second read of either.
            return self._pull(rec, head_sha, base_sha)

    async def get_pull(self, number: int) -> Pull:
        return self._pull(self._store.pull(number))

    def _pull(self, rec: _PullRec, head: str | None = None, base: str | None = None) -> Pull:
        """The model of `rec`; `head` and `base`, when the caller holds the forge's lock and has
        just read them, are its branches' commits (an open pull's head is its branch)."""
        store = self._store
        state = cast(PullState, rec["state"])
        if head is None or state != "open":
            head = store.live_head(rec)
            base = store.branch_sha(rec["base_branch"])
        mergeable: bool | None = None
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

    # -- outside evidence -----------------------------------------------------------------------

    async def head_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """The checks the forge recorded on `head_sha` (`LocalForge.set_check`), by name."""
        store = self._store
        store.pull(pull)
        sha = store.commit_sha(head_sha)
        if sha is None:
            raise NotFound(f"commit {head_sha!r} does not exist on the local forge")
        recs = cast(dict[str, _CheckRec], store.read(f"checks/{sha}.json") or {})
        return [
            HeadCheck(
                name=rec["name"],
                source="forge",
                state=cast(CheckState, rec["state"]),
                url=rec["url"],
                required=rec["required"],
                summary=rec["summary"],
            )
            for _, rec in sorted(recs.items())
        ]

    # -- labels ---------------------------------------------------------------------------------

    async def _read_labels(self, target: Target) -> Labels:
        return Labels(tuple(self._store.target(target)["labels"]))

    async def _write_labels(self, target: Target, current: Labels, plan: LabelPlan) -> None:
        store = self._store
        with store.locked():
            rec = store.target(target)
            kept = [lb for lb in rec["labels"] if lb not in plan.remove]
            labels = [*kept, *(lb for lb in plan.add if lb not in kept)]
            if labels != rec["labels"]:
                rec["labels"] = labels
                store.save_target(target, rec)
                self._wrote()

    # -- merge and close ------------------------------------------------------------------------

    async def merge_methods(self) -> frozenset[MergeMethod] | None:
        store = self._store
        with store.locked():
            return _allowed_merge_methods(store)

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        if method not in _MERGE_METHODS:
            raise ValueError(f"{method!r} is not a merge method")
        store = self._store
        with store.locked():
            if method not in _allowed_merge_methods(store):
                # As GitHub answers a method the repository's settings turn off (405).
                raise Conflict(f"{method} merges are not allowed on this repository")
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
        """`head`'s own commits replayed onto `base` in a throwaway worktree; the new tip.
        Always new commits (`--force-rebase`), as GitHub's "rebase and merge" writes them
        even when the head already sits on the base."""
        store = self._store
        work = Path(tempfile.mkdtemp(prefix="pair-rebase-"))
        tree = work / "tree"
        try:
            store.git("worktree", "add", "--detach", "--quiet", str(tree), head)
            done = store.git(
                "rebase",
                "--quiet",
                "--force-rebase",
                base,
                cwd=tree,
                env=_git_identity(self._identity),
                check=False,
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


def _push_moved(porcelain: str, ref: str) -> bool:
    """Whether `git push --porcelain` says it moved `ref` (new, fast-forwarded or forced), not
    `=` (already there). Each ref line is `<flag>\t<from>:<to>\t<summary>`."""
    for line in porcelain.splitlines():
        flag, _, rest = line.partition("\t")
        if rest.split("\t", 1)[0].endswith(f":{ref}"):
            return flag != "="
    return True  # no line for the ref: count it as a write rather than hide one


if TYPE_CHECKING:  # LocalHost is a Host: checked by mypy, costs nothing at run time.

    def _is_a_host(host: LocalHost) -> Host:
        return host


def _allowed_merge_methods(store: Store) -> frozenset[MergeMethod]:
    """The repository's merge settings (`LocalForge.allow_merge_methods`); all three when unset."""
    saved = store.read("merge_methods.json")
    if saved is None:
        return frozenset(get_args(MergeMethod))
    return frozenset(m for m in get_args(MergeMethod) if m in saved)
