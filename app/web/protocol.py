"""uvicorn's HTTP protocol with deadlines, a header cap and a cap on open connections.

    uvicorn.Config(app, http=guarded_protocol(limits), ...)

uvicorn bounds an idle kept-alive connection (`timeout_keep_alive`), but nothing else: a
connection that sends nothing, headers one byte at a time, or a body one byte at a time stays
open for as long as the client likes, and httptools buffers a header line of any length. This
subclass of uvicorn's httptools protocol (pairbot pins httptools, so it is what `pairbot serve`
runs) adds, per request:

    first byte  within `FIRST_BYTE_S` (or `read_timeout_s`, if shorter) of the connection's
                opening → else 408 and it closes: an idle socket dies quickly
    headers     all of them within `read_timeout_s` of the request's first byte (of the
                connection's opening, for its first request) → else 408 and it closes;
                at most `max_header_bytes` of request line and headers → else 431 and it closes
    body        all of it within `read_timeout_s` (plus a second, so the app's own deadline,
                which answers 408, normally comes first) of the headers → else the connection
                closes — whichever route the request went to, read or not

and, per server, at most `max_connections` open connections (`Connections`). Past the cap a
new connection is never refused while an idle one is open: the oldest idle connection (no
request in progress, or its headers still arriving) is closed to admit it, then the oldest
with a request that claims no signature; a request whose headers are complete and carry
`X-Hub-Signature-256` (or Azure DevOps' Basic auth) on its webhook route is never shed, so a
crowd of idle or slow strangers cannot crowd out a delivery, and neither is a connection
accepted so lately that the server has not yet read it. (uvicorn's own `limit_concurrency`, which
answered 503 to every request past its limit, signed or not, is not used.) The app's own body
limits (app.web.limits) apply on top, to the webhook routes.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.web.limits import connection_ceiling
from app.web.settings import EdgeLimits
from app.web.signature import SIGNATURE_HEADER, well_formed

FIRST_BYTE_S = 3.0  # a client that connects means to send: GitHub's headers follow at once
_BODY_GRACE_S = 1.0  # the app answers a slow body itself first; this only closes what it left
_SHED_LOG_EVERY_S = 60.0  # one WARNING a minute at most, however many connections were shed
_GITHUB_ROUTE = "/webhooks/github"
_AZURE_ROUTE = "/webhooks/azure-devops"

log = logging.getLogger(__name__)


class Tier(enum.IntEnum):
    """What a connection is doing: IDLE ones are shed first, then UNSIGNED; never the others."""

    NEW = 0  # accepted, and not yet had a turn to read: kept (see Connections)
    IDLE = 1  # nothing sent yet, between requests, or headers still arriving
    UNSIGNED = 2  # a request in progress that claims no delivery signature
    SIGNED = 3  # a delivery claiming a signature on its webhook route: never shed


def tier_of(scope: Mapping[str, Any]) -> Tier:
    """SIGNED for a POST to a webhook route with a well-formed signature (GitHub) or Basic
    credentials (Azure DevOps) — claimed, not verified: the body is not here yet."""
    if scope.get("method") != "POST":
        return Tier.UNSIGNED
    path = scope.get("path")
    if path == _GITHUB_ROUTE:
        wanted = SIGNATURE_HEADER.encode()
        for name, value in scope["headers"]:
            if name == wanted and well_formed(value.decode("latin-1")):
                return Tier.SIGNED
    elif path == _AZURE_ROUTE:
        for name, value in scope["headers"]:
            if name == b"authorization" and value.lstrip()[:6].lower() == b"basic ":
                return Tier.SIGNED
    return Tier.UNSIGNED


class Connections:
    """One server's open connections, by tier, each tier oldest first (a dict keeps the order
    of insertion, and a connection that changes tier goes to the end of its new one).

    A connection is NEW from its acceptance until the event loop has had a turn to read it
    (a callback `connection_made` schedules runs after the next poll): uvloop accepts a whole
    burst before any of it is read, so a delivery accepted early in a burst of strangers
    would otherwise be shed before its headers were even looked at. Past the cap, the oldest
    IDLE connection is shed to admit a new one, else the oldest UNSIGNED; with neither, the
    new one is admitted anyway, up to the `ceiling`, and the excess is shed as the NEW ones
    ripen. Only past the ceiling (app.web.limits.connection_ceiling: a burst of more than a
    quarter of the cap, at least 64, within one turn of the loop) or when every connection
    holds a signed delivery is the new one closed.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.ceiling = connection_ceiling(cap)
        self.tiers: dict[Tier, dict[GuardedHttpProtocol, None]] = {tier: {} for tier in Tier}
        self.where: dict[GuardedHttpProtocol, Tier] = {}
        self.shed = 0  # connections closed to admit others, ever: what tests and logs read
        self.refused = 0  # new connections closed because none could be shed
        self._logged = (0.0, 0, 0)  # when, and the counts then

    def __len__(self) -> int:
        return len(self.where)

    def admit(self, connection: GuardedHttpProtocol) -> bool:
        """Make room for `connection` (shedding others as needed) and register it as NEW;
        False when it cannot be had (nothing is registered)."""
        self._trim(self.cap - 1)
        if len(self.where) >= self.ceiling:
            self.refused += 1
            self._note(connection.loop.time())
            return False
        self.where[connection] = Tier.NEW
        self.tiers[Tier.NEW][connection] = None
        if self.shed:
            self._note(connection.loop.time())
        return True

    def ripen(self, connection: GuardedHttpProtocol) -> None:
        """`connection` has had its turn to read: IDLE unless its headers are in; then back
        down to the cap."""
        if self.where.get(connection) == Tier.NEW:
            self.place(connection, Tier.IDLE)
        self._trim(self.cap)

    def _trim(self, keep: int) -> None:
        """Shed IDLE, then UNSIGNED connections, oldest first, until at most `keep` are open."""
        while len(self.where) > keep:
            victim = self._sheddable()
            if victim is None:
                return
            self.drop(victim)
            self.shed += 1
            victim.shed()

    def place(self, connection: GuardedHttpProtocol, tier: Tier) -> None:
        """Move `connection` to the end of `tier` (a connection already gone stays gone)."""
        old = self.where.get(connection)
        if old is None:
            return
        del self.tiers[old][connection]
        self.tiers[tier][connection] = None
        self.where[connection] = tier

    def drop(self, connection: GuardedHttpProtocol) -> None:
        tier = self.where.pop(connection, None)
        if tier is not None:
            del self.tiers[tier][connection]

    def _sheddable(self) -> GuardedHttpProtocol | None:
        for tier in (Tier.IDLE, Tier.UNSIGNED):
            for oldest in self.tiers[tier]:
                return oldest
        return None

    def _note(self, now: float) -> None:
        """A WARNING, at most once a minute, with what was shed and refused since the last."""
        when, shed, refused = self._logged
        if now - when < _SHED_LOG_EVERY_S or (shed, refused) == (self.shed, self.refused):
            return
        self._logged = (now, self.shed, self.refused)
        log.warning(
            "%d open connections at the cap (%d, PAIR_MAX_CONNECTIONS): closed %d idle or "
            "unsigned ones to admit new ones, and refused %d new ones (every open one held a "
            "signed delivery, or was not yet read), since the last such line",
            len(self.where),
            self.cap,
            self.shed - shed,
            self.refused - refused,
        )


class GuardedHttpProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with per-request read deadlines, a header size cap, and a share of
    its server's connection cap."""

    read_timeout_s: ClassVar[float] = EdgeLimits().read_timeout_s
    max_header_bytes: ClassVar[int] = EdgeLimits().max_header_bytes
    # One per server, set by guarded_protocol (uvicorn's `self.connections` is its plain set).
    registry: ClassVar[Connections]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # reading a request line and headers
        self._head_bytes = 0
        self._deadline: asyncio.TimerHandle | None = None
        self._opened = 0.0
        self._fresh = True  # nothing received yet on this connection

    # -- uvicorn's protocol, extended -------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not type(self).registry.admit(self):
            transport.close()  # nothing could make room for it
            return
        # Two hops: on asyncio's own loop one `call_soon` would still run before the next read.
        self.loop.call_soon(self.loop.call_soon, type(self).registry.ripen, self)
        self._opened = self.loop.time()
        self._arm(min(FIRST_BYTE_S, self.read_timeout_s), self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        type(self).registry.drop(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._fresh:
            # The first byte: the headers now have what is left of the read timeout.
            self._fresh = False
            left = self.read_timeout_s - (self.loop.time() - self._opened)
            self._arm(max(0.0, left), self._head_too_slow)
        super().data_received(data)
        if self._in_head and not self.transport.is_closing():
            # Everything fed while the headers are still incomplete was request line and
            # headers (httptools keeps a partial header to itself, so count here, not per header).
            self._head_bytes += len(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse(431, b"Request Header Fields Too Large")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        if self._deadline is None:  # a kept-alive connection's next request
            self._arm(self.read_timeout_s, self._head_too_slow)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._arm(self.read_timeout_s + _BODY_GRACE_S, self._body_too_slow)
        super().on_headers_complete()
        # A pipelined request waits behind the running one: the connection keeps the higher tier.
        registry = type(self).registry
        registry.place(self, max(registry.where.get(self, Tier.IDLE), tier_of(self.scope)))

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # The next pipelined request (uvicorn pops it from the right) or nothing: idle again,
        # at the end of the line.
        after = tier_of(self.pipeline[-1][0].scope) if self.pipeline else Tier.IDLE
        type(self).registry.place(self, after)
        super().on_response_complete()

    # -- shedding and the deadlines ---------------------------------------------------------------

    def shed(self) -> None:
        """Closed to admit a newer connection (already out of the registry)."""
        self._disarm()
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self, seconds: float, then: Any) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_too_slow(self) -> None:
        self._deadline = None
        self._refuse(408, b"Request Timeout")

    def _body_too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()  # the app's receive() now says http.disconnect

    def _refuse(self, status: int, text: bytes) -> None:
        """Answer before any app saw the request, and close (uvicorn's own 400 does the same)."""
        self._disarm()
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(
                b"".join(
                    [
                        STATUS_LINE[status],
                        b"content-type: text/plain; charset=utf-8\r\n",
                        b"content-length: %d\r\n" % len(text),
                        b"connection: close\r\n\r\n",
                        text,
                    ]
                )
            )
        self.transport.close()


def guarded_protocol(limits: EdgeLimits) -> type[GuardedHttpProtocol]:
    """The protocol class for `uvicorn.Config(http=...)`, with `limits`' deadlines and caps (and
    a connection registry of its own: one class per server)."""
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {
            "read_timeout_s": limits.read_timeout_s,
            "max_header_bytes": limits.max_header_bytes,
            "registry": Connections(limits.max_connections),
        },
    )
