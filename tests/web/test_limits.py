"""The edge's limits over real uvicorn on loopback, configured as `pairbot serve` configures it.

Each test speaks raw HTTP/1.1 on a socket where a client library would hide what matters here
(a body never finished, headers sent a byte at a time): a refused body is answered before it
is read and the connection closes; a request that is too slow is dropped within the read
timeout; the budget of body bytes held at once answers 503 with Retry-After instead of
buffering, and keeps room for ordinary deliveries. Every wait is a deadline against hanging,
never a measured time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.web.app import create_app
from app.web.limits import BodyBudget, Gone, Refused, read_body
from app.web.settings import MIB, EdgeLimits
from tests.web.conftest import (
    AppGitHub,
    Served,
    app_settings,
    fixture,
    github_forges,
    github_headers,
    served,
)

FAST = 0.5  # the read timeout these tests configure: short, so a dropped request is quick
_BOUND_S = 20.0  # how long any one wait may take before the test fails (a deadline)


@contextmanager
def edge(tmp_path: Path, **limits: Any) -> Iterator[Served]:
    limits.setdefault("read_timeout_s", FAST)
    settings = app_settings(tmp_path, limits=EdgeLimits(**limits))
    app = create_app(settings, github=github_forges(AppGitHub()), poll_s=0.05)
    with served(app, limits=settings.limits) as server:
        yield server


def connect(server: Served) -> socket.socket:
    port = int(server.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=_BOUND_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


FORGED = "sha256=" + "0" * 64  # could be a signature: the body is read before it is checked


def head(path: str = "/webhooks/github", method: str = "POST", **headers: str | int) -> bytes:
    """A request's head; a POST carries a signature that is well formed (and wrong)."""
    if method == "POST":
        headers.setdefault("X_Hub_Signature_256", FORGED)
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def until_closed(sock: socket.socket, *, trickle: bytes = b"", every_s: float = 0.05) -> bytes:
    """Everything the server sends until it closes the connection, sending one byte of
    `trickle` every `every_s` meanwhile; fails if it is still open after _BOUND_S. It closes
    `sock` on the way out."""
    with sock:
        return _until_closed(sock, trickle, every_s)


def _until_closed(sock: socket.socket, trickle: bytes, every_s: float) -> bytes:
    received = bytearray()
    deadline = time.monotonic() + _BOUND_S
    sock.settimeout(every_s)
    position = 0
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            if position < len(trickle):
                try:
                    sock.sendall(trickle[position : position + 1])
                except OSError:
                    return bytes(received)  # closed while sending: the server hung up
                position += 1
            continue
        except ConnectionResetError:
            return bytes(received)
        if not data:
            return bytes(received)
        received += data
    raise AssertionError(f"the server kept the connection open; it sent {bytes(received)!r}")


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def signed_delivery() -> tuple[bytes, dict[str, str]]:
    payload = fixture("github-webhooks/issue_comment/created.with-installation.json")
    body = json.dumps(payload).encode()
    return body, github_headers("issue_comment", body)


# -- the body cap ---------------------------------------------------------------------------------


def test_a_declared_length_over_the_cap_is_413_before_any_body_is_read(tmp_path: Path) -> None:
    with edge(tmp_path, max_body_bytes=64 * 1024, body_budget_bytes=MIB) as server:
        sock = connect(server)
        sock.sendall(head(Content_Type="application/json", Content_Length=64 * 1024 + 1))
        answer = until_closed(sock)  # no body was ever sent: the answer does not wait for one
        assert status_of(answer) == 413
        assert b"connection: close" in answer.lower()
        assert b"over 65536 bytes" in answer
        assert server.service.budget.held == 0


def test_a_chunked_body_growing_past_the_cap_is_413_and_reading_stops(tmp_path: Path) -> None:
    with edge(tmp_path, max_body_bytes=64 * 1024, body_budget_bytes=MIB) as server:
        chunks = (b"x" * 16384 for _ in range(64))  # 1 MiB, never declared
        with httpx.Client(base_url=server.url, timeout=_BOUND_S) as client:
            response = client.post(
                "/webhooks/github",
                content=chunks,
                headers={"Content-Type": "application/json", "X-Hub-Signature-256": FORGED},
            )
        assert response.status_code == 413
        assert response.headers["connection"] == "close"
        assert server.service.budget.held == 0
        assert server.service.budget.peak <= 64 * 1024 + 16384


@pytest.mark.parametrize(
    "signature", [None, "sha1=" + "0" * 40, "sha256=abc", "sha256=" + "g" * 64]
)
def test_without_a_well_formed_signature_no_body_is_read(
    tmp_path: Path, signature: str | None
) -> None:
    with edge(tmp_path) as server:
        sock = connect(server)
        extra = {"X_Hub_Signature_256": signature} if signature else {}
        request = head(Content_Type="application/json", Content_Length=10 * MIB, **extra)
        if signature is None:
            request = request.replace(f"X-Hub-Signature-256: {FORGED}\r\n".encode(), b"")
        sock.sendall(request)
        answer = until_closed(sock)  # answered without waiting for the 10 MiB
        assert status_of(answer) == 401
        assert (b"missing" if signature is None else b"malformed") in answer
        assert server.service.budget.peak == 0


