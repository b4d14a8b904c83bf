"""The App's own webhook deliveries on GitHub: list them, ask for one again.

    hooks = AppHookDeliveries(app_id, private_key, base_url=…)
    items, cursor = await hooks.page(cursor)     GET  /app/hook/deliveries (newest first)
    await hooks.redeliver(delivery_id)           POST /app/hook/deliveries/{id}/attempts (202)

Both are App-level endpoints: authenticated with the App's JWT (never an installation token),
sent through githubkit's typed operations (`apps.list_webhook_deliveries`,
`apps.redeliver_webhook_delivery`) and the same call discipline as every other GitHub request
(`hosts.calls`: the rate window GitHub announces, reads retried a bounded number of times,
writes never retried; `hosts.github.transport`: the API-version header, conditional reads).
The listing pages with an opaque cursor that GitHub puts in the `Link` header's `rel="next"`
URL; `page` hands it back as is. Items are returned as GitHub's JSON (read tolerantly by
`app.domain.intake.catchup`).
https://docs.github.com/en/rest/apps/webhooks#list-deliveries-for-an-app-webhook
https://docs.github.com/en/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import httpx

from hosts.calls import Calls, RateWindow
from hosts.github import payloads
from hosts.github.auth import AppInstallation
from hosts.github.client import make_client
from hosts.github.connection import GITHUB_API
from hosts.github.session import GHES_API_VERSION
from hosts.github.translate import Translator
from hosts.github.transport import EdgeTransport
from hosts.secrets import Secrets

__all__ = ["PAGE", "AppHookDeliveries", "next_cursor"]

PAGE: Final = 100  # GitHub's largest page of deliveries
_NEXT: Final = re.compile(r'<([^<>]+)>\s*;\s*rel="?next"?')


def next_cursor(link: str | None) -> str | None:
    """The `cursor` of a `Link` header's `rel="next"` URL, or None on the last page. Pure."""
    match = _NEXT.search(link or "")
    if match is None:
        return None
    values = parse_qs(urlsplit(match.group(1)).query).get("cursor")
    return values[0] if values and values[0] else None


class AppHookDeliveries:
    """The App's webhook deliveries, read and redelivered with the App's JWT.

    `transport`, `clock` and `sleep` are seams for tests (a loopback fake's base URL works as
    well: nothing here assumes api.github.com)."""

    def __init__(
        self,
        app_id: int | str,
        private_key: str,
        *,
        base_url: str = GITHUB_API,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        timeout_s: float = 30.0,
        max_wait_s: float = 60.0,
    ) -> None:
        self._secrets = Secrets()
        # No installation: only `jwt()` is used (App-level endpoints take the App's JWT).
        self._app = AppInstallation(app_id, private_key, 0, secrets=self._secrets, clock=clock)
        window = RateWindow(clock)
        host = urlsplit(base_url).netloc
        api_version = None if host == "api.github.com" else GHES_API_VERSION
        inner = transport or httpx.AsyncHTTPTransport(retries=0)
        self._edge = EdgeTransport(inner, window, api_version=api_version)
        self._calls = Calls(
            host="GitHub",
            translate=Translator(window, self._secrets, clock),
            window=window,
            clock=clock,
            sleep=sleep,
            secrets=self._secrets,
            max_wait_s=max_wait_s,
            timeout_s=2 * timeout_s,
        )
        self._gh = make_client(
            self._app.app_bearer,
            base_url=base_url.rstrip("/"),
            timeout_s=timeout_s,
            transport=self._edge,
        )

    def __repr__(self) -> str:
        return f"AppHookDeliveries(app_id={self._app.app_id})"

    async def page(
        self, cursor: str | None = None, per_page: int = PAGE
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of deliveries, newest first, and the cursor of the next (None: the last)."""
        apps = self._gh.rest.apps

        async def list_page() -> Any:
            if cursor is None:
                return await apps.async_list_webhook_deliveries(per_page=per_page)
            return await apps.async_list_webhook_deliveries(per_page=per_page, cursor=cursor)

        response = await self._calls.read("list the App's webhook deliveries", list_page)
        items = payloads.objs(response)
        return items, next_cursor(response.raw_response.headers.get("link"))

    async def redeliver(self, delivery_id: int) -> None:
        """Ask GitHub to send delivery `delivery_id` again (a new attempt, the same guid)."""
        apps = self._gh.rest.apps
        await self._calls.write(
            f"redeliver webhook delivery {delivery_id}",
            lambda: apps.async_redeliver_webhook_delivery(delivery_id),
        )

    async def aclose(self) -> None:
        """Close the githubkit client and the connection pool."""
        await self._gh.aclose()
        await self._edge.close_inner()
