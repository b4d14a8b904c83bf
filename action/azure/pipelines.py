"""Azure Pipelines as the run driver's platform (`action.run.platform.CiPlatform`).

    settings        PipelineSettings.from_env: the job's predefined variables, read once
    work            BUILD_REASON: Schedule or Manual → a tick of every batch; ResourceTrigger →
                    the service-hook notification (`action.azure.hook`), which must name this
                    pipeline's project (and repository); anything else → nothing to do
    delivery        the notification's id: a redelivered one does nothing twice
                    (`action.deliveries`, on the state branch)
    engine_env      the job's environment, as it is
    git_credentials the job's token as an `http.<origin>.extraheader` in this process's
                    environment (`hosts.azure_devops.push`), never argv, a URL or .git/config
    publish         the Markdown summary, written to AGENT_TEMPDIRECTORY and uploaded to the
                    run's summary tab
    acknowledgement the comment read back from Azure DevOps first (the payload is a claim,
                    `action.azure.hook.confirms`), then a like on it once its command's record
                    is pushed (`action.acks`); who may act as the App decides, with
                    PAIR_ALLOWLIST's identity ids and accounts
    continuation    PAIR_CONTINUE and PAIR_CONTINUE_LIMIT; the next run is a run of this
                    pipeline (SYSTEM_DEFINITIONID) on this branch (BUILD_SOURCEBRANCH), queued
                    through the SDK (`action.azure.continuation`, loaded only when asked for)
    catch-up        PAIR_CATCHUP_WINDOW_S and PAIR_CATCHUP_GRACE_S; a scheduled or manual run
                    lists the project's recent work-item comments (`action.azure.catchup`)
                    and, for a command no notification brought, becomes that comment's run:
                    delivery `wi<item>:c<comment>`, a like once it is recorded

The logging commands themselves are `action.azure.vso.LoggingCommands`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from action.azure.hook import (
    Notification,
    UnconfirmedNotification,
    as_confirmed,
    confirms,
    read_notification,
)
from action.azure.settings import PipelineSettings
from action.azure.vso import LoggingCommands
from action.run.catchup import CatchupSettings, CatchupSource, Found, read_catchup
from action.run.continuation import (
    Continuation,
    ContinuationSettings,
    Requested,
    read_continuation,
)
from action.run.outcome import Outcome
from action.run.platform import CommentHandling
from action.run.settings import get
from app.domain.intake.azure_hooks import workitem_comment_key
from app.domain.intake.intent import Comment, Ignore, Intent, Malformed, Policy, Tick
from hosts.azure_devops.push import push_config
from hosts.git import git_env
from hosts.models import Target

if TYPE_CHECKING:
    from app.cycle.card_cycle import CardCycle

__all__ = ["SUMMARY_FILE", "AzurePipelines", "comment_key"]

SUMMARY_FILE = "pairbot-summary.md"


def comment_key(target: Target, comment_id: str) -> str:
    """How a handled comment is remembered in `.pair/deliveries.json`: `wi<item>:c<comment>`
    on a work item (`workitem_comment_key`: Azure Boards numbers comments per item),
    `pr<pull>:<thread>/<comment>` on a pull request; "" without an id. Pure."""
    if target.kind == "pull":
        return f"pr{target.number}:{comment_id}" if comment_id else ""
    if not comment_id.isdigit():
        return ""
    return workitem_comment_key(target.number, int(comment_id), None, None, "")


@dataclass(frozen=True)
class _CommentRun:
    """What `action.comments.handle_comment` reads of a pipeline run."""

    workspace: Path
    trigger: str
    run_id: str
    # Azure DevOps identities are GUIDs: GitHub's numeric allowlist never applies here; the
    # pipeline's PAIR_ALLOWLIST holds identity ids and accounts.
    allowlist: frozenset[int] = frozenset()
    identity_allowlist: frozenset[str] = frozenset()


class AzurePipelines:
    """One `python -m action.azure` run."""

    pull_ref = "!"

    def __init__(
        self,
        settings: PipelineSettings,
        log: LoggingCommands,
        continuation: ContinuationSettings | None = None,
        env: Mapping[str, str] | None = None,
        catchup: CatchupSettings | None = None,
    ) -> None:
        self._settings = settings
        self._log = log
        self._notification: Notification | None = None  # a ResourceTrigger run's, once read
        self._continuation = continuation or ContinuationSettings()
        self._env = dict(env or {})  # the job's: SYSTEM_DEFINITIONID, BUILD_SOURCEBRANCH
        self._catchup = catchup or CatchupSettings()
        self._caught: Found | None = None  # the missed command this tick became the run of

    @classmethod
    def start(cls, env: dict[str, str], log: LoggingCommands) -> AzurePipelines:
        """The run of this environment; `UserError` naming a bad variable."""
        continuation = read_continuation(
            env,
            enabled=("PAIR_CONTINUE",),
            limit=("PAIR_CONTINUE_LIMIT",),
            labels=("PAIR_CONTINUE", "PAIR_CONTINUE_LIMIT"),
        )
        settings = PipelineSettings.from_env(env)
        return cls(settings, log, continuation, env, read_catchup(env))

    @property
    def settings(self) -> PipelineSettings:
        return self._settings

    @property
    def log(self) -> LoggingCommands:
        return self._log

    @property
    def run_id(self) -> str:
        return self._settings.run_id

    @property
    def lock_owner(self) -> str:
        return f"azure-pipelines:{self.run_id}"

    @property
    def delivery(self) -> str | None:
        if self._caught is not None:
            return self._caught.key  # a caught-up comment: remembered under its own key
        return self._notification.id if self._notification is not None else None

    def work(self) -> Intent:
        settings = self._settings
        if settings.reason == "other":
            return Ignore(
                f"BUILD_REASON={settings.build_reason}: pairbot acts on a schedule, a manual "
                "run or a service-hook notification (resources: webhooks)"
            )
        if settings.reason == "tick":
            return Tick()
        # PipelineSettings refuses a webhook run without the path.
        path = settings.payload_path or Path(os.devnull)
        notification = read_notification(path, self._policy(), settings.secrets())
        intent, repo = notification.hook.intent, notification.hook.repo
        if isinstance(intent, Ignore | Malformed):
            return intent
        ours = {settings.project, f"{settings.project}/{settings.repository}"}
        if repo.casefold() not in {name.casefold() for name in ours}:
            return Ignore(
                f"the notification is for {repo}, not this pipeline's "
                f"{settings.project}/{settings.repository}"
            )
        self._notification = notification
        return intent

    def engine_env(self, env: dict[str, str]) -> dict[str, str]:
        return dict(env)

    def git_credentials(self, origin: str, base: Mapping[str, str]) -> dict[str, str]:
        token = self._settings.token.get_secret_value()
        return git_env(config=push_config(origin, token, base), base=base)

    def publish(self, outcome: Outcome, summary: str) -> None:
        if self._settings.summary_dir is None:
            return
        path = self._settings.summary_dir / SUMMARY_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(summary, encoding="utf-8")
        except OSError as err:
            print(f"pairbot: could not write the summary ({err.strerror})", file=sys.stderr)
        else:
            self._log.upload_summary(path)

    async def read_back(self, cycle: CardCycle, intent: Comment) -> Comment:
        """The comment as Azure DevOps holds it: the notification is a claim
        (`action.azure.hook`). A work-item notification may name no comment id: the like that
        acknowledges the command goes to the one found. A comment the catch-up listed is the
        host's own, not a claim: it is taken as listed."""
        if self._caught is not None:
            return intent
        target = Target("pull" if intent.is_pull else "card", intent.card)
        host = cycle.hosts.code if intent.is_pull else cycle.hosts.pm
        found = confirms(await host.list_comments(target), intent, self._policy())
        if found is None:
            where = f"work item #{intent.card}"
            if intent.is_pull:
                where = f"pull request !{intent.card}"
            raise UnconfirmedNotification(
                f"the notification claims a comment by {intent.author_login or 'someone'} on "
                f"{where} that Azure DevOps does not hold; nothing ran (a forged or stale "
                "payload: check who can reach the incoming webhook)"
            )
        return as_confirmed(intent, found)

    def comment_handling(self) -> CommentHandling:
        settings = self._settings
        run = _CommentRun(
            settings.workspace,
            settings.trigger,
            settings.run_id,
            identity_allowlist=settings.allowlist,
        )
        return CommentHandling(run, delivery=f"azure-{self.delivery}", reaction="+1")

    @property
    def catchup(self) -> CatchupSettings:
        return self._catchup

    def catchup_source(self) -> CatchupSource | None:
        # The seam: the SDK loads only for a tick that looks for missed commands.
        from action.azure.catchup import AzureCatchup  # noqa: PLC0415

        return AzureCatchup.build(self._settings)

    def catch_up(self, found: Found) -> Comment:
        self._caught = found
        return found.intent

    def comment_key(self, intent: Comment) -> str:
        target = Target("pull" if intent.is_pull else "card", intent.card)
        return comment_key(target, intent.comment.id)

    @property
    def continuation(self) -> ContinuationSettings:
        return self._continuation

    async def request_continuation(self, after: Continuation) -> Requested:
        definition = get(self._env, "SYSTEM_DEFINITIONID") or ""
        ref = get(self._env, "BUILD_SOURCEBRANCH") or ""
        if not definition.isdigit() or not ref.startswith("refs/"):
            return Requested(
                False,
                f"SYSTEM_DEFINITIONID={definition!r} or BUILD_SOURCEBRANCH={ref!r} names no "
                "pipeline run (not an Azure Pipelines job): no next run is queued",
            )
        # The seam: the SDK loads only for a run that asks for the next one.
        from action.azure.continuation import PipelineTarget, queue_next  # noqa: PLC0415

        return await queue_next(self._settings, PipelineTarget(int(definition), ref), after)

    def _policy(self) -> Policy:
        settings = self._settings
        return Policy(trigger=settings.trigger, identity_allowlist=settings.allowlist)
