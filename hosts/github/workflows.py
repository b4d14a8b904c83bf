"""`GitHubWorkflows`: the one GitHub Actions call pairbot makes — dispatch a workflow.

    await host.dispatch_workflow("pairbot.yml", "refs/heads/main", {"continued-from": "card-7"})

`POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches` (204). Events a run's
`GITHUB_TOKEN` creates start no workflow except `workflow_dispatch` and `repository_dispatch`,
so this is how a run of the Action asks for the next one (`action.continuation`). The token
needs `actions: write` (an App: the Actions permission, read and write): GitHub answers 403
otherwise, `hosts.errors.Forbidden`; an input the workflow does not declare is a 422,
`Conflict` ("Unexpected inputs provided"). A write like any other: spaced, never retried.
Not part of the `Host` protocol: only the GitHub Action's run uses it.
"""

from __future__ import annotations

from collections.abc import Mapping

from hosts.github.connection import GitHubConnection


class GitHubWorkflows(GitHubConnection):
    """Dispatch a workflow of the repository."""

    async def dispatch_workflow(self, workflow: str, ref: str, inputs: Mapping[str, str]) -> None:
        """Start `workflow` (its file name or id) on `ref` with `inputs` (none: no `inputs`)."""
        actions = self._gh.rest.actions
        owner, name = self._owner, self._name

        async def send() -> object:
            if inputs:
                return await actions.async_create_workflow_dispatch(
                    owner, name, workflow, ref=ref, inputs=dict(inputs)
                )
            return await actions.async_create_workflow_dispatch(owner, name, workflow, ref=ref)

        await self._write(f"dispatch workflow {workflow}", send)
