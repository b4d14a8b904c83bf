"""The one reply a command that could not run gets, for both entries (the GitHub Action and
the Azure Pipelines entry): which comment asked (`reply_origin`, pure) and the upsert of the
App's text under the comment's own reply marker (`answer_failed`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.intake.answers import (
    comment_reply_marker,
    could_not_run,
    failed_tracking_body,
)
from app.domain.intake.comment_commands import CommandError
from app.domain.intake.intent import Comment, Intent, Run, ScopeDecision
from hosts.errors import HostError
from hosts.markers import make_marker
from hosts.models import Target

if TYPE_CHECKING:
    from app.cycle.card_cycle import CardCycle


@dataclass(frozen=True)
class ReplyOrigin:
    """The comment an intent came from: where its one reply goes, and what it asked."""

    target: Target
    comment_id: str
    line: str | None  # `/pair <verb>`; None for a scope decision
    # Set for a command the App dispatched: its tracking comment says "queued … runs next"
    # in this run, so a failure rewrites it (a comment the Action saw itself announced nothing).
    announced_by: str | None = None


def reply_origin(intent: Intent, trigger: str) -> ReplyOrigin | None:
    """The comment to answer when `intent` cannot run; None when no comment asked (a tick, a
    moved head, a dispatch without its comment). Pure."""
    if isinstance(intent, Comment) and not isinstance(intent.command, CommandError):
        target = Target("pull" if intent.is_pull else "card", intent.card)
        return ReplyOrigin(target, intent.comment.id, f"/{trigger} {intent.command.verb}")
    if isinstance(intent, Run) and intent.request.comment is not None:
        request, comment = intent.request, intent.request.comment
        target = Target("pull" if comment.on_pull else "card", request.card)
        return ReplyOrigin(
            target, comment.id, f"/{trigger} {request.verb}", announced_by=comment.author_login
        )
    if isinstance(intent, ScopeDecision):
        return ReplyOrigin(Target("pull", intent.pull), intent.comment_id, None)
    return None


async def answer_failed(cycle: CardCycle, origin: ReplyOrigin, reason: str, fallback: str) -> None:
    """Upsert the one reply to the comment (the App's text and marker, `app.domain.intake.answers`).

    A reply that cannot be posted is reported on stderr and changes nothing else: the error
    that stopped the command is what the run reports.
    """
    target = origin.target
    host = cycle.hosts.code if target.kind == "pull" else cycle.hosts.pm
    marker = comment_reply_marker(target.number, origin.comment_id, fallback)
    try:
        await host.upsert_comment(target, marker, could_not_run(origin.line, reason))
        if origin.announced_by is not None and origin.line is not None:
            await host.upsert_comment(
                target,
                make_marker("tracking", target.number),
                failed_tracking_body(origin.line, origin.announced_by),
            )
    except HostError as err:  # its message never carries a token (hosts.errors)
        print(f"pairbot: could not answer the comment: {err}", file=sys.stderr, flush=True)
    except Exception as err:  # a bug here must not hide the command's error
        print(
            f"pairbot: could not answer the comment ({type(err).__name__})",
            file=sys.stderr,
            flush=True,
        )
