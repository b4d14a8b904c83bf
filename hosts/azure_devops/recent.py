"""`AzureRecentComments`: the project's work-item comments since a moment, in a bounded listing.

    recent = await AzureRecentComments(org, project, repo, token).comments_since(since)

Azure DevOps has no "every comment since" call, so it takes two steps:

1. one WIQL query (`POST {project}/_apis/wit/wiql?timePrecision=true`, Query By Wiql): the
   work items of the project whose `System.ChangedDate` is at or after `since` — a comment
   changes its work item (a new revision), so every item commented on since is among them;
   at most `MAX_ITEMS` (the oldest changed first), more says the listing is not complete;
2. the comments of each (`_card_comments`, the same listing `list_comments` reads), kept when
   created at or after `since`.

An idle project costs the one query. Pull-request threads are not listed (each pull request's
threads are a call of their own, and a command is written on the work item): a missed
comment on a pull request is not caught up. `AzureRecentHost` is `AzureDevOpsHost` with this
part. Not part of the `Host` protocol:
`hosts.base.RecentCommentsSource`, the optional capability a CI run's catch-up checks for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from hosts.azure_devops.comments import AzureComments
from hosts.azure_devops.host import AzureDevOpsHost
from hosts.azure_devops.sdk import models
from hosts.base import RecentComments
from hosts.models import Comment, Target

__all__ = ["MAX_ITEMS", "AzureRecentComments", "AzureRecentHost", "changed_since_wiql"]

MAX_ITEMS: Final = 20


def changed_since_wiql(since: datetime) -> str:
    """The WIQL of the work items of the current project changed at or after `since`. Pure."""
    # The one value in it is a timestamp this function formats itself: nothing else reaches it.
    stamp = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return (
        "SELECT [System.Id] FROM WorkItems WHERE [System.TeamProject] = @project "  # noqa: S608
        f"AND [System.ChangedDate] >= '{stamp}' ORDER BY [System.ChangedDate] ASC"
    )


def _created(comment: Comment) -> datetime | None:
    try:
        when = datetime.fromisoformat(comment.created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class AzureRecentComments(AzureComments):
    """The project's recent work-item comments (one query, then each changed item's)."""

    async def comments_since(self, since: datetime) -> RecentComments:
        """Work-item comments created at or after `since`, oldest first."""
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


class AzureRecentHost(AzureDevOpsHost, AzureRecentComments):
    """`AzureDevOpsHost` with the recent listing: what a pipeline run's catch-up builds."""
