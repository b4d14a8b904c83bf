"""The GitHub Action's catch-up listing: the repository's recent comments, read as the
`issue_comment` event reads them.

    source = GitHubCatchup.build(ctx)          None without a credential
    listing = await source.recent(since)       one bounded listing (`hosts.github.recent`)

Each listed comment is handed to the same intake as a `issue_comment.created` event
(`action.event.classify`, over `app.domain.intake.intent`): pairbot's own comments, other bots
off the allowlist, text without a command line and anything malformed are no command. A found
command is keyed `comment-<id>`, the delivery its own run journals and remembers
(`action.comments.handle_comment`), so a comment handled either way is handled once. A reply
of pairbot's under a comment's own marker in the same listing also counts as handled.

Loaded only by a tick that looks (`GitHubActions.catchup_source`): it imports githubkit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from action.context import ActionContext
from action.continuation import credentials_of
from action.event import Comment, MalformedEventError, classify, policy_of
from action.run.catchup import Found, Listing, replied_ids
from app.domain.intake.intent import Policy
from hosts.github.recent import GitHubRecentHost
from hosts.models import Comment as HostComment
from hosts.models import Target

__all__ = ["GitHubCatchup", "comment_payload", "reading"]


def comment_payload(target: Target, comment: HostComment) -> dict[str, Any]:
    """The `issue_comment.created` event GitHub would have sent for a listed comment. Pure."""
    author = comment.author
    issue: dict[str, Any] = {"number": target.number}
    if target.kind == "pull":
        issue["pull_request"] = {}  # how GitHub marks a pull request's issue
    return {
        "action": "created",
        "issue": issue,
        "comment": {
            "id": int(comment.id) if comment.id.isdigit() else comment.id,
            "body": comment.body,
            "html_url": comment.url,
            "user": {
                "login": author.login,
                "id": int(author.id) if author.id.isdigit() else author.id,
                "type": "Bot" if author.is_bot else "User",
            },
        },
    }


def reading(target: Target, comment: HostComment, policy: Policy) -> Comment | None:
    """The command a listed comment holds, as its own event would have read it; None for
    anything that is no command by a person (a scope decision is left to its pull request)."""
    try:
        intent = classify("issue_comment", comment_payload(target, comment), policy)
    except MalformedEventError:
        return None
    return intent if isinstance(intent, Comment) else None


def _created(comment: HostComment) -> datetime:
    when = datetime.fromisoformat(comment.created_at.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class GitHubCatchup:
    """`action.run.catchup.CatchupSource` on the run's repository."""

    def __init__(self, host: GitHubRecentHost, policy: Policy) -> None:
        self._host = host
        self._policy = policy

    @classmethod
    def build(cls, ctx: ActionContext) -> GitHubCatchup | None:
        """The source for this run, as whoever the run acts as; None without a credential."""
        credentials = credentials_of(ctx)
        if credentials is None:
            return None
        host = GitHubRecentHost(ctx.repository, credentials, base_url=ctx.api_url)
        return cls(host, policy_of(ctx))

    async def recent(self, since: datetime) -> Listing:
        listed = await self._host.comments_since(since)
        own = self._policy.own_logins
        found: list[Found] = []
        for target, comment in listed.comments:
            intent = reading(target, comment, self._policy)
            if intent is not None:
                key = f"comment-{comment.id}"
                found.append(Found(_created(comment), intent, key, key))
        answered = ((c.body, c.author.login.lower() in own) for _, c in listed.comments)
        return Listing(
            found=tuple(found),
            replied=replied_ids(answered),
            scanned=tuple(_created(c) for _, c in listed.comments),
            complete=listed.complete,
        )

    async def aclose(self) -> None:
        await self._host.aclose()