# -- the budget of body bytes in flight -----------------------------------------------------------


def test_a_full_budget_is_503_with_retry_after_and_small_deliveries_keep_their_reserve(
    tmp_path: Path,
) -> None:
    """8 MiB of budget: bodies over 1 MiB share 6 MiB of it; the last 2 MiB are for small ones."""
    # The stalled upload must outlive the steps below on a loaded machine, so its read deadline
    # is long; the 408 at that deadline is proven by the byte-at-a-time tests below.
    limits = {"max_body_bytes": 6 * MIB, "body_budget_bytes": 8 * MIB, "read_timeout_s": 60.0}
    with edge(tmp_path, **limits) as server:
        budget = server.service.budget
        stalled = connect(server)  # declares 5 MiB, sends a little, and stalls
        stalled.sendall(head(Content_Type="application/json", Content_Length=5 * MIB))
        stalled.sendall(b"{" * 1000)
        wait_for(lambda: budget.held == 5 * MIB, "the stalled upload to be admitted")

        large = connect(server)
        large.sendall(head(Content_Type="application/json", Content_Length=2 * MIB))
        answer = until_closed(large)
        assert status_of(answer) == 503
        # Retry-After: by then every body held now has been read or dropped (the read deadline).
        assert b"retry-after: 60" in answer.lower() and b"connection: close" in answer.lower()

        # Undeclared (chunked), it is refused as it grows past what is left for large bodies.
        grown = (b"x" * 65536 for _ in range(32))  # 2 MiB
        with httpx.Client(base_url=server.url, timeout=_BOUND_S) as client:
            refused = client.post(
                "/webhooks/github",
                content=grown,
                headers={"Content-Type": "application/json", "X-Hub-Signature-256": FORGED},
            )
            assert refused.status_code == 503 and refused.headers["retry-after"] == "60"
            assert refused.json()["status"] == "unavailable"
            # An ordinary delivery still fits: the reserve is there for it.
            body, headers = signed_delivery()
            accepted = client.post("/webhooks/github", content=body, headers=headers)
            assert accepted.status_code == 200, accepted.text
        assert budget.held == 5 * MIB
        # The stalled client goes away, and its share comes back.
        stalled.close()
        wait_for(lambda: budget.held == 0, "the budget to be given back")
        assert budget.peak <= 8 * MIB


def wait_for(check: Any, what: str) -> None:
    deadline = time.monotonic() + _BOUND_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# -- read deadlines and the header cap ------------------------------------------------------------


def test_headers_sent_a_byte_at_a_time_are_dropped_with_408(tmp_path: Path) -> None:
    with edge(tmp_path) as server:
        sock = connect(server)
        started = time.monotonic()
        answer = until_closed(sock, trickle=b"POST /webhooks/github HTTP/1.1\r\nHost: x\r\n" * 50)
        assert status_of(answer) == 408
        assert time.monotonic() - started < _BOUND_S


def test_a_connection_that_sends_nothing_is_closed(tmp_path: Path) -> None:
    with edge(tmp_path) as server:
        assert status_of(until_closed(connect(server))) == 408


def test_a_body_sent_a_byte_at_a_time_is_dropped_with_408_and_holds_nothing(
    tmp_path: Path,
) -> None:
    with edge(tmp_path) as server:
        sock = connect(server)
        sock.sendall(head(Content_Type="application/json", Content_Length=1000))
        answer = until_closed(sock, trickle=b"{" * 1000)
        assert status_of(answer) == 408
        assert b"did not arrive within 0.5 s" in answer
        assert server.service.budget.held == 0
        assert server.run(server.service.store.deliveries()) == []


def test_a_body_nobody_reads_is_dropped_too(tmp_path: Path) -> None:
    """/healthz answers without reading a body; the connection does not stay open for it."""
    with edge(tmp_path) as server:
        sock = connect(server)
        sock.sendall(head("/healthz", "GET", Content_Length=1000))
        answer = until_closed(sock, trickle=b"x" * 1000)
        assert status_of(answer) == 200


def test_a_kept_alive_connection_gets_the_same_deadline_for_its_next_request(
    tmp_path: Path,
) -> None:
    with edge(tmp_path) as server:
        sock = connect(server)
        sock.sendall(head("/healthz", "GET"))
        next_request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" * 50
        answer = until_closed(sock, trickle=next_request)
        first, _, rest = answer.partition(b"HTTP/1.1 ")[2].partition(b"HTTP/1.1 ")
        assert first.startswith(b"200") and rest.startswith(b"408")


def test_headers_over_the_cap_are_431(tmp_path: Path) -> None:
    with edge(tmp_path, max_header_bytes=4096) as server:
        sock = connect(server)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Padding: " + b"a" * 8192)
        assert status_of(until_closed(sock)) == 431


