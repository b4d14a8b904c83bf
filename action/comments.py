"""A `/pair` comment the Action received directly (a repository without the App).

The same decisions as the App, from the same modules: `app.domain.commands.may_act` on the
author's permission level (from the code host, never `author_association`) and the numeric-id
allowlist; a malformed command gets its usage and runs nothing; a refused author gets one
polite reply (edited in place on a repeat, never a second comment); an accepted command is
acknowledged with 👀 and then handled by the card cycle like a command the App forwarded.
"""

from __future__ import annotations

from typing import Any

from action.context import ActionContext
from action.event import Comment
from app.cycle.card_cycle import CardCycle, CardStep
from app.domain.commands import CommandError, may_act
from app.domain.dispatch import PairRequest
from app.engine.step import StepResult
from hosts.markers import make_marker
from hosts.models import Target


async def handle_comment(
    ctx: ActionContext, cycle: CardCycle, intent: Comment
) -> CardStep | StepResult:
    """Authorize, acknowledge and run one comment's command."""
    code = cycle.hosts.code
    target = Target("pull" if intent.is_pull else "card", intent.card)
    permission = None if intent.author_is_bot else await code.permission(intent.author_login)
    decision = may_act(
        author_id=intent.author_id,
        author_login=intent.author_login,
        author_is_bot=intent.author_is_bot,
        permission=permission,
        allowlist=ctx.allowlist,
        own_bot_id=None,
    )
    if not decision.allowed:
        if not decision.silent:
            await _reply(cycle, target, "refusal", decision.reason)
        return StepResult("nothing-ready", "", "", message=f"refused: {decision.reason}")
    command = intent.command
    if isinstance(command, CommandError):
        await _reply(cycle, target, "usage", f"{command.message}\n\n```text\n{command.usage}\n```")
        return StepResult("nothing-ready", "", "", message=command.message)
    await code.react(target, intent.comment.id, "eyes")
    # On a pull request the cycle finds the card behind it (`CardCycle.handle_request`), for the
    # App's dispatches as for this comment.
    request = PairRequest.from_command(
        intent.card, command, comment=intent.comment, delivery=ctx.run_id or ""
    )
    return await cycle.handle_request(request)


async def _reply(cycle: CardCycle, target: Target, kind: str, body: str) -> Any:
    host = cycle.hosts.code if target.kind == "pull" else cycle.hosts.pm
    pr = target.number if target.kind == "pull" else None
    return await host.upsert_comment(target, make_marker(kind, target.number, pr), body)
