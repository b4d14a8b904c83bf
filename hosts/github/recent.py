"""`GitHubRecentComments`: the repository's comments since a moment, in one bounded listing.

    recent = await GitHubRecentComments(repo, credentials).comments_since(since)

`GET /repos/{owner}/{repo}/issues/comments?since=…&sort=created&direction=asc` covers the
comments on every issue and pull request's conversation (a pull request is an issue), oldest
first (https://docs.github.com/rest/issues/comments#list-issue-comments-for-a-repository).
`since` filters on the last update, so a comment edited since is listed too: it is kept only
when it was *created* at or after `since`. At most `MAX_PAGES` pages of `PAGE` are read; a
full last page says the listing is not complete (the caller takes the rest next time).

Which number a comment is on comes from its `issue_url` (`…/issues/<n>`), whether that is a
pull request from its `html_url` (`…/pull/<n>#issuecomment-…`, GitHub's link for a pull
request's conversation). `GitHubRecentHost` is `GitHubHost` with this part. Not part of the
`Host` protocol: `hosts.base.RecentCommentsSource`,
the optional capability a CI run's catch-up checks for (`action.run.catchup`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

from hosts.base import RecentComments
from hosts.github import payloads
from hosts.github.connection import PAGE, GitHubConnection
from hosts.github.host import GitHubHost
from hosts.models import Comment, Target

__all__ = ["MAX_PAGES", "GitHubRecentComments", "GitHubRecentHost"]

MAX_PAGES: Final = 3
_ISSUE = re.compile(r"/issues/([1-9][0-9]*)$")
_PULL_LINK = re.compile(r"/pull/[1-9][0-9]*#issuecomment-")


def _created(comment: Comment) -> datetime | None:
    try:
        when = datetime.fromisoformat(comment.created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _target(item: dict[str, Any]) -> Target | None:
    """The issue or pull request a listed comment is on; None for a shape GitHub never sends."""
    found = _ISSUE.search(payloads.text(item.get("issue_url")))
    if found is None:
        return None
    pull = _PULL_LINK.search(payloads.text(item.get("html_url"))) is not None
    return Target("pull" if pull else "card", int(found.group(1)))


class GitHubRecentComments(GitHubConnection):
    """The repository's recent comments (one listing, page-capped)."""

    async def comments_since(self, since: datetime) -> RecentComments:
        """Comments created at or after `since`, oldest first, up to `MAX_PAGES` pages."""
        found: list[tuple[Target, Comment]] = []
        for page in range(1, MAX_PAGES + 1):
            response = await self._read(
                "list the repository's recent comments", self._page(since, page)
            )
            items = payloads.objs(response)
            for item in items:
                target, comment = _target(item), payloads.comment(item)
                created = _created(comment)
                if target is not None and created is not None and created >= since:
                    found.append((target, comment))
            if len(items) < PAGE:
                return RecentComments(tuple(found), complete=True)
        return RecentComments(tuple(found), complete=False)

    def _page(self, since: datetime, page: int) -> Any:
        return lambda: self._gh.rest.issues.async_list_comments_for_repo(
            self._owner,
            self._name,
            sort="created",
            direction="asc",
            since=since,
            per_page=PAGE,
            page=page,
        )


class GitHubRecentHost(GitHubHost, GitHubRecentComments):
    """`GitHubHost` with the recent listing: what a CI run's catch-up builds."""
