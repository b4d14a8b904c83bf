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
from githubkit import GitHub

from hosts.adapter import HostAdapter
from hosts.calls import Calls, RateWindow
from hosts.errors import Forbidden, HostError
from hosts.github import payloads
from hosts.github.auth import (
    AppInstallation,
    Credentials,
    MintedToken,
    StaticToken,
    parse_expiry,
)
from hosts.github.client import BearerStrategy, make_client
from hosts.github.credentials import GitHubCredentials, GitHubOptions
from hosts.github.translate import BadCredentials, Translator
from hosts.github.transport import EdgeTransport
from hosts.models import Author
from hosts.secrets import Secrets

log = logging.getLogger(__name__)

T = TypeVar("T")

GITHUB_API = "https://api.github.com"
# The REST version GitHub Enterprise Server understands; github.com takes githubkit's newer one.
GHES_API_VERSION = "2022-11-28"
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
    are described on `GitHubHost`)."""

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
        self._secrets = Secrets()
        window = RateWindow(clock)
        api_version = opts.api_version
        if api_version is None and urlsplit(self.base_url).netloc != "api.github.com":
            api_version = GHES_API_VERSION
        inner = transport or httpx.AsyncHTTPTransport(proxy=opts.proxy, retries=0)
        self._edge = EdgeTransport(inner, window, api_version=api_version)
        self._calls = Calls(
            host="GitHub",
            translate=Translator(window, self._secrets, clock),
            window=window,
            clock=clock,
            sleep=sleep,
            secrets=self._secrets,
            max_wait_s=opts.max_wait_s,
            read_attempts=opts.read_attempts,
            write_spacing_s=opts.write_spacing_s,
            timeout_s=2 * opts.timeout_s,
            recover=self._recover,
        )
        self._timeout_s = opts.timeout_s
        self._status_lock = asyncio.Lock()  # one pair-review write at a time
        self._sleep = sleep
        self._identity_lock = asyncio.Lock()
        self._me: Author | None = ACTIONS_BOT if credentials.kind == "actions" else None

        self._creds: Credentials
        self._app: AppInstallation | None = None
        if credentials.kind == "app":
            self._app = AppInstallation(
                credentials.app_id,
                credentials.secret.reveal(),
                credentials.installation_id,
                secrets=self._secrets,
                clock=clock,
                refresh_margin_s=opts.token_refresh_margin_s,
            )
            self._app.bind(self._mint)
            self._creds = self._app
        else:
            self._creds = StaticToken(credentials.secret.reveal(), self._secrets)
        self._gh = self._client(self._creds.token)
        self._app_gh = self._client(self._app.app_bearer) if self._app is not None else None

    def _client(self, source: Callable[[], Awaitable[str]]) -> GitHub[BearerStrategy]:
        return make_client(
            source, base_url=self.base_url, timeout_s=self._timeout_s, transport=self._edge
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._edge.close_inner()

    # -- the call discipline (hosts.calls) -------------------------------------------------

    def _recover(self, error: HostError, again: bool) -> HostError | None:
        """A refused installation token is dropped and minted once; otherwise `error`."""
        if not isinstance(error, BadCredentials):
            return error
        if not again and self._creds.invalidate(error.bearer):
            log.warning("GitHub refused the installation token; minting once")
            return None
        return Forbidden(str(error))

    async def _read(self, op: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self._calls.read(op, fn)

    async def _write(self, op: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self._calls.write(op, fn)

    def _fail(self, kind: type[HostError], message: str) -> HostError:
        return self._calls.fail(kind, message)

    async def _settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        return await self._calls.settle(op, find)

    async def _pause(self, seconds: float) -> None:
        await self._sleep(seconds)

    async def _mint(self) -> MintedToken:
        """POST /app/installations/{id}/access_tokens with the app's JWT."""
        app, client = self._app, self._app_gh
        if app is None or client is None:
            raise RuntimeError("minting needs GitHub App credentials")
        op = f"mint an installation token for installation {app.installation_id}"
        try:
            async with asyncio.timeout(2 * self._timeout_s):
                response = await client.rest.apps.async_create_installation_access_token(
                    app.installation_id
                )
        except Exception as exc:
            error = self._calls.translate(op, exc)
            if error is None:
                raise
            if isinstance(error, BadCredentials):  # the JWT itself was refused: no re-mint
                error = Forbidden(str(error))
            raise error from None
        data = payloads.obj(response)
        token = payloads.text(data.get("token"))
        try:
            expires_at = parse_expiry(payloads.text(data.get("expires_at")))
        except ValueError:
            raise HostError(f"{op}: GitHub answered no usable expires_at") from None
        if not token:
            raise HostError(f"{op}: GitHub answered no token")
        return MintedToken(value=token, expires_at=expires_at)

    # -- identity --------------------------------------------------------------------------

    async def identity(self) -> Author:
        """The App's bot user (`<slug>[bot]`), or the token's user; looked up once."""
        if self._me is None:
            async with self._identity_lock:
                if self._me is None:
                    self._me = await self._lookup_identity()
        return self._me

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
