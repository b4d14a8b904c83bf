"""The `Host` protocol: every effect pairbot has on a PM tool or a code host goes through it.

Operation names are a contract (the CLI and the engine call them). Adapters only translate:
policy (which comment, which label, when to merge) is decided by the pure modules beside this
one and in `app/domain/`. A host that cannot do something raises `Unsupported(capability)`,
never a silent no-op; every failure is one of `hosts.errors`.

    cards        get_card, card_hash*, create_card, update_card, close(Target card)
    comments     list_comments, upsert_comment* (marker-keyed, idempotent), react
    people       permission(user) — write, maintain or admin may act
    code         push_branch, open_pull (returns the existing PR for the same head),
                 get_pull, merge (pinned to the reviewed head: a moved head is Conflict)
    review       set_review_status / get_review_status (`pair-review`, on one exact head)
    evidence     head_checks (everyone else's checks and statuses on one exact head)
    state        set_state_label* (exactly one `pr-state:*`)
    scope        read_scope_decision* (the maintainer's comment; validated in app/domain)

One optional capability, not part of `Host` (the action code checks for it):
`RecentCommentsSource.comments_since`, the comments made anywhere since a moment.

* is written once for every adapter, in `hosts.adapter.HostAdapter` (the base class of every
adapter), over a few primitives each adapter provides: comment upsert with its locking and
reconciliation, state-label exclusivity, marker lookup, the card hash, scope-decision discovery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from hosts.labels import PrState
from hosts.models import (
    Author,
    Card,
    Comment,
    HeadCheck,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    ReviewState,
    ReviewStatus,
    Target,
    UpsertResult,
)
from hosts.vocabulary import Vocabulary

Reaction = Literal["eyes", "+1", "-1", "rocket", "confused"]


class Host(Protocol):
    """One PM tool and/or code host."""

    name: str
    # What this host calls its things in user-visible messages (hosts.vocabulary).
    vocabulary: Vocabulary

    def closing_reference(self, card: int) -> str:
        """The sentence a card's pull request description opens with, in this host's syntax."""
        ...

    async def link_card(self, pull: int, card: int) -> None:
        """Link pull request `pull` to card `card` where the host links them by API."""
        ...

    async def identity(self) -> Author:
        """pairbot's own identity on this host (markers count only on its comments)."""
        ...

    async def get_card(self, number: int) -> Card:
        """A card by number."""
        ...

    async def card_hash(self, number: int) -> str:
        """The card hash (hosts.cardhash) of the card as it is now."""
        ...

    async def create_card(self, title: str, body: str, labels: tuple[str, ...] = ()) -> Card:
        """A new card (a `User Story` on Azure DevOps)."""
        ...

    async def update_card(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> Card:
        """Change a card's title and/or body."""
        ...

    async def list_comments(self, target: Target) -> list[Comment]:
        """Every comment on a card or pull, oldest first."""
        ...

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        """Create, update or leave the comment keyed by `marker`; read back to confirm."""
        ...

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        """Add a reaction to a comment (or to the card itself when `comment_id` is None)."""
        ...

    async def permission(self, user: str) -> Permission:
        """The user's permission level on the repository."""
        ...

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        """Push `branch` from a local checkout; returns the pushed head SHA."""
        ...

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        """Open a pull request, or return the open one with the same head."""
        ...

    async def get_pull(self, number: int) -> Pull:
        """A pull request: head SHA, base, state, draft, mergeable."""
        ...

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        """Set `pair-review` on exactly `head_sha`."""
        ...

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        """`pair-review` on `head_sha`, if any."""
        ...

    async def head_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """The checks and statuses others reported on exactly `head_sha` of `pull`, pairbot's
        own `pair-review` (and its own check runs) left out; the newest one per name."""
        ...

    async def set_state_label(self, target: Target, state: PrState) -> bool:
        """Make `state` the only `pr-state:*` label; False when it already was (no write)."""
        ...

    async def read_scope_decision(
        self,
        pull: int,
        comment_ref: str | None = None,
        *,
        prefer: Callable[[Comment], bool] | None = None,
    ) -> Comment | None:
        """The referenced comment, or the newest one holding a fenced scope-decision JSON
        (the newest `prefer` accepts, when it accepts any)."""
        ...

    async def merge_methods(self) -> frozenset[MergeMethod] | None:
        """The merge methods the repository accepts; None when the host does not say."""
        ...

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        """Merge only if the head is still `head_sha` (else Conflict)."""
        ...

    async def close(self, target: Target) -> None:
        """Close a card or a pull request."""
        ...


@dataclass(frozen=True)
class RecentComments:
    """The comments a host listed since a moment, oldest first: each with the card or pull
    request it is on. `complete`: the listing reached its end (not a page cap)."""

    comments: tuple[tuple[Target, Comment], ...]
    complete: bool = True


class RecentCommentsSource(Protocol):
    """An optional capability (not every `Host` has it): the comments made on any card or pull
    request since `since`, in one bounded listing — how a CI run finds a command whose own run
    never happened (`action.run.catchup`). GitHub: `hosts.github.recent`; Azure DevOps (work
    items and active pull requests' threads): `hosts.azure_devops.recent`."""

    async def comments_since(self, since: datetime) -> RecentComments:
        """Every comment created at or after `since` that the listing's bound reaches."""
        ...
