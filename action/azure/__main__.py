"""`python -m action.azure`: one run of an Azure Pipelines job, one step of one card or batch.

    read the job's variables                        action.azure.settings (once)
    mask every secret before anything is printed    ##vso[task.setvariable …;issecret=true]
    what the run is for                             BUILD_REASON: Schedule or Manual → a tick;
                                                    ResourceTrigger → the service-hook
                                                    notification (action.azure.hook)
    take the `pair-state` lock (a pushed commit)    action.statebranch.run_locked, as the
                                                    GitHub Action does — held elsewhere: a tick
                                                    exits as nothing-ready, a command waits
    skip a notification already handled             action.azure.deliveries (on the branch)
    act on it                                       app.cycle.card_cycle (one step at most);
                                                    a comment is read back, then authorized as
                                                    the App does (action.comments.handle_comment;
                                                    bots and PAIR_ALLOWLIST by identity id)
    acknowledge it                                  a like on the command's comment once its
                                                    record is pushed (action.acks)
    push the run-state, release the lock            even when the step failed
    write the Markdown summary                      ##vso[task.uploadsummary]

pairbot's git (the state branch, card branches) authenticates with the job's token as an
`http.<origin>.extraheader` passed in this process's environment (`hosts.azure_devops.push`),
never in argv, a URL or `.git/config`: the checkout runs with `persistCredentials: false`, and
any credential a checkout did persist is removed before an agent runs.

Every failure pairbot expects ends the run as ONE `##vso[task.logissue type=error]` line that
says what failed and what to do next; the traceback is printed only with `System.Debug` on.
Exit codes: 0 for a step taken or nothing to do, 1 for a blocked step, an operator error or a
host or git failure, 2 for a user error. A command refused by a `UserError` is answered on its
comment once (the App's text and marker).
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from action.azure.settings import PipelineSettings
from action.azure.vso import AgentLog, agent_log, log_error, mask, upload_summary
from app.errors import PairbotError, UserError
from app.failures import explain

if TYPE_CHECKING:
    from action.azure.hook import Notification
    from app.cycle.card_cycle import CardCycle
    from app.domain.intake import Policy
    from hosts.models import Comment as HostComment

SUMMARY_FILE = "pairbot-summary.md"


@dataclass(frozen=True)
class Outcome:
    """What this run did, for the log and the summary."""

    status: str
    card: int | None = None
    transition: str = ""
    pr: int | None = None
    message: str = ""
    code: int = 0


@dataclass(frozen=True)
class _CommentRun:
    """What `action.comments.handle_comment` reads of a pipeline run."""

    workspace: Path
    trigger: str
    run_id: str
    # Azure DevOps identities are GUIDs: GitHub's numeric allowlist never applies here; the
    # pipeline's PAIR_ALLOWLIST holds identity ids.
    allowlist: frozenset[int] = frozenset()
    identity_allowlist: frozenset[str] = frozenset()


def main(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> int:
    """Run one step; returns the process exit code."""
    env = dict(os.environ if env is None else env)
    out = stream or sys.stdout
    try:
        settings = PipelineSettings.from_env(env)
    except PairbotError as err:
        log_error(str(err), out)
        return err.exit_code
    for secret in settings.secrets():
        mask(secret, out)
    try:
        outcome = _run(settings, env, out)
    except Exception as err:
        explained = explain(err)
        if explained is None:
            raise  # a bug: its traceback is what a report needs
        if settings.debug:
            traceback.print_exc()
        log_error(explained.line, out)
        outcome = Outcome(status="error", message=explained.line, code=explained.code)
    _finish(settings, outcome, out)
    return outcome.code


def _run(settings: PipelineSettings, env: dict[str, str], out: TextIO) -> Outcome:
    """What this run is for, then the step under the state-branch lock."""
    notification: Notification | None = None
    if settings.reason == "other":
        return Outcome(
            status="ignored",
            message=f"BUILD_REASON={settings.build_reason}: pairbot acts on a schedule, a manual "
            "run or a service-hook notification (resources: webhooks)",
        )
    if settings.reason == "webhook":
        from action.azure.hook import read_notification  # noqa: PLC0415
        from app.domain.intake import Ignore, Malformed  # noqa: PLC0415

        # PipelineSettings refuses a webhook run without the path.
        path = settings.payload_path or Path(os.devnull)
        policy = _policy(settings)
        notification = read_notification(path, policy, settings.secrets())
        intent, repo = notification.hook.intent, notification.hook.repo
        if isinstance(intent, Ignore | Malformed):
            return Outcome(status="ignored", message=intent.reason)
        ours = {settings.project, f"{settings.project}/{settings.repository}"}
        if repo.casefold() not in {name.casefold() for name in ours}:
            return Outcome(
                status="ignored",
                message=f"the notification is for {repo}, not this pipeline's "
                f"{settings.project}/{settings.repository}",
            )
    return asyncio.run(_locked(settings, notification, env, out))


async def _locked(
    settings: PipelineSettings, notification: Notification | None, env: dict[str, str], out: TextIO
) -> Outcome:
    from action.credentials import drop_persisted_credentials  # noqa: PLC0415
    from action.statebranch import StateBranch, run_locked  # noqa: PLC0415
    from app.engine.step import utc_now  # noqa: PLC0415

    root = settings.sources
    (root / ".pair").mkdir(exist_ok=True)  # the run-state needs its directory
    drop_persisted_credentials(root)  # before any agent can read .git/config
    _authenticate_git(settings, root)
    branch = StateBranch(
        root,
        clock=utc_now,
        host_id=f"azure-pipelines:{settings.run_id}",
        stale_after_s=settings.stale_after_s,
    )

    async def act(save: Callable[[], Awaitable[None]]) -> Outcome:
        with agent_log("pairbot: agent output", out) as log:
            return await _act(settings, notification, env, log, save)

    # A tick that finds the lock taken skips (the next schedule comes); a command waits.
    wait = 0.0 if notification is None else settings.lock_wait_s
    run_id = f"{settings.run_id}-{os.getpid()}"
    done = await run_locked(branch, root, run_id, act, lambda o: o.status, wait_s=wait)
    if done is None:
        return Outcome(
            status="nothing-ready",
            message="another pairbot run holds the pair-state lock; this one exits",
        )
    return done


def _authenticate_git(settings: PipelineSettings, root: Path) -> None:
    """The job's token as an extraheader for `origin`'s server, in this process's environment
    only (the agent's environment drops `GIT_CONFIG_*` and every `*TOKEN*`)."""
    from app.cycle.worktree import git  # noqa: PLC0415
    from hosts.azure_devops.push import push_config  # noqa: PLC0415
    from hosts.git import git_env  # noqa: PLC0415

    url = git(root, "remote", "get-url", "origin", check=False)
    if url.startswith(("http://", "https://")):
        token = settings.token.get_secret_value()
        config = push_config(url, token, os.environ)
        os.environ.update(git_env(config=config, base=os.environ))


async def _act(
    settings: PipelineSettings,
    notification: Notification | None,
    env: dict[str, str],
    log: AgentLog,
    save: Callable[[], Awaitable[None]],
) -> Outcome:
    from action.azure import deliveries  # noqa: PLC0415
    from app.cycle.card_cycle import CardCycle  # noqa: PLC0415
    from app.domain.binding import runner_of  # noqa: PLC0415
    from app.engine.step import EngineDeps  # noqa: PLC0415
    from app.runtime.launcher import project_launcher  # noqa: PLC0415

    root = settings.sources
    if notification is not None and deliveries.seen(root, notification.id, log.line):
        return Outcome(
            status="duplicate",
            message=f"notification {notification.id} was handled by an earlier run",
        )
    deps = EngineDeps(launcher=project_launcher(root), env=env, on_line=log.line)

    async def checkpoint() -> None:
        # A command's record is pushed first; only then is it acknowledged (`action.acks`).
        await save()
        await _flush_acks(settings, cycle, log)

    cycle = CardCycle.for_checkout(
        root,
        settings.host_settings(),
        deps,
        checkpoint=checkpoint,
        runner=runner_of(env),
        say=log.line,
        run_url=settings.run_url,
    )
    # Acknowledgements an earlier run owes go out first; this run's own after its record.
    await _flush_acks(settings, cycle, log)
    try:
        if notification is None:
            return _outcome(await cycle.tick())
        try:
            outcome = await _dispatch(settings, cycle, notification)
        except UserError:
            deliveries.remember(root, notification.id, log.line)  # answered: never again
            raise
        deliveries.remember(root, notification.id, log.line)
        return outcome
    finally:
        await _flush_acks(settings, cycle, log)


async def _flush_acks(settings: PipelineSettings, cycle: CardCycle, log: AgentLog) -> None:
    """Post the likes (or, where none is possible, the replies) owed to commands' comments."""
    from action import acks  # noqa: PLC0415

    hosts = cycle.hosts
    await acks.flush(settings.sources, hosts.code, log.line, settings.run_id, pm=hosts.pm)


async def _dispatch(
    settings: PipelineSettings, cycle: CardCycle, notification: Notification
) -> Outcome:
    """Hand the notification's intent to the card cycle; a `UserError` is answered there."""
    from action.comments import handle_comment  # noqa: PLC0415
    from action.replies import answer_failed, reply_origin  # noqa: PLC0415
    from app.domain.intake import Comment, HeadMoved, ScopeDecision  # noqa: PLC0415
    from app.errors import CommandNotRun  # noqa: PLC0415

    intent = notification.hook.intent
    if isinstance(intent, HeadMoved):
        return _outcome(await cycle.handle_head_moved(intent.pull, intent.head_sha))
    try:
        if isinstance(intent, ScopeDecision):
            return _outcome(await cycle.handle_scope_decision(intent.pull, intent.comment_id))
        if isinstance(intent, Comment):
            found = await _confirm(settings, cycle, intent)
            # The comment as Azure DevOps holds it names its id (a work-item notification may
            # not): the like that acknowledges the command goes there.
            intent = replace(intent, comment=replace(intent.comment, id=found.id))
            run = _CommentRun(
                settings.sources,
                settings.trigger,
                settings.run_id,
                identity_allowlist=settings.allowlist,
            )
            step = await handle_comment(
                run, cycle, intent, delivery=f"azure-{notification.id}", reaction="+1"
            )
            return _outcome(step)
    except UserError as err:
        origin = reply_origin(intent, settings.trigger)
        if origin is not None:
            if isinstance(err, CommandNotRun):  # the cycle wrote the card's status back
                origin = replace(origin, announced_by=None)
            await answer_failed(cycle, origin, str(err), settings.run_id)
        raise
    return Outcome(status="ignored", message=f"nothing to do for {type(intent).__name__}")


async def _confirm(settings: PipelineSettings, cycle: CardCycle, intent: Any) -> HostComment:
    """Read the comment back from Azure DevOps: the payload is a claim (`action.azure.hook`)."""
    from action.azure.hook import UnconfirmedNotification, confirms  # noqa: PLC0415
    from hosts.models import Target  # noqa: PLC0415

    target = Target("pull" if intent.is_pull else "card", intent.card)
    host = cycle.hosts.code if intent.is_pull else cycle.hosts.pm
    comments = await host.list_comments(target)
    found = confirms(comments, intent, _policy(settings))
    if found is None:
        where = f"pull request !{intent.card}" if intent.is_pull else f"work item #{intent.card}"
        raise UnconfirmedNotification(
            f"the notification claims a comment by {intent.author_login or 'someone'} on "
            f"{where} that Azure DevOps does not hold; nothing ran (a forged or stale "
            "payload: check who can reach the incoming webhook)"
        )
    return found


def _policy(settings: PipelineSettings) -> Policy:
    from app.domain.intake import Policy  # noqa: PLC0415

    return Policy(trigger=settings.trigger, identity_allowlist=settings.allowlist)


def _outcome(step: Any) -> Outcome:
    result = getattr(step, "result", step)
    return Outcome(
        status=getattr(step, "status", None) or result.state,
        card=getattr(step, "card", None),
        transition=result.transition,
        pr=getattr(step, "pr", None),
        message=result.message or "",
        code=1 if result.state == "blocked" else 0,
    )


def _finish(settings: PipelineSettings, outcome: Outcome, out: TextIO) -> None:
    """The run's Markdown summary (uploaded to its summary tab) and one closing log line."""
    from app.domain import mdtext  # noqa: PLC0415

    lines = [
        "## pairbot",
        "",
        f"**{outcome.status}**"
        + (f" — card #{outcome.card}" if outcome.card else "")
        + (f", `{outcome.transition}`" if outcome.transition else "")
        + (f", PR !{outcome.pr}" if outcome.pr else ""),
        "",
    ]
    if outcome.message:
        lines += [mdtext.inline(outcome.message), ""]
    if settings.summary_dir is not None:
        path = settings.summary_dir / SUMMARY_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines), encoding="utf-8")
        except OSError as err:
            print(f"pairbot: could not write the summary ({err.strerror})", file=sys.stderr)
        else:
            upload_summary(path, out)
    said = "" if outcome.status == "error" else outcome.message
    out.write(
        " ".join(part for part in ("pairbot:", outcome.status, outcome.transition, said) if part)
        + "\n"
    )
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