def test_past_the_connection_cap_the_oldest_idle_connection_makes_room_for_a_delivery(
    tmp_path: Path,
) -> None:
    # A long read timeout, and heads begun but never ended: the idle connections stay open
    # until shed (one that sent nothing would be closed at the first-byte deadline anyway).
    with edge(tmp_path, max_connections=8, read_timeout_s=60.0) as server:
        idle = [connect(server) for _ in range(8)]
        for sock in idle:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        body, headers = signed_delivery()
        try:
            answer = server.post("/webhooks/github", body, headers, timeout=_BOUND_S)
            assert answer.status_code == 200, answer.text
            assert until_closed(idle[0]) == b""  # the oldest, closed without a word
            idle[-1].setblocking(False)
            with pytest.raises(BlockingIOError):  # the newest is still open
                idle[-1].recv(1)
        finally:
            for sock in idle:
                sock.close()


def test_a_connection_with_a_signed_delivery_is_never_shed(tmp_path: Path) -> None:
    # Every slot holds a delivery claiming a signature, its body still to come: those are
    # kept, and the newcomer is closed at once instead.
    with edge(tmp_path, max_connections=8, read_timeout_s=60.0) as server:
        held = [connect(server) for _ in range(8)]
        try:
            for sock in held:
                # 100 Continue: the server has the headers and the app waits for the body.
                sock.sendall(
                    head(Content_Type="application/json", Content_Length=100, Expect="100-continue")
                )
                assert sock.recv(64).startswith(b"HTTP/1.1 100 ")
            wait_for(lambda: until_closed(connect(server)) == b"", "a newcomer refused")
            for sock in held:
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1)
        finally:
            for sock in held:
                sock.close()


# -- the pieces, without a server -----------------------------------------------------------------


def test_the_budget_keeps_a_quarter_for_small_bodies_and_gives_back_what_a_request_held() -> None:
    budget = BodyBudget(EdgeLimits(max_body_bytes=6 * MIB, body_budget_bytes=8 * MIB))
    with budget.hold() as large:
        assert large.grow_to(6 * MIB) and budget.held == 6 * MIB
        assert large.grow_to(5 * MIB)  # never shrinks
        with budget.hold() as other:
            assert not other.grow_to(MIB + 1)  # large: no room left for it
            assert other.grow_to(MIB) and budget.held == 7 * MIB  # small: the reserve
            assert other.grow_to(MIB)
        assert budget.held == 6 * MIB
    assert budget.held == 0 and budget.peak == 7 * MIB


def test_read_body_says_gone_when_the_client_left_and_reads_a_chunked_body() -> None:
    limits = EdgeLimits()
    budget = BodyBudget(limits)

    def channel(*messages: dict[str, Any]) -> Any:
        queue = list(messages)

        async def receive() -> Any:
            return queue.pop(0)

        return receive

    async def go() -> None:
        with budget.hold() as hold:
            gone = channel(
                {"type": "http.request", "body": b"{", "more_body": True},
                {"type": "http.disconnect"},
            )
            with pytest.raises(Gone):
                await read_body(gone, None, hold, limits)
        with budget.hold() as hold:
            parts = channel(
                {"type": "http.request", "body": b"{}", "more_body": True},
                {"type": "http.request", "body": b"", "more_body": False},
            )
            assert await read_body(parts, "not a number", hold, limits) == b"{}"
            assert hold.size == 2

    asyncio.run(go())
    assert budget.held == 0


def test_a_refusal_carries_its_status_reason_and_retry_after() -> None:
    refused = Refused(503, "full", retry_after_s=3)
    assert (refused.status, refused.reason, refused.retry_after_s, str(refused)) == (
        503,
        "full",
        3,
        "full",
    )


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"x" * (64 * 1024 + 1), "application/json", 413),
        (b'{"id": "n-1"}', "text/plain", 415),
        (b"not json", "application/json", 415),
        (b'{"eventType": "workitem.commented"}', "application/json", 400),
    ],
)
def test_azure_devops_notifications_get_the_same_limits_and_refusals(
    tmp_path: Path, body: bytes, content_type: str, status: int
) -> None:
    limits = EdgeLimits(max_body_bytes=64 * 1024, body_budget_bytes=MIB)
    settings = app_settings(
        tmp_path, limits=limits, ado_username="hooks", ado_password=SecretStr("hook-password")
    )
    app = create_app(settings, github=github_forges(AppGitHub()), poll_s=0.05)
    auth = "Basic " + base64.b64encode(b"hooks:hook-password").decode()
    with served(app, limits=settings.limits) as server:
        answer = server.post(
            "/webhooks/azure-devops", body, {"Content-Type": content_type, "Authorization": auth}
        )
        assert answer.status_code == status, answer.text
        assert server.run(server.service.store.deliveries()) == []
        assert server.service.budget.held == 0
