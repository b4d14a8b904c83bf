"""uvicorn's HTTP protocol with deadlines and a header cap: slow or bloated requests are dropped.

    uvicorn.Config(app, http=guarded_protocol(limits), ...)

uvicorn bounds an idle kept-alive connection (`timeout_keep_alive`) and the number of
connections (`limit_concurrency`), but nothing else: a connection that sends nothing, headers
one byte at a time, or a body one byte at a time stays open for as long as the client likes,
and httptools buffers a header line of any length. This subclass of uvicorn's httptools
protocol (pairbot pins httptools, so it is what `pairbot serve` runs) adds, per request:

    headers   all of them within `read_timeout_s` of the request's first byte (of the
              connection's opening, for its first request) → else 408 and the connection closes;
              at most `max_header_bytes` of request line and headers → else 431 and it closes
    body      all of it within `read_timeout_s` (plus a second, so the app's own deadline,
              which answers 408, normally comes first) of the headers → else the connection
              closes — whichever route the request went to, read or not

Past `limit_concurrency` open connections uvicorn answers every request 503; `/healthz` is
exempt (it is cheap), so a crowd of strangers cannot make a healthy server look dead to
whatever restarts it. The app's own body limits (app.web.limits) apply on top, to the
webhook routes.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.web.settings import EdgeLimits

HEALTH_PATH = b"/healthz"
_BODY_GRACE_S = 1.0  # the app answers a slow body itself first; this only closes what it left


class GuardedHttpProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with per-request read deadlines and a header size cap."""

    read_timeout_s: ClassVar[float] = EdgeLimits().read_timeout_s
    max_header_bytes: ClassVar[int] = EdgeLimits().max_header_bytes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # reading a request line and headers
        self._head_bytes = 0
        self._deadline: asyncio.TimerHandle | None = None

    # -- uvicorn's protocol, extended -------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.read_timeout_s, self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
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
        # uvicorn answers every request 503 once `limit_concurrency` connections are open; the
        # liveness probe is exempt, or a crowd of strangers would get a healthy server restarted.
        health = self.url.split(b"?", 1)[0] == HEALTH_PATH
        self.limit_concurrency = None if health else self.config.limit_concurrency
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    # -- the deadlines ----------------------------------------------------------------------------

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
    """The protocol class for `uvicorn.Config(http=...)`, with `limits`' deadlines and cap."""
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {"read_timeout_s": limits.read_timeout_s, "max_header_bytes": limits.max_header_bytes},
    )
