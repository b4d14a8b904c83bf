"""What the webhook edge holds before a delivery is authenticated: a body read under limits.

    budget = BodyBudget(limits)               one per app: body bytes held across all requests
    with budget.hold() as hold:               one per request; released when the request ends
        body = await read_body(receive, declared, hold, limits)   # Refused: 413 / 503 / 408

A body is read no further than `max_body_bytes` (a declared Content-Length past it is refused
before anything is read), within `read_timeout_s` of the request reaching the app, and only
while the budget has room for it: a declared length is taken from the budget up front (a body
that cannot be held is refused before it is read), an undeclared (chunked) one as it arrives.
Bodies over `SMALL_BODY` may fill only three quarters of the budget, so stalled large uploads
leave room for ordinary deliveries. Every refusal closes the connection: the rest of a body
that was not read is never waited for.

The budget is a plain counter: the event loop is one thread, and nothing awaits between a
check and its update.

Connections are bounded in app.web.protocol; `connection_ceiling` is the most it holds open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.types import Receive

from app.web.settings import SMALL_BODY, EdgeLimits


def connection_ceiling(cap: int) -> int:
    """The most connections the server holds open under a cap of `cap` (`max_connections`):
    past the cap, connections accepted but not yet read are kept for their first read, up to a
    quarter of the cap more (at least 64) — see app.web.protocol.Connections."""
    return cap + max(64, cap // 4)


def connections_within(room: int) -> int:
    """The largest cap whose `connection_ceiling` is at most `room` (at least 1)."""
    cap = max(1, min(room - 64, room * 4 // 5))
    while connection_ceiling(cap + 1) <= room:  # a step or two past the rounding
        cap += 1
    return cap


class Refused(Exception):
    """A body the edge will not read: `status` (413, 503 or 408) and a one-line `reason`."""

    def __init__(self, status: int, reason: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after_s = retry_after_s


class Gone(Exception):
    """The client disconnected before the whole body arrived: nothing to answer."""


class BodyBudget:
    """Body bytes held at once by all requests, at most `limits.body_budget_bytes`."""

    def __init__(self, limits: EdgeLimits) -> None:
        self.total = limits.body_budget_bytes
        self.reserve = limits.reserve_bytes
        self.held = 0
        self.peak = 0  # the most ever held at once: what a test or the benchmark reads

    def take(self, size: int, *, small: bool) -> bool:
        """Hold `size` more bytes if that keeps within the budget (within three quarters of
        it for a request that is not `small`)."""
        room = self.total if small else self.total - self.reserve
        if self.held + size > room:
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def give(self, size: int) -> None:
        self.held -= size

    @contextmanager
    def hold(self) -> Iterator[Hold]:
        """One request's share, given back however the request ends."""
        share = Hold(self)
        try:
            yield share
        finally:
            self.give(share.size)


@dataclass
class Hold:
    """The bytes one request holds of the budget."""

    budget: BodyBudget
    size: int = 0

    def grow_to(self, size: int) -> bool:
        if size <= self.size:
            return True
        if not self.budget.take(size - self.size, small=size <= SMALL_BODY):
            return False
        self.size = size
        return True


def declared_length(value: str | None) -> int | None:
    """Content-Length as a number (None when absent or not a number: the server's HTTP
    parser has already refused a malformed one on a request it passed on)."""
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return int(value)


async def read_body(
    receive: Receive, declared: str | None, hold: Hold, limits: EdgeLimits
) -> bytes:
    """The raw body from the ASGI receive channel, within `limits` and the budget of `hold`.

    Raises `Refused` (413 past `max_body_bytes`, 503 when the budget has no room, 408 when the
    body is not all there within `read_timeout_s`) or `Gone` (the client left).
    """
    length = declared_length(declared)
    if length is not None:
        if length > limits.max_body_bytes:
            raise Refused(413, f"the body is over {limits.max_body_bytes} bytes")
        if not hold.grow_to(length):
            raise _busy(limits)
    try:
        async with asyncio.timeout(limits.read_timeout_s):
            return await _read(receive, hold, limits)
    except TimeoutError:
        raise Refused(408, f"the body did not arrive within {limits.read_timeout_s:g} s") from None


async def _read(receive: Receive, hold: Hold, limits: EdgeLimits) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise Gone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise Refused(413, f"the body is over {limits.max_body_bytes} bytes")
        if not hold.grow_to(size):
            raise _busy(limits)
        if not message.get("more_body", False):
            if not chunks:
                return chunk  # the whole body in one message: the usual case, no copy
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


def _busy(limits: EdgeLimits) -> Refused:
    return Refused(
        503,
        "the server holds as many request bodies as it may; retry later",
        retry_after_s=limits.retry_after_s,
    )
