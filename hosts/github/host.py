"""`GitHubHost`: the `Host` protocol over githubkit, translating and nothing more.

    GitHubHost("owner/name", GitHubCredentials.token(pat))
    GitHubHost("owner/name", GitHubCredentials.actions(github_token))
    GitHubHost("owner/name", GitHubCredentials.app(app_id, pem, installation_id))
    base_url="https://ghe.example.com/api/v3"                      GitHub Enterprise Server

Cards are issues, targets (card or pull) are issue numbers, comments are issue comments, the
review status is the commit status `pair-review` on the exact head SHA, state labels are issue
labels, merges are pinned with `sha=`. Comment upserts and state labels are the shared
algorithms of `hosts.adapter.HostAdapter`; this class gives them single requests.

`GitHubHost` is one class put together from a part per job, each a module beside this one:

    connection.py   GitHubConnection: credentials, clients, the call discipline, identity
    issues.py       GitHubIssues: cards (issues) and state labels
    comments.py     GitHubComments: issue comments, reactions, a scope decision by reference
    pulls.py        GitHubPulls: open, read and merge pull requests
    checks.py       GitHubChecks: the `pair-review` status and the other checks on a head
    workflows.py    GitHubWorkflows: dispatch a workflow (the Action's next run; not `Host`)
    host.py         GitHubHost: the parts together, plus close, permission and push_branch

How calls behave: every request goes through `hosts.calls.Calls` (reads retried a bounded number
of times, mutations one at a time, spaced `write_spacing_s` apart and never retried; a create
that may have been stored is reconciled by reading: the head branch, the title, and for a
comment its marker, by the shared upsert) and
through the edge transport of `hosts.github.transport` (no request inside a known rate-limit
window; conditional reads, so an idempotent publication costs 304s and no writes). githubkit
itself is configured in `hosts.github.client`, its errors translated in
`hosts.github.translate`. A 401 drops the installation token, mints once and repeats once;
never a loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from hosts.errors import NotFound
from hosts.github import payloads
from hosts.github import push as github_push
from hosts.github.checks import GitHubChecks
from hosts.github.comments import GitHubComments
from hosts.github.issues import GitHubIssues
from hosts.github.pulls import GitHubPulls
from hosts.github.workflows import GitHubWorkflows
from hosts.models import Permission, Target

_PERMISSIONS: frozenset[str] = frozenset({"admin", "maintain", "write", "triage", "read", "none"})


class GitHubHost(GitHubIssues, GitHubComments, GitHubPulls, GitHubChecks, GitHubWorkflows):
    """`Host` on GitHub or GitHub Enterprise Server, through githubkit.

    `credentials` says who it acts as (`GitHubCredentials.app/.token/.actions`); `base_url` is
    `https://api.github.com` or a GHES `https://<host>/api/v3` (which also selects the REST
    version GHES speaks, unless `options.api_version` says otherwise); `options` holds the
    limits (`GitHubOptions`). Seams, with production defaults: `transport` (an
    `httpx.AsyncBaseTransport`; tests inject an `httpx.MockTransport` or respx), `clock` and
    `sleep` (rate-limit windows, token lifetimes, write spacing and backoff all use them).

    One instance belongs to one event loop (its locks and connection pool do); `aclose()` it, or
    use it as an async context manager.
    """

    def __repr__(self) -> str:
        return (
            f"GitHubHost(repo={self.repo!r}, base_url={self.base_url!r}, "
            f"auth={self.credentials.describe()!r})"
        )

    async def __aenter__(self) -> GitHubHost:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- cards and pulls -------------------------------------------------------------------

    async def close(self, target: Target) -> None:
        op = f"close {target.kind} #{target.number}"
        if target.kind == "pull":
            await self._write(
                op,
                lambda: self._gh.rest.pulls.async_update(
                    self._owner, self._name, target.number, data={"state": "closed"}
                ),
            )
        else:
            await self._write(
                op,
                lambda: self._gh.rest.issues.async_update(
                    self._owner, self._name, target.number, data={"state": "closed"}
                ),
            )

    # -- people ----------------------------------------------------------------------------

    async def permission(self, user: str) -> Permission:
        try:
            response = await self._read(
                f"permission of {user}",
                lambda: self._gh.rest.repos.async_get_collaborator_permission_level(
                    self._owner, self._name, user
                ),
            )
        except NotFound:
            return "none"  # no such user (or not visible): never a reason to act
        data = payloads.obj(response)
        role = payloads.text(data.get("role_name"))
        level = role if role in _PERMISSIONS else payloads.text(data.get("permission"))
        return cast(Permission, level if level in _PERMISSIONS else "none")

    # -- code ------------------------------------------------------------------------------

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        token = await self._creds.token()
        return await github_push.push(
            git=self._git,
            repo_dir=repo_dir,
            remote_url=self._remote_url,
            branch=branch,
            token=token,
            force=force,
            timeout_s=self._push_timeout_s,
            scrub=self._secrets.scrub,
        )
