"""`AzureProject`: what every part of `AzureDevOpsHost` stands on: one project, one repository.

The SDK connection (`hosts.azure_devops.connection`: worker threads, the call discipline of
`hosts.calls`, the rate window) and the lookups several parts share, each made once: pairbot's
identity, the repository (its ids, remote and web URL, default branch), and a pull request as
the SDK returns it. The operations are in the parts beside it; `hosts.azure_devops.host` puts
them together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hosts.adapter import HostAdapter
from hosts.azure_devops import convert
from hosts.azure_devops.connection import SdkConnection
from hosts.azure_devops.sdk import Clients, Sdk
from hosts.models import Author
from hosts.secrets import Secret
from hosts.vocabulary import AZURE_DEVOPS

T = TypeVar("T")


@dataclass(frozen=True)
class _Repo:
    """What pairbot needs of the repository, looked up once."""

    id: str
    project_id: str
    remote_url: str
    web_url: str
    default_branch: str = ""


class AzureProject(HostAdapter):
    """The state and the calls every part of `AzureDevOpsHost` shares."""

    name = "azure-devops"
    vocabulary = AZURE_DEVOPS

    def __init__(
        self,
        organization_url: str,
        project: str,
        repository: str,
        token: str,
        *,
        timeout_s: float = 30,
        cache_dir: str | Path | None = None,
        sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_wait_s: float = 60.0,
        read_attempts: int = 3,
        backoff_s: float = 1.0,
        merge_polls: int = 10,
        push_timeout_s: float = 300.0,
        transition_work_items: bool = True,
    ) -> None:
        super().__init__()
        if not token:
            raise ValueError("an Azure DevOps personal access token is required")
        if not organization_url or not project or not repository:
            raise ValueError("organization_url, project and repository are required")
        self.organization_url = organization_url.rstrip("/")
        self.project = project
        self.repository = repository
        self._token = Secret(token)
        self._merge_polls = merge_polls
        self._push_timeout_s = push_timeout_s
        # Completing a card's pull request moves its linked work item on, as Azure DevOps'
        # own "Complete associated work items after merging" does (`transitionWorkItems`).
        self.transition_work_items = transition_work_items
        self._sleep = sleep
        self._sdk = SdkConnection(
            self.organization_url,
            self._token,
            timeout_s=timeout_s,
            cache_dir=Path(cache_dir) if cache_dir is not None else None,
            sleep=sleep,
            clock=clock,
            max_wait_s=max_wait_s,
            read_attempts=read_attempts,
            backoff_s=backoff_s,
        )
        self._me: Author | None = None
        self._repo: _Repo | None = None
        self._states: dict[str, dict[str, str]] = {}  # work item type → state → category

    async def _call(self, what: str, fn: Callable[[Clients], T], *, write: bool = False) -> T:
        """One SDK call in a worker thread, under the shared discipline (`hosts.calls`)."""
        return await self._sdk.call(what, fn, write=write)

    async def _settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        return await self._sdk.calls.settle(op, find)

    async def _pause(self, seconds: float) -> None:
        await self._sleep(seconds)

    # -- identity, repository, pull request -----------------------------------------------------

    async def identity(self) -> Author:
        if self._me is None:
            data = await self._call("identity", lambda c: c.location.get_connection_data())
            self._me = convert.identity_from(data.authenticated_user)
        return self._me

    async def _repository(self) -> _Repo:
        if self._repo is None:
            repo = await self._call(
                "repository",
                lambda c: c.git.get_repository(self.repository, project=self.project),
            )
            project_id = str(repo.project.id) if repo.project is not None else ""
            web = repo.web_url or f"{self.organization_url}/{self.project}/_git/{repo.name}"
            self._repo = _Repo(
                id=str(repo.id),
                project_id=project_id,
                remote_url=str(repo.remote_url),
                web_url=web,
                default_branch=convert.branch(repo.default_branch),
            )
        return self._repo

    async def _pr(self, number: int) -> Sdk:
        return await self._call(
            f"get_pull #{number}",
            lambda c: c.git.get_pull_request(self.repository, number, project=self.project),
        )
