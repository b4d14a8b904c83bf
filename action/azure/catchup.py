"""The Azure Pipelines entry's catch-up listing: the project's recent work-item comments and
pull-request thread comments, read as the service hooks' notifications are read
(`workitem.commented`, `ms.vss-code.git-pullrequest-comment-event`).

    source = AzureCatchup.build(settings)
    listing = await source.recent(since)       one WIQL query, then each changed item's
                                               comments; the active pull requests, then each
                                               one's recently updated threads

A notification Azure DevOps gave up on (a subscription on probation, a run that failed or was
skipped) is never handed to the pipeline again, so a scheduled run looks at the comments
themselves (`hosts.azure_devops.recent`). Each is read as the hook's comment is
(`app.domain.intake.azure_hooks`): a comment that opens with a pair marker is pairbot's own,
a work item's HTML is reduced to the text a reader sees (`html_to_text`; a pull request's
comment is Markdown, read as it is), an edited pull-request comment never acts, and the shared
intake (`app.domain.intake.intent.comment_intent`) finds its command and drops bots off the
allowlist. Pull requests from forks are not listed (their commands are refused, never run).

A found command is keyed by its work item and comment (`wi12:c41`,
`app.domain.intake.azure_hooks.workitem_comment_key`), or by its pull request, thread and
comment (`pr7:147/1`, as the hook keys it): the key every run that handled the comment
remembers in `.pair/deliveries.json` (`action.run.act`), and, prefixed `azure-`, the delivery
a caught-up command journals.

Loaded only by a scheduled run that looks (`AzurePipelines.catchup_source`): it loads the SDK.
"""

from __future__ import annotations

from datetime import UTC, datetime

from action.azure.pipelines import comment_key
from action.azure.settings import PipelineSettings
from action.run.catchup import Found, Listing, replied_ids
from app.domain.intake.azure_hooks import html_to_text
from app.domain.intake.intent import OWN_MARKER, Comment, NewComment, Policy, comment_intent
from hosts.azure_devops.recent import AzureRecentHost
from hosts.models import Comment as HostComment
from hosts.models import Target

__all__ = ["AzureCatchup", "own", "reading"]


def own(comment: HostComment) -> bool:
    """Whether pairbot wrote it: on Azure DevOps, a comment that opens with a pair marker."""
    return OWN_MARKER in comment.body.lstrip()[:64]


def reading(target: Target, comment: HostComment, policy: Policy) -> Comment | None:
    """The command a listed work-item or pull-request comment holds, as its notification would
    have been read; None for pairbot's own comments, an edited pull-request comment, and
    anything that is no command by a person."""
    if own(comment):
        return None
    on_pull = target.kind == "pull"
    if on_pull and comment.updated_at and comment.updated_at != comment.created_at:
        return None  # the hook: "an edited comment never acts"
    new = NewComment(
        target="pull" if on_pull else "card",
        number=target.number,
        comment_id=comment.id,
        url=comment.url,
        body=comment.body if on_pull else html_to_text(comment.body),
        author=comment.author,
    )
    intent = comment_intent(new, policy)
    return intent if isinstance(intent, Comment) else None


def _created(comment: HostComment) -> datetime:
    when = datetime.fromisoformat(comment.created_at.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class AzureCatchup:
    """`action.run.catchup.CatchupSource` on the pipeline's project."""

    def __init__(self, host: AzureRecentHost, policy: Policy) -> None:
        self._host = host
        self._policy = policy

    @classmethod
    def build(cls, settings: PipelineSettings) -> AzureCatchup:
        host = AzureRecentHost(
            settings.collection_uri,
            settings.project,
            settings.repository,
            settings.token.get_secret_value(),
            cache_dir=settings.hosts.azure_cache_dir,
        )
        policy = Policy(trigger=settings.trigger, identity_allowlist=settings.allowlist)
        return cls(host, policy)

    async def recent(self, since: datetime) -> Listing:
        listed = await self._host.comments_since(since)
        found: list[Found] = []
        for target, comment in listed.comments:
            intent = reading(target, comment, self._policy)
            key = comment_key(target, comment.id)
            if intent is not None and key:
                found.append(Found(_created(comment), intent, key, f"azure-{key}"))
        return Listing(
            found=tuple(found),
            replied=replied_ids((c.body, own(c)) for _, c in listed.comments),
            scanned=tuple(_created(c) for _, c in listed.comments),
            complete=listed.complete,
        )

    async def aclose(self) -> None:
        return None  # the SDK's sessions are its own (requests, in worker threads)
