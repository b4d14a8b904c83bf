"""`GitHubConnection`: how every part of `GitHubHost` reaches the repository it acts on.

The part the others stand on: who pairbot acts as (a token, the Actions token, or an App
installation whose tokens it mints), the githubkit clients (configured in `hosts.github.client`),
the call discipline every request goes through (`hosts.calls.Calls`, over the edge transport of
`hosts.github.transport`; errors translated in `hosts.github.translate`; a 401 drops the
installation token, mints once and repeats once, never a loop), pairbot's own identity, and the
two reads several parts share (an issue, a pull). The operations are in the parts beside it;
`hosts.github.host` puts them together.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from hosts.adapter import HostAdapter
from hosts.errors import Forbidden, HostError
from hosts.github import payloads
from hosts.github.auth import AppInstallation, Credentials
from hosts.github.credentials import GitHubCredentials, GitHubOptions
from hosts.github.session import GitHubSession, GitHubSessions, sessions_in_use
from hosts.models import Author
from hosts.pacer import Lane

log = logging.getLogger(__name__)

T = TypeVar("T")

GITHUB_API = "https://api.github.com"
# The Actions GITHUB_TOKEN cannot call GET /user; what it acts as is this documented bot user.
ACTIONS_BOT = Author(login="github-actions[bot]", id="41898282", is_bot=True)
PAGE = 100


def _server_url(base_url: str) -> str:
    """The web/git server behind an API base URL (api.github.com → github.com)."""
    parts = urlsplit(base_url.rstrip("/"))
    if parts.netloc == "api.github.com":
        return "https://github.com"
    path = re.sub(r"/api/v3$", "", parts.path)
    return f"{parts.scheme}://{parts.netloc}{path}"


class GitHubConnection(HostAdapter):
    """The state and the calls every part of `GitHubHost` shares (the constructor's arguments
    are described on `GitHubHost`; `sessions`, or else the registry in use in this context
    (`hosts.github.session.using`), shares one `GitHubSession` among the hosts of one
    installation)."""

    name = "github"

    def __init__(
        self,
        repo: str,
        credentials: GitHubCredentials,
        *,
        base_url: str = GITHUB_API,
        options: GitHubOptions | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        sessions: GitHubSessions | None = None,
    ) -> None:
        super().__init__()
        owner, _, name = repo.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repo must be 'owner/name', not {repo!r}")
        opts = options or GitHubOptions()
        self.repo = repo
        self.credentials = credentials
        self._owner, self._name = owner, name
        self.base_url = base_url.rstrip("/")
        self._git = opts.git
        self._push_timeout_s = opts.push_timeout_s
        self._remote_url = opts.remote_url or f"{_server_url(self.base_url)}/{owner}/{name}.git"
        shared = sessions if sessions is not None else sessions_in_use()
        # Joined: the registry closes it at the process's end; else it is this host's own.
        self._own_session = shared is None
        make = GitHubSession if shared is None else shared.session
        session = make(
            credentials,
            base_url=self.base_url,
            options=opts,
            transport=transport,
            clock=clock,
            sleep=sleep,
        )
        self._session = session
        self._secrets = session.secrets
        self._edge = session.edge
        self._calls = session.calls
        self._creds: Credentials = session.creds
        self._app: AppInstallation | None = session.app
        self._gh = session.gh
        self._app_gh = session.app_gh
        self._status_lock = asyncio.Lock()  # one pair-review write at a time
        self._sleep = sleep
        if credentials.kind == "actions":
            session.me = ACTIONS_BOT

    async def aclose(self) -> None:
        """Close the connection pool, unless it is a shared session's (its registry does)."""
        if self._own_session:
            await self._session.aclose()

    # -- the call discipline (hosts.calls) -------------------------------------------------

    async def _read(self, op: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self._calls.read(op, fn)

    async def _write(
        self, op: str, fn: Callable[[], Awaitable[Any]], *, lane: Lane = "bulk"
    ) -> Any:
        return await self._calls.write(op, fn, lane=lane)

    def _fail(self, kind: type[HostError], message: str) -> HostError:
        return self._calls.fail(kind, message)

    async def _settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        return await self._calls.settle(op, find)

    async def _pause(self, seconds: float) -> None:
        await self._sleep(seconds)

    # -- identity --------------------------------------------------------------------------

    async def identity(self) -> Author:
        """The App's bot user (`<slug>[bot]`), or the token's user; looked up once a session."""
        session = self._session
        if session.me is None:
            async with session.identity_lock:
                if session.me is None:
                    session.me = await self._lookup_identity()
        return session.me

    async def _lookup_identity(self) -> Author:
        if self._app_gh is not None:
            app_client = self._app_gh
            app = payloads.obj(
                await self._read("identity", app_client.rest.apps.async_get_authenticated)
            )
            slug = payloads.text(app.get("slug"))
            if not slug:
                raise HostError("identity: GitHub answered GET /app without a slug")
            login = f"{slug}[bot]"
            user = payloads.obj(
                await self._read(
                    "identity", lambda: self._gh.rest.users.async_get_by_username(login)
                )
            )
            return Author(login=login, id=str(user.get("id", "")), is_bot=True)
        try:
            response = await self._read("identity", self._gh.rest.users.async_get_authenticated)
        except Forbidden as error:
            if "not accessible by integration" in str(error).lower():
                return ACTIONS_BOT  # the Actions GITHUB_TOKEN
            raise
        return payloads.author(payloads.obj(response))

    # -- the reads several parts share -----------------------------------------------------

    async def _issue(self, number: int) -> dict[str, Any]:
        response = await self._read(
            f"read #{number}",
            lambda: self._gh.rest.issues.async_get(self._owner, self._name, number),
        )
        return payloads.obj(response)

    async def _pull_data(self, number: int) -> dict[str, Any]:
        response = await self._read(
            f"read PR #{number}",
            lambda: self._gh.rest.pulls.async_get(self._owner, self._name, number),
        )
        return payloads.obj(response)
