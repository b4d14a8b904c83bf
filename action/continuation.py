"""GitHub's next run: a `workflow_dispatch` of the workflow this run belongs to.

    target = workflow_target(env, event)         from the runner's variables, before any lock
    answer = await dispatch(ctx, target, after)   after the step, the lock released

Events the run's `GITHUB_TOKEN` creates start no workflow, except `workflow_dispatch` and
`repository_dispatch` (GitHub Docs, "Triggering a workflow from a workflow"), so the run asks
for the next one with `POST /repos/{owner}/{repo}/actions/workflows/{workflow}/dispatches`:

- the workflow is the file `GITHUB_WORKFLOW_REF` names (`owner/repo/.github/workflows/
  pairbot.yml@refs/heads/main` → `pairbot.yml`, a `workflow_id` the API takes);
- the ref is `GITHUB_REF` when it is a branch or a tag (a scheduled, comment, dispatch or
  manual run), else the repository's default branch (a `pull_request` run's ref is
  `refs/pull/<n>/merge`, which no dispatch can name);
- the input `continued-from` names the card this run stepped, for the run's log and page; a
  workflow that does not declare it makes GitHub answer 422 "Unexpected inputs provided", and
  the dispatch is sent once more without it (the next run is a tick all the same).

It goes through the GitHub adapter (`GitHubHost.dispatch_workflow`: githubkit, the rate-limit
window, a write never retried, errors as `hosts.errors`), as
whoever the run acts as: the App when `app-id` is set (its installation needs Actions: read
and write), else the `github-token` input (the workflow needs `permissions: actions: write`).
A refusal is answered, never raised: the schedule still ticks, and nothing is lost.

Loaded only when a run asks for the next one (`GitHubActions.request_continuation`): it imports
githubkit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from action.context import ActionContext
from action.run.continuation import Continuation, Requested
from action.run.settings import get
from hosts.errors import Conflict, Forbidden, HostError, NotFound
from hosts.github import GitHubCredentials
from hosts.github.host import GitHubHost

__all__ = ["INPUT", "WorkflowTarget", "credentials_of", "dispatch", "workflow_target"]

INPUT: Final = "continued-from"
_WORKFLOW_FILE = re.compile(r"[A-Za-z0-9._-]+\.ya?ml")
_GRANT = (
    "to let a run start the next one, add `actions: write` to the workflow's `permissions:` "
    "(with a GitHub App: give the App the Actions permission, read and write); until then "
    "the schedule takes each next step"
)


@dataclass(frozen=True)
class WorkflowTarget:
    """Which workflow file a dispatch starts, and on which ref."""

    workflow: str  # the file name, e.g. pairbot.yml
    ref: str  # refs/heads/<branch> or refs/tags/<tag>


def workflow_target(env: Mapping[str, str], event: Mapping[str, Any]) -> WorkflowTarget | str:
    """The workflow and ref a dispatch names, or why there is none (outside a workflow run)."""
    named = get(env, "GITHUB_WORKFLOW_REF")
    if named is None:
        return "GITHUB_WORKFLOW_REF is not set (not a workflow run): no next run is asked for"
    path, _, _ = named.rpartition("@")
    workflow = path.rpartition("/")[2]
    if "/.github/workflows/" not in path or not _WORKFLOW_FILE.fullmatch(workflow):
        return f"GITHUB_WORKFLOW_REF={named!r} names no workflow file: no next run is asked for"
    ref = get(env, "GITHUB_REF") or ""
    if not ref.startswith(("refs/heads/", "refs/tags/")):
        repository = event.get("repository")
        default = repository.get("default_branch") if isinstance(repository, Mapping) else None
        if not isinstance(default, str) or not default:
            return f"GITHUB_REF={ref!r} is no branch and the event names no default branch"
        ref = f"refs/heads/{default}"
    return WorkflowTarget(workflow, ref)


def credentials_of(ctx: ActionContext) -> GitHubCredentials | None:
    """Who the run acts as, by the rule of `ActionContext.host_settings`."""
    if ctx.app_id is not None and ctx.installation_id is not None and ctx.private_key:
        return GitHubCredentials.app(
            ctx.app_id, ctx.private_key.get_secret_value(), ctx.installation_id
        )
    if ctx.github_token is None:
        return None
    token = ctx.github_token.get_secret_value()
    if ctx.token_is_actions:
        return GitHubCredentials.actions(token)
    return GitHubCredentials.token(token)


async def dispatch(ctx: ActionContext, target: WorkflowTarget, after: Continuation) -> Requested:
    """Ask GitHub for the next run of `target`; what it answered, as one line."""
    credentials = credentials_of(ctx)
    if credentials is None:
        return Requested(False, "no github-token: no next run is asked for")
    what = f"{target.workflow} on {target.ref}"
    github = GitHubHost(ctx.repository, credentials, base_url=ctx.api_url)
    try:
        how = await _send(github, target, after)
    except Forbidden as err:
        return Requested(False, f"GitHub refused the next run of {what}: {err}", _GRANT)
    except (NotFound, Conflict) as err:
        return Requested(
            False,
            f"GitHub did not start the next run of {what}: {err}",
            "the workflow needs `workflow_dispatch:` among its `on:` events, on that ref; "
            "until then the schedule takes each next step",
        )
    except HostError as err:
        return Requested(
            False, f"the next run was not asked for ({err}); the schedule takes the next step"
        )
    finally:
        await github.aclose()
    return Requested(
        True, f"asked for the next run of {what}{how} after {after.after} ({after.count} today)"
    )


async def _send(github: GitHubHost, target: WorkflowTarget, after: Continuation) -> str:
    """The dispatch, with the `continued-from` input unless the workflow declares none."""
    try:
        await github.dispatch_workflow(target.workflow, target.ref, {INPUT: after.after})
    except Conflict as err:
        if "unexpected inputs" not in str(err).lower():
            raise
        # A workflow that declares no `continued-from` input: the tick runs all the same.
        await github.dispatch_workflow(target.workflow, target.ref, {})
        return f" (the workflow declares no {INPUT} input)"
    return ""
