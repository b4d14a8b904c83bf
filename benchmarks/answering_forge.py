"""A GitHub that answers, over loopback HTTP, for the command-path benchmark and its tests.

    python -m benchmarks.answering_forge --fd N --latency-ms 5     (started by the benchmark)

tests/support/fake_github.py's `FakeGitHub` — real response shapes from the corpora, ETags and
304s, App JWTs verified, installation tokens minted and checked — plus
`POST /repos/{o}/{r}/dispatches` (GitHub's 204), served as a raw ASGI app by uvicorn in its own
process, so its CPU is never counted as the App's. Every answer leaves `latency_ms` after its
request arrived, as GitHub's would (a few ms from a nearby region; choose it).

A comment exists on GitHub before its delivery is sent: `POST /_comments` with
`[[issue, body], ...]` stores them as the commenter's and answers their ids (not a GitHub route,
called before the clocks start). Bookkeeping, read with `GET /_stats` (not a GitHub route):
requests by method and route kind, 304s, token mints, and `connections` (distinct client
ports seen: each is a TCP connection the server accepted). The quota is refilled on every
request: a benchmark sends more than the 5,000 requests an hour GitHub grants, and a spent
quota would measure the rate window instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from cryptography.hazmat.primitives import serialization

from tests.support.fake_github import FakeGitHub, _Request
from tests.support.github_server import WallClock

OWNER, NAME = "Codertocat", "Hello-World"  # the repository of the corpus's issue_comment
INSTALLATION = 1  # the corpus delivery's installation id
COMMENTER = "Codertocat"
ISSUES = 100  # commands spread over them: each issue's comments stay on one page

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_ID = re.compile(r"/\d+")
_REACTION = re.compile(r".*/issues/comments/(\d+)/reactions")
_HOP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


@dataclass
class AnsweringGitHub(FakeGitHub):
    """The fake, with repository_dispatch, a quota that never runs out, and route counts."""

    dispatches: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    # comment id → when its first reaction arrived (CLOCK_MONOTONIC: one machine, any process)
    reactions_at: dict[str, float] = field(default_factory=dict)

    def _route(self, call: _Request) -> httpx.Response:
        self._remaining = 5000
        self.kinds[f"{call.method} {_ID.sub('/N', call.path)}"] += 1
        reacted = _REACTION.fullmatch(call.path) if call.method == "POST" else None
        if reacted is not None:
            self.reactions_at.setdefault(reacted.group(1), time.monotonic())
        if call.method == "POST" and call.path == f"{self._repo_path()}/dispatches":
            body = call.body if isinstance(call.body, dict) else {}
            if not isinstance(body.get("event_type"), str):
                return self._error(422, "Invalid request.")
            self.dispatches += 1
            return httpx.Response(204, headers=self._headers())
        return super()._route(call)


def new_forge(base_url: str, private_key_pem: str | None = None) -> AnsweringGitHub:
    """The fake as the benchmark's deliveries need it: their repository, installation and
    commenter (an admin), and the issues they comment on; App JWTs are checked against
    `private_key_pem`'s public half (the App's key, which another process signs with)."""
    fake = AnsweringGitHub(
        clock=WallClock(), owner=OWNER, repo=NAME, installation_id=INSTALLATION, base_url=base_url
    )
    if private_key_pem is not None:
        key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        fake.public_key = key.public_key()
    fake.user(COMMENTER)
    fake.collaborators[COMMENTER] = "admin"
    for n in range(ISSUES):
        fake.seed_issue(f"card {n + 1}", "a card")
    return fake


class ForgeApp:
    """The raw ASGI app: each request to the fake, its answer after `latency_s`."""

    def __init__(self, fake: AnsweringGitHub, latency_s: float) -> None:
        self.fake = fake
        self.latency_s = latency_s
        self.clients: set[tuple[str, int]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        arrived = asyncio.get_running_loop().time()
        client = scope.get("client")
        if client:
            self.clients.add((str(client[0]), int(client[1])))
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/_stats":
            await _answer(send, 200, [(b"content-type", b"application/json")], self.stats())
            return
        if scope["path"] == "/_comments":  # the comments deliveries will announce
            ids = [self.fake.add_comment(n, text, COMMENTER) for n, text in json.loads(body)]
            await _answer(send, 200, [], json.dumps(ids).encode())
            return
        response = await self.fake.handle(_request(scope, body, self.fake.base_url))
        content = await response.aread()
        wait = arrived + self.latency_s - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)
        headers = [
            (k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() not in _HOP
        ]
        await _answer(send, response.status_code, headers, content)

    def stats(self) -> bytes:
        fake = self.fake
        return json.dumps(
            {
                "requests": fake.requests,
                "not_modified": fake.not_modified,
                "mints": fake.mints,
                "dispatches": fake.dispatches,
                "connections": len(self.clients),
                "kinds": dict(fake.kinds),
                "reactions": fake.reactions_at,
                "unexpected": fake.unexpected[:5],
            }
        ).encode()


def _request(scope: Scope, body: bytes, base_url: str) -> httpx.Request:
    query = scope.get("query_string", b"").decode()
    url = f"{base_url.rstrip('/')}{scope['path']}" + (f"?{query}" if query else "")
    headers = [(k.decode(), v.decode()) for k, v in scope["headers"]]
    return httpx.Request(scope["method"], url, headers=headers, content=body)


async def _answer(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], content: bytes
) -> None:
    headers = [*headers, (b"content-length", str(len(content)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


def serve(fd: int, latency_ms: float, key: Path | None = None) -> None:
    """Child process: serve the forge on the inherited listening socket `fd` until killed."""
    import uvicorn  # noqa: PLC0415  # only the child serves

    sock = socket.socket(fileno=fd)
    port = sock.getsockname()[1]
    pem = key.read_text() if key is not None else None
    app = ForgeApp(new_forge(f"http://127.0.0.1:{port}", pem), latency_ms / 1000)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


@contextlib.contextmanager
def forge_process(workdir: Path, key: Path, latency_ms: float = 5.0) -> Iterator[int]:
    """The forge in its own process on a free loopback port (yielded), until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = int(sock.getsockname()[1])
    argv = ["--fd", str(sock.fileno()), "--latency-ms", str(latency_ms), "--key", str(key)]
    with (workdir / f"forge-{port}.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.answering_forge", *argv],
            cwd=Path(__file__).resolve().parents[1],
            pass_fds=[sock.fileno()],
            stdout=log,
            stderr=log,
        )
        sock.close()
        try:
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def add_comments(port: int, comments: list[tuple[int, str]]) -> list[int]:
    """Store `comments` ((issue, body) each) on the forge; their ids, in order."""
    response = httpx.post(
        f"http://127.0.0.1:{port}/_comments", json=comments, timeout=60.0, trust_env=False
    )
    response.raise_for_status()
    return [int(i) for i in response.json()]


def fetch_stats(port: int) -> dict[str, Any]:
    """The forge's bookkeeping (`GET /_stats`)."""
    response = httpx.get(f"http://127.0.0.1:{port}/_stats", timeout=10.0, trust_env=False)
    response.raise_for_status()
    stats: dict[str, Any] = response.json()
    return stats


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--key", type=Path, help="the App's private key (PEM)")
    args = parser.parse_args(argv)
    serve(args.fd, args.latency_ms, args.key)


if __name__ == "__main__":
    _cli(sys.argv[1:])
