"""A `/pair` comment the Action received directly (a repository without the App).

The same decisions and the same replies as the App, from the same modules:
`app.domain.intake.authors.decide` on the author's permission level (from the code host, never
`author_association`) and the numeric-id allowlist, then
`app.domain.intake.answers.answer_comment`: a refused author gets one polite reply, a malformed
command its usage, `help` the help — each under the comment's own reply marker
(`<!-- pair:reply #<n> run:<comment id> -->`, edited in place on a repeat, never a second
comment) — and nothing runs. An accepted command is handled by the card cycle like a command the
App forwarded. Its 👀 usually went out before the run took the lock (`action.early`, which also
asked for the author's permission: not asked again here); when that could not be posted, the
reaction is owed in the run-state (`action.acks`) and posted once the command's record is saved,
so a refused reaction (a 502, a 401) never loses the command.

`comment_answer` is also the early acknowledgement's rule, so this module's top stays light
(the card cycle and the step types load when a comment is handled).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from action.acks import PendingAck, Reaction, record
from app.domain.intake.answers import Reply, answer_comment
from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.comment_commands import CommandError, Decision
from app.domain.intake.intent import Comment
from app.domain.intake.pair_request import PairRequest
from hosts.models import Target

if TYPE_CHECKING:
    from app.cycle.card_cycle import CardCycle, CardStep
    from app.engine.step import StepResult


class CommentContext(Protocol):
    """What handling a comment reads of its run: `ActionContext`, or the Azure Pipelines
    entry's (`action.azure.pipelines`)."""

    @property
    def workspace(self) -> Path: ...

    @property
    def allowlist(self) -> frozenset[int]: ...

    @property
    def identity_allowlist(self) -> frozenset[str]: ...

    @property
    def trigger(self) -> str: ...

    @property
    def run_id(self) -> str: ...


def comment_answer(
    intent: Comment, decision: Decision, trigger: str, fallback: str
) -> Reply | None:
    """The reply this comment gets instead of a run (refusal, usage, help), or None. Pure."""
    command = intent.command
    return answer_comment(
        decision,
        number=intent.card,
        comment_id=intent.comment.id,
        fallback=fallback,
        error=command if isinstance(command, CommandError) else None,
        verb=None if isinstance(command, CommandError) else command.verb,
        trigger=trigger,
    )


async def handle_comment(
    ctx: CommentContext,
    cycle: CardCycle,
    intent: Comment,
    *,
    delivery: str | None = None,
    acknowledge: bool = True,
    reaction: Reaction = "eyes",
    permission: str | None = None,
) -> CardStep | StepResult:
    """Authorize, acknowledge and run one comment's command.

    `delivery` names the command for the cycle's repeat check (default: the comment's id);
    `acknowledge=False` owes no reaction (a comment whose id is unknown, or one `action.early`
    already acknowledged); `reaction` is the one owed (Azure DevOps' comments take a like,
    `+1`, not 👀); `permission` is the author's level when it was already asked for."""
    # The early acknowledgement (action.early) loads this module and sends its first request
    # before pydantic loads; the step's result type brings the engine's models.
    from app.engine.step import StepResult  # noqa: PLC0415

    code = cycle.hosts.code
    target = Target("pull" if intent.is_pull else "card", intent.card)
    identities = ctx.identity_allowlist  # Azure DevOps' ids and accounts; GitHub's: empty
    if permission is None and needs_permission(intent.author, ctx.allowlist, identities):
        permission = await code.permission(intent.author_login)
    decision = decide(intent.author, permission, ctx.allowlist, identities, code.vocabulary)
    reply = comment_answer(intent, decision, ctx.trigger, ctx.run_id or "action")
    if reply is not None:
        await _reply(cycle, target, reply)
    command = intent.command
    if not decision.allowed:
        return StepResult("nothing-ready", "", "", message=f"refused: {decision.reason}")
    if isinstance(command, CommandError):
        return StepResult("nothing-ready", "", "", message=command.message)
    if reply is not None:  # help: answered, nothing runs
        return StepResult("nothing-ready", "", "", message=f"answered with {reply.kind}")
    # Owed, not posted: the reaction follows the command's record (`action.acks`).
    if acknowledge:
        owed = PendingAck(target.kind, target.number, intent.comment.id, reaction)
        record(ctx.workspace, owed)
    # On a pull request the cycle finds the card behind it (`CardCycle.handle_request`), for the
    # App's dispatches as for this comment.
    # The comment is the command: its id is the delivery, so a re-run of this workflow run is
    # recognised as a repeat, and another comment (another run) always acts.
    request = PairRequest.from_command(
        intent.card,
        command,
        comment=intent.comment,
        delivery=delivery or f"comment-{intent.comment.id}",
    )
    return await cycle.handle_request(request)


async def _reply(cycle: CardCycle, target: Target, reply: Reply) -> Any:
    host = cycle.hosts.code if target.kind == "pull" else cycle.hosts.pm
    return await host.upsert_comment(target, reply.marker, reply.text)
