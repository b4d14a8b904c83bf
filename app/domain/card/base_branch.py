"""The base branch a CI names for a run: pure, from its variables and its event payload.

Used by the card cycle (app/cycle/worktree.py `current_branch`) and by a plain batch's PR step
(app/engine/phase_steps.py `default_base_branch`): a CI checkout's HEAD is no guide (Azure
Pipelines leaves it detached), what the CI says is.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ci_base_branch"]


def ci_base_branch(env: Mapping[str, str], event: Mapping[str, object] | None) -> str | None:
    """The base branch a CI names, if any. Pure.

    Azure Pipelines' `checkout: self` leaves a detached HEAD at BUILD_SOURCEVERSION, so the
    branch comes from its variables: a pull request's target, else BUILD_SOURCEBRANCH (a
    scheduled or service-hook run builds the default branch). In GitHub Actions the event names
    the repository's default branch (`issue_comment`, `workflow_dispatch`). A `schedule`
    payload may hold nothing but the cron line, and a scheduled run always runs on the default
    branch, GITHUB_REF naming it ("Events that trigger workflows", `schedule`:
    https://docs.github.com/en/actions/writing-workflows/choosing-when-your-workflow-runs/events-that-trigger-workflows#schedule).
    """
    for name in ("SYSTEM_PULLREQUEST_TARGETBRANCH", "BUILD_SOURCEBRANCH"):
        ref = env.get(name, "").strip()
        if ref.startswith("refs/heads/"):
            return ref.removeprefix("refs/heads/")
        if ref and name == "SYSTEM_PULLREQUEST_TARGETBRANCH" and not ref.startswith("refs/"):
            return ref
    repository = event.get("repository") if event is not None else None
    if isinstance(repository, dict):
        branch = repository.get("default_branch")
        if isinstance(branch, str) and branch.strip():
            return branch.strip()
    ref = env.get("GITHUB_REF", "").strip()
    if env.get("GITHUB_EVENT_NAME") == "schedule" and ref.startswith("refs/heads/"):
        return ref.removeprefix("refs/heads/")
    return None
