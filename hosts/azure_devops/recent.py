"""`AzureRecentComments`: the project's recent comments since a moment, in a bounded listing:
on its work items, and in the threads of the repository's active pull requests.

    recent = await AzureRecentComments(org, project, repo, token).comments_since(since)

Azure DevOps has no "every comment since" call, so it takes these steps:

1. one WIQL query (`POST {project}/_apis/wit/wiql?timePrecision=true`, Query By Wiql): the
   work items of the project whose `System.ChangedDate` is at or after `since` — a comment
   changes its work item (a new revision), so every item commented on since is among them;
   at most `MAX_ITEMS` (the oldest changed first), more says the listing is not complete;
2. the comments of each (`_card_comments`, the same listing `list_comments` reads), kept when
   created at or after `since`;
3. the repository's active pull requests (`GET …/pullrequests?searchCriteria.status=active`,
   Pull Requests - Get Pull Requests: newest first, at most `MAX_PULLS`; more says the listing
   is not complete), and for each the threads (`GET …/pullRequests/{id}/threads`, Pull Request
   Threads - List: every thread in one answer) whose `lastUpdatedDate` is at or after `since`:
   their text comments (system comments left out, as `list_comments` reads them) created at or
   after `since`. A thread gets a new comment only by an update, so an older thread holds
   none. A pull request from a fork (`forkSource`) is left out: a command there is refused,
   never run (app.domain.intake.azure_hooks), and a missed refusal is not worth a run.
https://learn.microsoft.com/rest/api/azure/devops/git/pull-requests/get-pull-requests
https://learn.microsoft.com/rest/api/azure/devops/git/pull-request-threads/list

An idle project costs the one query, the one pull request listing and one thread listing per
active pull request. `AzureRecentHost` is `AzureDevOpsHost` with this part. Not part of the
`Host` protocol: `hosts.base.RecentCommentsSource`, the optional capability a CI run's
catch-up checks for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from hosts.azure_devops import convert
from hosts.azure_devops.comments import AzureComments
from hosts.azure_devops.host import AzureDevOpsHost
from hosts.azure_devops.sdk import Sdk, models
from hosts.base import RecentComments
from hosts.models import Comment, Target

__all__ = [
    "MAX_ITEMS",
    "MAX_PULLS",
    "AzureRecentComments",
    "AzureRecentHost",
    "changed_since_wiql",
]

MAX_ITEMS: Final = 20
MAX_PULLS: Final = 20


def changed_since_wiql(since: datetime) -> str:
    """The WIQL of the work items of the current project changed at or after `since`. Pure."""
    # The one value in it is a timestamp this function formats itself: nothing else reaches it.
    stamp = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return (
        "SELECT [System.Id] FROM WorkItems WHERE [System.TeamProject] = @project "  # noqa: S608
        f"AND [System.ChangedDate] >= '{stamp}' ORDER BY [System.ChangedDate] ASC"
    )


def _created(comment: Comment) -> datetime | None:
    return _when(comment.created_at)


def _when(stamp: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _updated_since(thread: Sdk, since: datetime) -> bool:
    """Whether a thread was updated at or after `since` (unknown: yes, it is read)."""
    updated = _when(convert.timestamp(getattr(thread, "last_updated_date", None)))
    return updated is None or updated >= since


class AzureRecentComments(AzureComments):
    """The project's recent comments: work items (one query, then each changed item's) and
    the threads of active pull requests (one listing, then each pull's threads)."""

    max_pulls: int = MAX_PULLS  # active pull requests looked at (a test may lower it)

    async def comments_since(self, since: datetime) -> RecentComments:
        """Work-item and pull-request comments created at or after `since`, oldest first."""
        cards = await self._card_comments_since(since)
        pulls = await self._pull_comments_since(since)
        found = sorted([*cards.comments, *pulls.comments], key=_order)
        return RecentComments(tuple(found), complete=cards.complete and pulls.complete)

    async def _card_comments_since(self, since: datetime) -> RecentComments:
        _, wit = models()
        query = wit.Wiql(query=changed_since_wiql(since))
        context = wit.TeamContext(project=self.project)
        result = await self._call(
            "work items changed since the last catch-up",
            lambda c: c.wit.query_by_wiql(
                query, team_context=context, time_precision=True, top=MAX_ITEMS + 1
            ),
        )
        numbers = [int(item.id) for item in result.work_items or []]
        found: list[tuple[datetime, int, Target, Comment]] = []
        for number in numbers[:MAX_ITEMS]:
            for comment in await self._card_comments(number):
                created = _created(comment)
                if created is not None and created >= since:
                    found.append((created, number, Target("card", number), comment))
        found.sort(key=lambda f: (f[0], f[1]))
        return RecentComments(
            tuple((target, comment) for _, _, target, comment in found),
            complete=len(numbers) <= MAX_ITEMS,
        )

    async def _pull_comments_since(self, since: datetime) -> RecentComments:
        """The text comments created at or after `since` in the threads of the repository's
        active pull requests (not from a fork), at most `MAX_PULLS` of them."""
        git, _ = models()
        criteria = git.GitPullRequestSearchCriteria(status="active")
        pulls = await self._call(
            "active pull requests, for the catch-up",
            lambda c: c.git.get_pull_requests(
                self.repository, criteria, project=self.project, top=self.max_pulls + 1
            ),
        )
        pulls = list(pulls or [])
        web_url = (await self._repository()).web_url
        found: list[tuple[Target, Comment]] = []
        for pr in pulls[: self.max_pulls]:
            if getattr(pr, "fork_source", None) is not None:
                continue
            number = int(pr.pull_request_id)
            for thread in await self._threads(number):
                if not _updated_since(thread, since):
                    continue
                for raw in thread.comments or []:
                    if raw.is_deleted or str(raw.comment_type or "text") == "system":
                        continue
                    comment = self._pr_comment(number, int(thread.id), raw, web_url)
                    created = _created(comment)
                    if created is not None and created >= since:
                        found.append((Target("pull", number), comment))
        return RecentComments(tuple(found), complete=len(pulls) <= self.max_pulls)


def _order(item: tuple[Target, Comment]) -> tuple[datetime, int, str]:
    """Oldest first; at one instant, by card or pull (a stable sort keeps each one's order)."""
    target, comment = item
    return (_created(comment) or datetime.min.replace(tzinfo=UTC), target.number, target.kind)


class AzureRecentHost(AzureDevOpsHost, AzureRecentComments):
    """`AzureDevOpsHost` with the recent listing: what a pipeline run's catch-up builds."""
