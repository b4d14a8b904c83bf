"""The card cycle acting on one intent, under the lock, for both CI entries.

a notification handled before      `duplicate`, nothing else (`action.deliveries`)
the card cycle                     built for the checkout, the platform's hosts and agent
                                   environment, its log in the agent's group
acknowledgements owed              posted first (an earlier run's), then after this run's
                                   command is recorded, then at the end (`action.acks`)
dispatch                           a tick, a moved head, a dispatched request, a scope
                                   decision, or a comment (read back, authorized and
                                   acknowledged as the platform says; remembered as handled
                                   for the catch-up, `action.run.catchup`)
a command that could not run       answered once on its comment (`action.replies`), then
                                   re-raised: still the error line and exit code 2
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from action import acks, deliveries
from action.comments import handle_comment
from action.replies import answer_failed, reply_origin
from action.run.outcome import Outcome, outcome_of
from action.run.platform import AgentLog, CiPlatform
from app.cycle.card_cycle import CardCycle
from app.domain.card.binding import runner_of
from app.domain.intake.intent import Comment, HeadMoved, Intent, Run, ScopeDecision, Tick
from app.engine.step import EngineDeps
from app.errors import CommandNotRun, UserError
from app.runtime.launcher import project_launcher

__all__ = ["act_on"]


async def act_on(
    platform: CiPlatform,
    intent: Intent,
    env: dict[str, str],
    log: AgentLog,
    save: Callable[[], Awaitable[None]],
) -> Outcome:
    """One step of the card cycle for `intent`; `save` pushes the run-state (a checkpoint)."""
    root = platform.settings.workspace
    delivery = platform.delivery
    if delivery is not None and deliveries.seen(root, delivery, log.line):
        return Outcome(
            status="duplicate",
            message=f"notification {delivery} was handled by an earlier run",
        )
    deps = EngineDeps(
        launcher=project_launcher(root), env=platform.engine_env(env), on_line=log.line
    )

    async def flush_acks() -> None:
        hosts = cycle.hosts
        await acks.flush(root, hosts.code, log.line, platform.run_id, pm=hosts.pm)

    async def checkpoint() -> None:
        # A command's record is pushed first; only then is it acknowledged (`action.acks`).
        await save()
        await flush_acks()

    # The binding line goes to the run's log (the agent's group: it cannot issue commands).
    cycle = CardCycle.for_checkout(
        root,
        platform.settings.host_settings(),
        deps,
        checkpoint=checkpoint,
        runner=runner_of(env),
        say=log.line,
        run_url=platform.settings.run_url,
    )
    # Acknowledgements an earlier run owes go out first; this run's own after its record.
    await flush_acks()
    try:
        try:
            outcome = await _dispatch(platform, cycle, intent, log)
        except UserError:
            if delivery is not None:
                deliveries.remember(root, delivery, log.line)  # answered: never again
            raise
        if delivery is not None:
            deliveries.remember(root, delivery, log.line)
        return outcome
    finally:
        await flush_acks()


async def _dispatch(
    platform: CiPlatform, cycle: CardCycle, intent: Intent, log: AgentLog
) -> Outcome:
    """Hand `intent` to the card cycle; a `UserError` from a comment is answered there.

    A comment handled (run, answered or refused) is remembered under its key, so a later
    tick's catch-up (`action.run.catchup`) never takes it again."""
    if isinstance(intent, Tick):
        return outcome_of(await cycle.tick(intent.batch))
    if isinstance(intent, HeadMoved):
        return outcome_of(await cycle.handle_head_moved(intent.pull, intent.head_sha))
    try:
        if isinstance(intent, Run):
            return outcome_of(await cycle.handle_request(intent.request))
        if isinstance(intent, ScopeDecision):
            return outcome_of(await cycle.handle_scope_decision(intent.pull, intent.comment_id))
        if isinstance(intent, Comment):
            # A refused or malformed comment is answered there and returns; what raises comes
            # from running the command of an authorized author.
            intent = await platform.read_back(cycle, intent)
            handled = platform.comment_key(intent)
            how = platform.comment_handling()
            step = await handle_comment(
                how.context,
                cycle,
                intent,
                delivery=how.delivery,
                acknowledge=how.acknowledge,
                reaction=how.reaction,
                permission=how.permission,
            )
            if handled:
                deliveries.remember(platform.settings.workspace, handled, log.line)
            return outcome_of(step)
    except UserError as err:
        if isinstance(intent, Comment) and (key := platform.comment_key(intent)):
            deliveries.remember(platform.settings.workspace, key, log.line)  # answered
        origin = reply_origin(intent, platform.settings.trigger)
        if origin is not None:
            if isinstance(err, CommandNotRun):  # the cycle wrote the card's status back
                origin = replace(origin, announced_by=None)
            await answer_failed(cycle, origin, str(err), platform.run_id)
        raise
    return Outcome(status="ignored", message=f"nothing to do for {type(intent).__name__}")
