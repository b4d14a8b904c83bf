"""`python -m action`: one invocation of the composite Action, one step of one card or batch.

    read the Actions environment and the event      action.context, action.event
    mask every secret before anything is printed    action.workflow.mask
    a comment: its author's permission, and 👀      action.early — the first API requests,
    for a command that runs                         before the lock and the engine load
    take the `pair-state` lock (a pushed commit)    action.statebranch — held elsewhere:
                                                    exit cleanly as nothing-ready
    pull the run-state, act on the intent           app.cycle.card_cycle (one step at most)
    push the run-state, release the lock            even when the step failed
    write outputs and the job summary               status, card, transition, pr

A command or scope decision from a comment (`issue_comment`, or the App's `repository_dispatch`
carrying the comment) that a `UserError` stops is answered on that comment once, with the App's
text under the App's marker (`app.domain.replies`: a re-run edits it); the `::error::` line and
exit code 2 stay. A tick is never answered: no person asked for it.

The agent's streamed output goes into a collapsible log group with workflow commands stopped,
so nothing an agent prints can set an output, add a mask or end the group. Exit codes: 0 for a
step taken or nothing to do, 1 for a blocked step, an operator error or a host or git failure,
2 for a user error.

Every failure pairbot expects (its own errors, a host's, git's: `app.failures`) ends the run as
ONE `::error::` line that says what failed, where, and what to do next; the traceback is printed
only when the run has debug logging on (`RUNNER_DEBUG=1`, GitHub's "Re-run with debug
logging"). A command carries the delivery it came in, so a re-run is recognised: the App's
webhook delivery for a dispatch (this run's id when the dispatch carries none), the comment's id
for a comment the Action saw itself.

What runs before the first API request is kept light (no pydantic, no githubkit, no asyncio):
the context, the intake and, for a comment, `action.early`'s bare httpx requests. The engine,
the hosts and the state branch load after it, and an idle tick never loads the hosts at all.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from action.context import ActionContext
from action.event import (
    Comment,
    HeadMoved,
    Intent,
    Run,
    ScopeDecision,
    Tick,
    classify,
    ignored_reason,
    policy_of,
)
from action.replies import answer_failed, reply_origin
from action.workflow import AgentLog, agent_log, append_summary, escape_data, mask, set_outputs
from app.errors import CommandNotRun, PairbotError, UserError

if TYPE_CHECKING:
    from action.early import Receipt
    from action.statebranch import StateBranch
    from app.cycle.card_cycle import CardCycle


@dataclass(frozen=True)
class Outcome:
    """What this invocation did, for the outputs and the job summary."""

    status: str
    card: int | None = None
    transition: str = ""
    pr: int | None = None
    message: str = ""
    explanation: str = ""
    code: int = 0


def main(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> int:
    """Run one invocation; returns the process exit code."""
    env = dict(os.environ if env is None else env)
    out = stream or sys.stdout
    try:
        ctx = ActionContext.from_env(env)
    except PairbotError as err:
        out.write(f"::error::{escape_data(str(err))}\n")
        return err.exit_code
    for secret in ctx.secrets():
        mask(secret, out)
    try:
        intent = classify(ctx.event_name, ctx.read_event(), policy_of(ctx))
        reason = ignored_reason(intent)
        if reason is not None:
            outcome = Outcome(status="ignored", message=reason)
        else:
            receipt = None
            if isinstance(intent, Comment) and ctx.event_name == "issue_comment":
                from action.early import acknowledge  # noqa: PLC0415

                receipt = acknowledge(ctx, intent, lambda line: out.write(line + "\n"))
            import asyncio  # noqa: PLC0415  # after the first request: tens of ms of imports

            outcome = asyncio.run(_locked(ctx, intent, env, out, receipt))
    except Exception as err:
        from app.failures import explain  # noqa: PLC0415

        explained = explain(err)
        if explained is None:
            raise  # a bug: its traceback is what a report needs
        if env.get("RUNNER_DEBUG") == "1":
            traceback.print_exc()
        out.write(f"::error::{escape_data(explained.line)}\n")
        outcome = Outcome(status="error", message=explained.line, code=explained.code)
    _finish(ctx, outcome, out)
    return outcome.code


async def _locked(
    ctx: ActionContext,
    intent: Intent,
    env: dict[str, str],
    out: TextIO,
    receipt: Receipt | None = None,
) -> Outcome:
    import uuid  # noqa: PLC0415
    from datetime import UTC, datetime  # noqa: PLC0415

    from action.statebranch import StateBranch, run_locked  # noqa: PLC0415

    root = ctx.workspace
    # A repository that only adds the workflow of docs/action.md has no `.pair/`: every default
    # applies, and the run-state still needs its directory (it travels on `pair-state`).
    (root / ".pair").mkdir(exist_ok=True)
    from action.credentials import drop_persisted_credentials  # noqa: PLC0415

    drop_persisted_credentials(root)  # before any agent can read .git/config
    _authenticate_git(ctx, root)
    run_id = f"{ctx.run_id or 'local'}-{uuid.uuid4().hex[:8]}"
    branch = StateBranch(
        root,
        # The real clock, not the engine's `utc_now`: its module loads the step machinery.
        clock=lambda: datetime.now(UTC),
        host_id=f"actions:{ctx.run_id or 'local'}",
        stale_after_s=ctx.stale_after_s,
    )

    if isinstance(intent, Tick) and intent.batch is None and _idle_unlocked(branch, root):
        from app.cycle.schedule import IDLE_MESSAGE  # noqa: PLC0415

        return Outcome(status="nothing-ready", message=IDLE_MESSAGE)

    async def act(save: Callable[[], Awaitable[None]]) -> Outcome:
        idle = _idle(root, intent)
        if idle is not None:
            return idle
        with agent_log("pairbot: agent output", out) as log:
            return await _act(ctx, intent, env, log, save, receipt=receipt)

    # A tick that finds the lock taken skips: the next tick comes. A command must not be lost
    # (GitHub keeps one pending run per concurrency group and cancels the rest), so it waits
    # for the running step, bounded. The lock, the pull, the checkpoints, the push even of a
    # failed step and the release are the state branch's (`run_locked`, shared with
    # `python -m action.azure`).
    wait = 0.0 if isinstance(intent, Tick) else ctx.lock_wait_s
    outcome = await run_locked(branch, root, run_id, act, lambda o: o.status, wait_s=wait)
    if outcome is None:
        message = "another pairbot run holds the pair-state lock; this one exits"
        if isinstance(intent, Comment):
            # Its 👀 may already be on the comment (`action.early`): say it did not run.
            message = (
                f"another pairbot run held the pair-state lock for {wait:.0f} s; the command "
                f"of comment {intent.comment.id} did not run: comment it again"
            )
        return Outcome(status="nothing-ready", message=message)
    return outcome


def _idle_unlocked(branch: StateBranch, root: Path) -> bool:
    """Whether a scheduled tick of every batch has nothing to do, judged without the lock.

    An idle tick writes nothing, so it needs no lock: the state branch is read (one fetch,
    no push) into a scratch directory, never into the checkout — a file another run deletes
    before this one takes the lock must not come back with its push. Idle means: no batch on
    the checkout's branch or the state branch that a tick would look at, no reaction owed,
    and no lock on the branch (a lock, even a dead run's, takes the locked path, which
    reclaims a stale one). Anything else takes the locked path, which judges again.
    """
    import tempfile  # noqa: PLC0415

    from action.acks import read_pending  # noqa: PLC0415
    from app.cycle.schedule import tick_candidates  # noqa: PLC0415

    if tick_candidates(root):  # a batch committed on the checkout's branch
        return False
    with tempfile.TemporaryDirectory(prefix="pairbot-peek-") as scratch:
        state = Path(scratch)
        peek = branch.pull(state)
        return not (peek.locked or read_pending(state) or tick_candidates(state))


def _idle(root: Path, intent: Intent) -> Outcome | None:
    """A scheduled tick of every batch with nothing to run, answered from the pulled run-state.

    The candidates are the card cycle's own (`app.cycle.schedule.tick_candidates`, which the
    full tick walks too); with none, and no reaction owed from an earlier run, the tick would
    build its hosts, say the binding and answer nothing-ready without an API call. Answering
    here skips the hosts, the manifest's models and the project config; anything else (a named
    batch, a candidate, an owed reaction) takes the full path.
    """
    if not isinstance(intent, Tick) or intent.batch is not None:
        return None
    from action.acks import read_pending  # noqa: PLC0415
    from app.cycle.schedule import IDLE_MESSAGE, tick_candidates  # noqa: PLC0415

    if read_pending(root) or tick_candidates(root):
        return None
    return Outcome(status="nothing-ready", message=IDLE_MESSAGE)


def _authenticate_git(ctx: ActionContext, root: Path) -> None:
    """pairbot's own git (the state branch, card-branch fetches) authenticates with the token
    through environment configuration, so a checkout needs no persisted credential
    (`persist-credentials: false`) that an agent could read from `.git/config`.

    Set in this process's environment only: the agent's environment is built from the
    snapshot taken before, and `agent_environment` strips `GIT_CONFIG_*` besides.
    """
    if ctx.github_token is None:
        return
    from app.cycle.worktree import git  # noqa: PLC0415
    from hosts.github.push import push_env  # noqa: PLC0415

    url = git(root, "remote", "get-url", "origin", check=False)
    if url.startswith(("http://", "https://")):
        os.environ.update(push_env(os.environ, url, ctx.github_token.get_secret_value()))


def _deps(ctx: ActionContext, env: dict[str, str], log: AgentLog) -> Any:
    from app.engine.step import EngineDeps  # noqa: PLC0415
    from app.runtime.launcher import project_launcher  # noqa: PLC0415

    agent_env = {**env, **ctx.settings_env(), **ctx.agent_env()}
    if ctx.agent_command:
        import shlex  # noqa: PLC0415

        agent_env["PAIR_AGENT_COMMAND"] = shlex.join(ctx.agent_command)
    return EngineDeps(
        launcher=project_launcher(ctx.workspace),
        env=agent_env,
        on_line=log.line,
    )


async def _act(
    ctx: ActionContext,
    intent: Intent,
    env: dict[str, str],
    log: AgentLog,
    save: Callable[[], Awaitable[None]] | None = None,
    *,
    receipt: Receipt | None = None,
) -> Outcome:
    from action import acks  # noqa: PLC0415
    from app.cycle.card_cycle import CardCycle  # noqa: PLC0415
    from app.domain.binding import runner_of  # noqa: PLC0415

    run = ctx.run_id or "local"

    async def checkpoint() -> None:
        # A command's record is pushed first; only then is it acknowledged (`action.acks`).
        if save is not None:
            await save()
        await acks.flush(ctx.workspace, cycle.hosts.code, log.line, run)

    # The binding line goes to the run's log (workflow commands are off in this group).
    cycle = CardCycle.for_checkout(
        ctx.workspace,
        ctx.host_settings(),
        _deps(ctx, env, log),
        checkpoint=checkpoint,
        runner=runner_of(env),
        say=log.line,
        run_url=ctx.run_url,
    )
    # Reactions an earlier run owes go out first; this run's own after its command's record.
    await acks.flush(ctx.workspace, cycle.hosts.code, log.line, run)
    try:
        return await _dispatch(ctx, cycle, intent, receipt)
    finally:
        await acks.flush(ctx.workspace, cycle.hosts.code, log.line, run)


async def _dispatch(
    ctx: ActionContext, cycle: CardCycle, intent: Intent, receipt: Receipt | None = None
) -> Outcome:
    """Hand `intent` to the card cycle; a `UserError` from a comment is answered there.

    A comment's `receipt` (`action.early`) carries the permission already read and whether
    its 👀 is still owed: never a second lookup, never a second reaction."""
    import uuid  # noqa: PLC0415

    if isinstance(intent, Tick):
        return _outcome(await cycle.tick(intent.batch))
    if isinstance(intent, HeadMoved):
        return _outcome(await cycle.handle_head_moved(intent.pull, intent.head_sha))
    try:
        if isinstance(intent, Run):
            request = intent.request
            if not request.delivery:  # a dispatch not sent by the App: this run is its delivery
                request = replace(request, delivery=f"actions-run-{ctx.run_id or uuid.uuid4().hex}")
            return _outcome(await cycle.handle_request(request))
        if isinstance(intent, ScopeDecision):
            return _outcome(await cycle.handle_scope_decision(intent.pull, intent.comment_id))
        if isinstance(intent, Comment):
            from action.comments import handle_comment  # noqa: PLC0415

            # A refused or malformed comment is answered there and returns; what raises
            # comes from running the command of an authorized author.
            from action.early import Receipt  # noqa: PLC0415

            early = receipt or Receipt()  # not asked early: the usual way
            step = await handle_comment(
                ctx, cycle, intent, acknowledge=early.owed, permission=early.permission
            )
            return _outcome(step)
    except UserError as err:
        origin = reply_origin(intent, ctx.trigger)
        if origin is not None:
            if isinstance(err, CommandNotRun):  # the cycle wrote the card's status back
                origin = replace(origin, announced_by=None)
            await answer_failed(cycle, origin, str(err), ctx.run_id or "action")
        raise  # still the `::error::` line and exit code 2 (`main`)
    return Outcome(status="ignored", message=f"nothing to do for {type(intent).__name__}")


def _outcome(step: Any) -> Outcome:
    result = getattr(step, "result", step)
    explanation = getattr(step, "explanation", None)
    return Outcome(
        status=getattr(step, "status", None) or result.state,
        card=getattr(step, "card", None),
        transition=result.transition,
        pr=getattr(step, "pr", None),
        message=result.message or "",
        explanation=explanation.to_markdown() if explanation is not None else "",
        code=1 if result.state == "blocked" else 0,
    )


def _finish(ctx: ActionContext, outcome: Outcome, out: TextIO) -> None:
    set_outputs(
        ctx.output_path,
        {
            "status": outcome.status,
            "card": str(outcome.card or ""),
            "transition": outcome.transition,
            "pr": str(outcome.pr or ""),
        },
    )
    lines = [
        "## pairbot",
        "",
        f"**{outcome.status}**"
        + (f" — card #{outcome.card}" if outcome.card else "")
        + (f", `{outcome.transition}`" if outcome.transition else ""),
        "",
    ]
    if outcome.message:
        lines += [escape_summary(outcome.message), ""]
    if outcome.explanation:
        lines += [outcome.explanation, ""]
    append_summary(ctx.summary_path, "\n".join(lines))
    # An error's message is the `::error::` line already written: not repeated here.
    said = "" if outcome.status == "error" else outcome.message
    out.write(f"pairbot: {outcome.status} {outcome.transition} {said}".rstrip() + "\n")


def escape_summary(text: str) -> str:
    """A one-paragraph message for the Markdown summary (no HTML, no pings)."""
    from app.domain import mdtext  # noqa: PLC0415

    return mdtext.inline(text)


if __name__ == "__main__":
    sys.exit(main())
