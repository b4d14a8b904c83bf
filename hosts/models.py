"""Host-neutral models: what every adapter returns, so no library object leaves `hosts/`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

Permission = Literal["admin", "maintain", "write", "triage", "read", "none"]
WRITE_PERMISSIONS: frozenset[str] = frozenset({"admin", "maintain", "write"})
MergeMethod = Literal["merge", "squash", "rebase"]
ReviewState = Literal["pending", "success", "failure", "error"]
PullState = Literal["open", "closed", "merged"]
REVIEW_CONTEXT = "pair-review"


@dataclass(frozen=True)
class Author:
    """Who wrote something: a login, a stable id (numeric on GitHub) and whether it is a bot."""

    login: str
    id: str
    is_bot: bool = False


@dataclass(frozen=True)
class Target:
    """What a comment or label is attached to: a card or a pull request, by number."""

    kind: Literal["card", "pull"]
    number: int


@dataclass(frozen=True)
class Card:
    """An issue (GitHub), a work item (Azure DevOps) or a local card."""

    number: int
    title: str
    body: str
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    state: Literal["open", "closed"] = "open"
    url: str = ""
    author: Author | None = None  # who opened it; None where the host does not say


@dataclass(frozen=True)
class Comment:
    """One comment; `id` is the host's id as text (a thread id + comment id on Azure DevOps).

    `created_at` / `updated_at` are the host's ISO 8601 timestamps ("" when it gives none);
    `updated_at` moves when the text is edited, so a snapshot can tell a later edit."""

    id: str
    body: str
    author: Author
    created_at: str = ""
    url: str = ""
    updated_at: str = ""


@dataclass(frozen=True)
class Pull:
    """A pull request as the engine needs it."""

    number: int
    head_branch: str
    head_sha: str
    base_branch: str
    state: PullState = "open"
    draft: bool = False
    mergeable: bool | None = None
    title: str = ""
    body: str = ""
    url: str = ""
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()

    @property
    def merged(self) -> bool:
        """Merged pulls are closed too; this says which kind of closed."""
        return self.state == "merged"


@dataclass(frozen=True)
class ReviewStatus:
    """The `pair-review` status on one exact head commit."""

    head_sha: str
    state: ReviewState
    description: str = ""
    context: str = REVIEW_CONTEXT


CheckState = Literal["success", "failure", "pending", "neutral", "skipped"]
CheckSource = Literal["check-run", "status", "build", "forge"]


@dataclass(frozen=True)
class HeadCheck:
    """One check or status someone else reported on an exact head commit (CI, a linter, a
    build policy): never pairbot's own `pair-review`.

    `source` says what kind of report it is on its host; `required` is True when the host
    itself requires it before a merge (GitHub's branch protection, an Azure DevOps build
    policy, a local forge's flag), and False when the host does not say or cannot be asked;
    `summary` is the reporter's own short text (untrusted: it is quoted, never obeyed)."""

    name: str
    source: CheckSource
    state: CheckState
    url: str = ""
    required: bool = False
    summary: str = ""


class Upserted(Enum):
    """What an idempotent write did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class UpsertResult:
    """The outcome of `upsert_comment`: what happened, the comment now, duplicates seen."""

    outcome: Upserted
    comment: Comment
    duplicates: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class MergeResult:
    """A completed merge and the commit it produced."""

    merged: bool
    sha: str | None = None
