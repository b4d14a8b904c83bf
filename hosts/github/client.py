"""The githubkit client the GitHub adapter sends through, configured once, here.

Nothing is left to githubkit's defaults: a timeout on every request, auto-retry off (it would
retry a POST on a 5xx and post twice; reads are retried by `hosts.calls`, writes never), its
HTTP cache off (conditional reads live in `hosts.github.transport`), environment proxies off
(they would mount transports that bypass the rate-limit window), and the bearer read from the
host's credentials on every request, so a re-minted installation token is used at once.

githubkit builds an httpx client per request unless one is entered with `async with` (and then
only in that task's context); `PooledGitHub` keeps one for its life instead, so a request costs
no client construction and every task shares it. `aclose()` closes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from githubkit import GitHub
from githubkit.auth.base import BaseAuthStrategy

TokenSource = Callable[[], Awaitable[str]]


class _BearerAuth(httpx.Auth):
    """Sets `Authorization: Bearer <token>` from an async source on every request."""

    def __init__(self, source: TokenSource) -> None:
        self._source = source

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {await self._source()}"
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(***)"


class BearerStrategy(BaseAuthStrategy):
    """githubkit's hook for `_BearerAuth`."""

    def __init__(self, source: TokenSource) -> None:
        self._source = source

    def get_auth_flow(self, github: Any) -> httpx.Auth:
        return _BearerAuth(self._source)

    def __repr__(self) -> str:
        return "BearerStrategy(***)"


class PooledGitHub(GitHub[BearerStrategy]):
    """A githubkit client whose httpx client is made once, on first use, and kept."""

    _kept: httpx.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def get_async_client(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._kept is None:
            self._kept = await self._create_async_client()
        yield self._kept

    async def aclose(self) -> None:
        """Close the kept client (its transport is the edge's: the host closes that)."""
        kept, self._kept = self._kept, None
        if kept is not None:
            await kept.aclose()


def make_client(
    source: TokenSource, *, base_url: str, timeout_s: float, transport: httpx.AsyncBaseTransport
) -> PooledGitHub:
    """A githubkit client over `transport` (the adapter's edge), authenticated by `source`."""
    return PooledGitHub(
        BearerStrategy(source),
        base_url=base_url,
        user_agent="pairbot",
        timeout=httpx.Timeout(timeout_s),
        async_transport=transport,
        trust_env=False,
        http_cache=False,
        auto_retry=False,
    )
