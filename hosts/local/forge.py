"""`LocalForge`: forge administration — what the world around pairbot does on a local forge.

A human opens a card, comments, pushes to a pull's branch, grants access. Tests, demos and
end-to-end scenarios use it; pairbot never does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import cast, get_args

from hosts.local.host import LocalHost
from hosts.local.store import (
    _MERGE_METHODS,
    _PERMISSIONS,
    DEFAULT_BRANCH,
    DEFAULT_HUMAN,
    Store,
    _author_rec,
    _branch_ok,
    _CardRec,
    _CheckRec,
    _now,
    _ReactionRec,
)
from hosts.models import (
    REVIEW_CONTEXT,
    Author,
    CheckState,
    MergeMethod,
    Permission,
    Target,
)

_CHECK_STATES: tuple[CheckState, ...] = get_args(CheckState)


class LocalForge:
    """Forge administration: what humans and the rest of the world do on a local forge.

    Not `Host` operations — pairbot never calls these. Tests, demos and end-to-end scenarios use
    them to seed cards and pulls, to comment as someone, to push to a pull's branch and to grant
    access. Commits are made straight in the bare repository (no checkout needed).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._store = Store(self.root)
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

    def allow_merge_methods(self, methods: Collection[MergeMethod]) -> None:
        """The merge methods the repository accepts from now on (all three until this)."""
        unknown = sorted(set(methods) - _MERGE_METHODS)
        if unknown:
            raise ValueError(f"{unknown} are not merge methods; allowed: {sorted(_MERGE_METHODS)}")
        store = self._store
        with store.locked():
            store.write("merge_methods.json", sorted(methods))

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
            head_sha = store.require_branch(head_branch)
            title = title or f"Merge {head_branch}"
            rec = store.new_pull(
                author, head_branch, base_branch, title, body, head_sha=head_sha, draft=draft
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

    def set_check(
        self,
        sha: str,
        name: str,
        state: CheckState,
        *,
        url: str = "",
        required: bool = False,
        summary: str = "",
    ) -> None:
        """CI (or anyone else) reports check `name` on commit `sha`; a later report of the
        same name replaces the earlier one. `required`: the forge requires it before a merge."""
        if state not in _CHECK_STATES:
            raise ValueError(f"{state!r} is not a check state; allowed: {', '.join(_CHECK_STATES)}")
        if not name or name == REVIEW_CONTEXT:
            raise ValueError(f"{name!r} cannot name a check: {REVIEW_CONTEXT} is pairbot's own")
        store = self._store
        with store.locked():
            full = store.commit_sha(sha)
            if full is None:
                raise ValueError(f"commit {sha!r} does not exist on the local forge")
            path = f"checks/{full}.json"
            checks = cast(dict[str, _CheckRec], store.read(path) or {})
            checks[name] = {
                "name": name,
                "state": state,
                "url": url,
                "required": required,
                "summary": summary,
            }
            store.write(path, checks)

    def reactions(self, number: int) -> list[tuple[str | None, str, str]]:
        """(comment id or None, reaction, login) on card or pull `number`."""
        recs = cast(list[_ReactionRec], self._store.read(f"reactions/{number}.json") or [])
        return [(r["comment_id"], r["content"], r["user"]["login"]) for r in recs]
