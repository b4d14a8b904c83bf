"""The githubkit client the GitHub adapter sends through, configured once, here.

Nothing is left to githubkit's defaults: a timeout on every request, auto-retry off (it would
retry a POST on a 5xx and post twice; reads are retried by `hosts.calls`, writes never), its
HTTP cache off (conditional reads live in `hosts.github.transport`), environment proxies off
(they would mount transports that bypass the rate-limit window), and the bearer read from the
host's credentials on every request, so a re-minted installation token is used at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
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


def make_client(
    source: TokenSource, *, base_url: str, timeout_s: float, transport: httpx.AsyncBaseTransport
) -> GitHub[BearerStrategy]:
    """A githubkit client over `transport` (the adapter's edge), authenticated by `source`."""
    return GitHub(
        BearerStrategy(source),
        base_url=base_url,
        user_agent="pairbot",
        timeout=httpx.Timeout(timeout_s),
        async_transport=transport,
        trust_env=False,
        http_cache=False,
        auto_retry=False,
    )
