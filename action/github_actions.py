"""GitHub Actions as the run driver's platform (`action.run.platform.CiPlatform`).

    settings        ActionContext.from_env: the Actions variables and the Action's inputs
    work            the event: `action.event.classify` over the shared intake; a comment's
                    author's permission and its 👀 before the lock (`action.early`); a
                    `pair` dispatch the App did not send is delivered as this run
    engine_env      the job's environment with the agent and locus inputs, the agents' API
                    keys and `agent-command`
    git_credentials the token as an extraheader for `origin`, in this process's environment
    publish         the outputs (status, card, transition, pr) and the step summary
    acknowledgement 👀 on the comment: sent early when it could be, else owed in the run-state
                    (`action.acks`); the event comes from the runner, so nothing is read back
    continuation    the `continue` and `continue-limit` inputs; the next run is a
                    `workflow_dispatch` of this workflow (`action.continuation`, loaded only
                    when a run asks for one)
    catch-up        PAIR_CATCHUP_WINDOW_S and PAIR_CATCHUP_GRACE_S; a tick lists the
                    repository's recent comments (`action.github_catchup`, loaded only by a tick
                    that looks) and, for a missed command, becomes that comment's run: its
                    delivery `comment-<id>`, its 👀 owed and posted once it is recorded

The workflow commands themselves are `action.workflow.WorkflowCommands`.
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from action.context import ActionContext
from action.early import Receipt, acknowledge
from action.event import Comment, Intent, Run, classify, policy_of
from action.run.catchup import CatchupSettings, CatchupSource, Found, read_catchup
from action.run.continuation import (
    Continuation,
    ContinuationSettings,
    Requested,
    read_continuation,
)
from action.run.outcome import Outcome
from action.run.platform import CommentHandling, LogCommands
from action.workflow import append_summary, set_outputs

if TYPE_CHECKING:
    from app.cycle.card_cycle import CardCycle

__all__ = ["CONTINUATION_INPUTS", "GitHubActions"]

# The Action's inputs this platform reads itself (`action.context.INPUTS` has the others).
CONTINUATION_INPUTS = ("continue", "continue-limit")


class GitHubActions:
    """One `python -m action` run."""

    pull_ref = "#"

    def __init__(
        self,
        ctx: ActionContext,
        log: LogCommands,
        continuation: ContinuationSettings | None = None,
        catchup: CatchupSettings | None = None,
    ) -> None:
        self._ctx = ctx
        self._log = log
        self._receipt = Receipt()  # not asked early: the usual way
        self._continuation = continuation or ContinuationSettings()
        self._catchup = catchup or CatchupSettings()
        self._caught: Found | None = None  # the missed command this tick became the run of

    @classmethod
    def start(cls, env: dict[str, str], log: LogCommands) -> GitHubActions:
        """The run of this environment; `UserError` naming a bad variable or input."""
        continuation = read_continuation(
            env,
            enabled=("INPUT_CONTINUE",),
            limit=("INPUT_CONTINUE_LIMIT", "INPUT_CONTINUE-LIMIT"),
            labels=("input continue", "input continue-limit"),
        )
        return cls(ActionContext.from_env(env), log, continuation, read_catchup(env))

    @property
    def settings(self) -> ActionContext:
        return self._ctx

    @property
    def log(self) -> LogCommands:
        return self._log

    @property
    def run_id(self) -> str:
        return self._ctx.run_id or "local"

    @property
    def lock_owner(self) -> str:
        return f"actions:{self.run_id}"

    @property
    def delivery(self) -> str | None:
        # GitHub does not redeliver a run (a re-run is the cycle's repeat check); a tick that
        # caught up on a missed comment is that comment's run, remembered under its key.
        return self._caught.key if self._caught is not None else None

    def work(self) -> Intent:
        ctx = self._ctx
        intent = classify(ctx.event_name, ctx.read_event(), policy_of(ctx))
        if isinstance(intent, Run) and not intent.request.delivery:
            # A dispatch not sent by the App: this run is its delivery, so a re-run of it is
            # recognised as a repeat.
            delivery = f"actions-run-{ctx.run_id or uuid.uuid4().hex}"
            return replace(intent, request=replace(intent.request, delivery=delivery))
        if isinstance(intent, Comment) and ctx.event_name == "issue_comment":
            # The first API requests, before the lock, the pull and the engine's imports.
            self._receipt = acknowledge(ctx, intent, self._log.say)
        return intent

    def engine_env(self, env: dict[str, str]) -> dict[str, str]:
        ctx = self._ctx
        agent_env = {**env, **ctx.settings_env(), **ctx.agent_env()}
        if ctx.agent_command:
            agent_env["PAIR_AGENT_COMMAND"] = shlex.join(ctx.agent_command)
        return agent_env

    def git_credentials(self, origin: str, base: Mapping[str, str]) -> dict[str, str]:
        if self._ctx.github_token is None:
            return {}
        # hosts.github loads once the run holds work for git, never on the start path.
        from hosts.github.push import push_env  # noqa: PLC0415

        return push_env(base, origin, self._ctx.github_token.get_secret_value())

    def publish(self, outcome: Outcome, summary: str) -> None:
        ctx = self._ctx
        set_outputs(
            ctx.output_path,
            {
                "status": outcome.status,
                "card": str(outcome.card or ""),
                "transition": outcome.transition,
                "pr": str(outcome.pr or ""),
            },
        )
        append_summary(ctx.summary_path, summary)

    async def read_back(self, cycle: CardCycle, intent: Comment) -> Comment:
        return intent  # the runner's event payload is GitHub's own, not a claim

    def comment_handling(self) -> CommentHandling:
        early = self._receipt
        return CommentHandling(self._ctx, acknowledge=early.owed, permission=early.permission)

    @property
    def catchup(self) -> CatchupSettings:
        return self._catchup

    def catchup_source(self) -> CatchupSource | None:
        # The seam: githubkit loads only for a tick that looks for missed commands.
        from action.github_catchup import GitHubCatchup  # noqa: PLC0415

        return GitHubCatchup.build(self._ctx)

    def catch_up(self, found: Found) -> Comment:
        self._caught = found
        self._receipt = Receipt()  # its 👀 is owed, posted once the command is recorded
        return found.intent

    def comment_key(self, intent: Comment) -> str:
        return f"comment-{intent.comment.id}"  # the delivery its command journals, too

    @property
    def continuation(self) -> ContinuationSettings:
        return self._continuation

    async def request_continuation(self, after: Continuation) -> Requested:
        # The seam: githubkit loads only for a run that asks for the next one.
        from action.continuation import dispatch, workflow_target  # noqa: PLC0415

        ctx = self._ctx
        target = workflow_target(ctx.host_env, ctx.read_event())
        if isinstance(target, str):
            return Requested(False, target)
        return await dispatch(ctx, target, after)
