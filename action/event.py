"""The Action's adapter: the Actions environment → the shared intake → what this run does.

    intent = classify(ctx.event_name, ctx.read_event(), policy_of(ctx))

What an event asks for is decided once, for the Action and the App alike, by the pure intake
(`app.domain.intake.intent.intake`; its docstring states the rules: pairbot's own comments,
other bots, commands, scope decisions, moved heads, `pair` dispatches). This module only translates:

- `GITHUB_EVENT_NAME` is the event, the payload's `action` its action (for a
  `repository_dispatch` GitHub puts the dispatch's `event_type` there);
- `policy_of(ctx)` is the deployment as the intake sees it: the trigger, the allowlist, the
  `batch` input, and who pairbot writes as — the App's `<slug>[bot]` when the Action minted an
  App token, `github-actions[bot]` when it writes with the run's GITHUB_TOKEN;
- a `Malformed` intent raises `MalformedEventError` (operator-facing, exit 1): for a `pair`
  dispatch this is deliberate — the App accepted a maintainer's command and acknowledged it, so
  dropping it silently would lose the command while the comment says it runs;
- a `workflow_dispatch` batch that is not a batch name is a `UserError` naming the remedy;
- `ignored_reason` (the run driver's, `action.run.outcome`, for both entries) says which
  intents this run does nothing for (`Ignore`, and the App's installation bookkeeping), before
  any lock is taken.

A `Comment` intent's author is not yet authorized: `action.comments` looks up the permission
(one API call) and answers with `app.domain.intake.answers.answer_comment`, as the App does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from action.run.outcome import ignored_reason
from app.domain.intake.intent import (
    ACTIONS_BOT_ID,
    ACTIONS_BOT_LOGIN,
    Comment,
    HeadMoved,
    Ignore,
    Installation,
    Intent,
    Malformed,
    Policy,
    Run,
    ScopeDecision,
    Tick,
    intake,
)
from app.domain.intake.pair_request import PayloadError
from app.engine.names import NAME_PATTERN
from app.errors import OperatorError, UserError

if TYPE_CHECKING:
    from action.context import ActionContext

__all__ = [
    "ACTIONS_BOT_ID",
    "ACTIONS_BOT_LOGIN",
    "Comment",
    "HeadMoved",
    "Ignore",
    "Installation",
    "Intent",
    "MalformedEventError",
    "Policy",
    "Run",
    "ScopeDecision",
    "Tick",
    "classify",
    "ignored_reason",
    "policy_of",
]


class MalformedEventError(OperatorError, PayloadError):
    """An event payload that is not what GitHub (or the App) sends; the message names the field.

    Operator-facing (exit 1). It is also a `PayloadError`, so code that handles the App's
    dispatch errors catches it too.
    """


def policy_of(ctx: ActionContext) -> Policy:
    """The intake's view of this run's deployment (see the module docstring)."""
    app_mints = ctx.app_id is not None and ctx.installation_id is not None
    return Policy(
        trigger=ctx.trigger,
        app_slug=ctx.app_slug,
        app_id=int(ctx.app_id) if ctx.app_id is not None else None,
        allowlist=ctx.allowlist,
        # The same rule as ActionContext.host_settings: an App token is never the run's own.
        actions_token=ctx.token_is_actions and not app_mints,
        batch=ctx.batch,
    )


def classify(event_name: str, payload: Mapping[str, Any], policy: Policy | None = None) -> Intent:
    """What the event asks this run to do. Pure.

    Raises `MalformedEventError` for a payload that lacks what its event always carries, and
    `UserError` for a `workflow_dispatch` batch that is not a batch name.
    """
    action = payload.get("action")
    intent = intake(
        event_name, action if isinstance(action, str) else None, payload, policy or Policy()
    )
    if isinstance(intent, Malformed):
        raise MalformedEventError(intent.reason)
    if (
        event_name == "workflow_dispatch"
        and isinstance(intent, Tick)
        and intent.batch is not None
        and not NAME_PATTERN.match(intent.batch)
    ):
        raise UserError(
            f"workflow_dispatch input batch={intent.batch!r} is not a batch name; allowed: "
            "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
        )
    return intent
