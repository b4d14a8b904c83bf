"""What the host contract suite needs from each adapter's test setup.

Each adapter's test module provides an async-context `harness` (a pytest fixture yielding a
`HostHarness`): the adapter under test, pairbot's identity on it, and the moves of the outside
world that the adapter itself never makes — a human writing a comment, a human pushing to a
PR's branch, a server failing a write. For `local` those act on the forge directory directly
(a write fails in the harness's `Store`); for `github` and `azure-devops` they act on the
stateful fake served at the HTTP edge.
"""

from __future__ import annotations

from typing import Literal, Protocol

from hosts.base import Host
from hosts.models import Author, Target

ReportedState = Literal["success", "failure", "pending"]
CommentWrite = Literal["create", "edit"]


class HostHarness(Protocol):
    """The adapter under test plus the outside world around it."""

    host: Host
    identity: Author  # pairbot's own identity on this host
    human: Author  # a maintainer with write access
    bot: Author  # some other bot account

    async def seed_card(
        self, title: str, body: str, labels: tuple[str, ...] = (), assignees: tuple[str, ...] = ()
    ) -> int:
        """A card a human created; returns its number."""
        ...

    async def seed_pull(self, head_branch: str, base_branch: str = "main") -> int:
        """An open pull request for a branch that exists on the host; returns its number."""
        ...

    async def head_of(self, pull: int) -> str:
        """The pull's current head SHA, as the host sees it."""
        ...

    async def move_head(self, pull: int) -> str:
        """Someone pushes a new commit to the pull's branch; returns the new head SHA."""
        ...

    async def comment_as(self, author: Author, target: Target, body: str) -> str:
        """A comment written by `author` (a human, or a forger copying a marker); its id."""
        ...

    async def report_check(
        self, pull: int, sha: str, name: str, state: ReportedState, summary: str = ""
    ) -> None:
        """CI (someone other than pairbot) reports check `name` on commit `sha` of `pull`."""
        ...

    def fail_comment_write(self, target: Target, write: CommentWrite, *, landed: bool) -> None:
        """The next comment `write` on `target` fails as a server error does: after the host
        stored it when `landed` (a 5xx after the fact, a timeout), before it otherwise."""
        ...

    def writes(self) -> int:
        """How many mutating requests (writes) every adapter instance of this harness made."""
        ...
