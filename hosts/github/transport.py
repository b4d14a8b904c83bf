"""The HTTP edge under githubkit: the rate-limit window, conditional reads, the API version.

Every request the GitHub adapter sends — REST, GraphQL, token mints — passes through one
`EdgeTransport`, so two rules hold structurally rather than by each caller's care:

- **No request inside a known rate-limit window.** `hosts.calls.RateWindow` remembers the end
  of the window a response announced (`retry-after`, or `x-ratelimit-remaining: 0` with
  `x-ratelimit-reset`); while it is open the transport refuses to send and raises
  `RateLimited` with the seconds left. (Waiting, when the wait is short, is the host's job,
  before it starts an attempt and outside its timeout.)
  https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
- **Repeated reads are conditional.** A GET whose earlier answer carried an `ETag` is resent
  with `If-None-Match`; a `304 Not Modified` (which GitHub does not count against the rate
  limit) is answered from the stored body.
  https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate
  The cache never answers without asking: the `Cache-Control: private, max-age=60` GitHub
  sends is ignored, since a body reused for a minute would hide the edit the adapter just made
  and must read back. A 304 refreshes only the rate-limit headers; everything else, `Link`
  included, is the stored response's. A stored `Link` can be stale (a page 1 stored as the
  last page has no `rel="next"` and stays 304 when page 2 appears), so no caller may decide
  where a list ends from a replayed `Link`: `list_comments` (`hosts.github.comments`) decides
  from the body.

Why a small hand-written cache and not githubkit's hishel layer: hishel 1.x keeps entries in
SQLite through a worker thread, and its API is the one githubkit breaks on between majors (the
`hishel<2` pin). What the adapter needs is only RFC 9110 validators on GET: remember
(ETag, raw body, headers) per URL, `Accept` and credential; send `If-None-Match`; turn a 304
into the stored 200. That is deterministic, bounded (LRU) and easy to test.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass

import httpx

from hosts.calls import RateWindow
from hosts.errors import RateLimited

log = logging.getLogger(__name__)

CACHE_ENTRIES = 512
CACHE_MAX_BODY = 2 * 1024 * 1024
# Rate-limit headers a 304 refreshes on the stored response.
_FRESH_HEADERS = (
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-used",
    "x-ratelimit-resource",
    "x-github-request-id",
    "date",
)


@dataclass(frozen=True)
class _Entry:
    etag: str
    raw: bytes
    headers: httpx.Headers


async def _raw_body(response: httpx.Response) -> bytes:
    """The body as it came off the wire (still content-encoded), and the stream closed.

    Read from the transport stream itself: `aiter_raw` refuses a response built with
    `content=` (already consumed), while the stream of either kind can be iterated here.
    """
    stream = response.stream
    if not isinstance(stream, httpx.AsyncByteStream):
        raise TypeError("an async transport answered with a sync stream")
    try:
        return b"".join([part async for part in stream])
    finally:
        await stream.aclose()


class EdgeTransport(httpx.AsyncBaseTransport):
    """Gate, conditional GETs and the API-version header around the real transport."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        gate: RateWindow,
        *,
        api_version: str | None = None,
        entries: int = CACHE_ENTRIES,
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._api_version = api_version
        self._entries = entries
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self.not_modified = 0

    @staticmethod
    def _key(request: httpx.Request) -> str:
        # The credential is part of the key (GitHub answers `Vary: Authorization`), hashed so
        # no token sits in the cache's keys.
        auth = hashlib.sha256(request.headers.get("authorization", "").encode()).hexdigest()
        return f"{request.url}\n{request.headers.get('accept', '')}\n{auth[:32]}"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        wait = self._gate.remaining()
        if wait > 0:
            raise RateLimited(
                f"GitHub rate limit: not sending {request.method} {request.url.path} inside "
                f"the window ({self._gate.reason}); {wait:.0f}s left",
                retry_after=wait,
            )
        if self._api_version:
            request.headers["X-GitHub-Api-Version"] = self._api_version
        key = self._key(request) if request.method == "GET" else None
        entry = self._cache.get(key) if key is not None else None
        if entry is not None:
            request.headers["If-None-Match"] = entry.etag
        response = await self._inner.handle_async_request(request)
        self._gate.observe(response.status_code, response.headers)  # learns any window
        if key is None:
            return response
        if response.status_code == 304 and entry is not None:
            await response.aclose()
            self.not_modified += 1
            self._cache.move_to_end(key)
            headers = entry.headers.copy()
            for name in _FRESH_HEADERS:
                if name in response.headers:
                    headers[name] = response.headers[name]
            return httpx.Response(200, headers=headers, content=entry.raw)
        etag = response.headers.get("etag")
        if response.status_code != 200 or not etag:
            return response
        # The raw (still content-encoded) bytes are stored with their headers, so the client
        # decodes a replayed body exactly as it decoded the original.
        raw = await _raw_body(response)
        if len(raw) <= CACHE_MAX_BODY:
            self._cache[key] = _Entry(etag, raw, response.headers.copy())
            self._cache.move_to_end(key)
            while len(self._cache) > self._entries:
                self._cache.popitem(last=False)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=raw,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        # githubkit opens and closes an httpx client per call; the connection pool underneath
        # must outlive those, so closing is the host's `aclose`, not the client's.
        return None

    async def close_inner(self) -> None:
        """Close the real transport (the host's `aclose`)."""
        await self._inner.aclose()
