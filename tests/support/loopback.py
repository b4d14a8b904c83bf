"""One HTTP server on loopback for the fake forges, and one bridge to `git http-backend`.

    async def answer(request: Request) -> Response: ...
    with serve(answer, name="fake-forge") as origin:            # http://127.0.0.1:<port>
        ...                                                     # another process talks to it

The fakes (tests/support/github_server.py for GitHub, tests/support/fake_azure.py for Azure
DevOps) only decide answers; this module owns the socket. `serve` runs aiohttp on its own event
loop in a daemon thread, binds 127.0.0.1 on a free port, hands every request to the handler as
a `Request` (the path and query exactly as sent, not decoded, so a fake parses them as its
service does; the body with any `Content-Encoding` and chunking already undone) and writes back
its `Response`. A handler that raises `DropConnection` makes the client see the connection die
without an answer (a transport error, as when a server or proxy gives up). Any other exception
is the handler's bug: it is answered 500 and re-raised in the test thread when the server
stops, so a broken fake fails the test instead of hiding behind a status.

`git_http_backend` answers git's smart HTTP (`info/refs`, `git-upload-pack`,
`git-receive-pack`) from a real bare repository by running `git http-backend` as the CGI it
is; each fake puts its own authentication in front of it. See git-http-backend(1):
https://git-scm.com/docs/git-http-backend
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from tests.support.git import git_env

HOST = "127.0.0.1"
# Headers that describe one hop's framing, not the message: each side sets its own.
HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)
_MAX_BODY = 64 * 1024 * 1024  # git pushes whole packs in one request
_STOP_TIMEOUT_S = 30.0  # a bound on a hung start or shutdown, never a measured duration


@dataclass(frozen=True)
class Request:
    """One request as the client sent it."""

    method: str
    path: str  # percent-encoded, as sent, without the query
    query: str  # the raw query string, as sent ("" when none)
    headers: CIMultiDictProxy[str]  # case-insensitive, as HTTP wants
    body: bytes  # transfer and content encodings undone
    origin: str  # http://127.0.0.1:<port>, for links that point back at the server
    remote: str  # the client's address

    @property
    def target(self) -> str:
        """The request target: path and query, as sent."""
        return f"{self.path}?{self.query}" if self.query else self.path


@dataclass
class Response:
    """An answer; hop-by-hop headers in `headers` are dropped (the server frames the body)."""

    status: int
    body: bytes = b""
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)

    @classmethod
    def of(cls, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Response:
        return cls(status, body, CIMultiDict(headers or {}))


class DropConnection(Exception):
    """Raised by a handler: close the connection without writing any answer."""


Handler = Callable[[Request], Awaitable[Response]]


class LoopbackServer:
    """aiohttp on its own event loop in a daemon thread, answering with `handler`."""

    def __init__(self, handler: Handler, *, name: str = "loopback") -> None:
        self.handler = handler
        self.name = name
        self.port: int | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._crash: BaseException | None = None

    @property
    def origin(self) -> str:
        assert self.port is not None, "start() the server first"
        return f"http://{HOST}:{self.port}"

    def start(self) -> str:
        """Serve on 127.0.0.1 (a free port); the origin `http://127.0.0.1:<port>`."""
        self._thread.start()
        self.port = self._started.result(timeout=_STOP_TIMEOUT_S)
        return self.origin

    def stop(self) -> None:
        """Stop serving; raises if the server hung, crashed, or a handler raised."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise RuntimeError(f"the {self.name} server did not stop")
        if self._crash is not None:
            raise RuntimeError(f"the {self.name} server failed") from self._crash

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # surfaced in the test thread: at start, or at stop
            if self._started.done():
                self._crash = self._crash or error
            else:
                self._started.set_exception(error)

    async def _serve(self) -> None:
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, HOST, 0)
            await site.start()
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            _, port = runner.addresses[0][:2]
            self._started.set_result(int(port))
            await self._stop.wait()
        finally:
            await runner.cleanup()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        incoming = Request(
            method=request.method,
            path=request.rel_url.raw_path,
            query=request.rel_url.raw_query_string,
            headers=request.headers,
            body=await request.read(),
            origin=f"http://{HOST}:{self.port}",
            remote=request.remote or HOST,
        )
        try:
            answer = await self.handler(incoming)
        except DropConnection:
            if request.transport is not None:
                request.transport.abort()
            raise web.HTTPServiceUnavailable() from None  # never written: the socket is gone
        except Exception as error:
            self._crash = self._crash or error
            text = f"{self.name}: the handler raised {error!r}"
            return web.Response(status=500, text=text)
        headers = CIMultiDict(
            (k, v) for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS
        )
        return web.Response(status=answer.status, body=answer.body, headers=headers)


@contextlib.contextmanager
def serve(handler: Handler, *, name: str = "loopback") -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 until the block ends; yields `http://127.0.0.1:<port>`."""
    server = LoopbackServer(handler, name=name)
    origin = server.start()
    try:
        yield origin
    finally:
        server.stop()


def git_http_backend(
    request: Request, *, project_root: Path, path_info: str, remote_user: str
) -> Response:
    """Answer one smart-HTTP request for the repository under `project_root` named by
    `path_info` (`/<repo>.git/info/refs`, ...) as `git http-backend` does, with `remote_user`
    as the authenticated user (http-backend allows `receive-pack`, a push, only to a known
    user). Blocking: an async caller runs it in a thread."""
    env = git_env(identity=None)
    env.update(
        GIT_PROJECT_ROOT=str(project_root),
        GIT_HTTP_EXPORT_ALL="1",
        # A fetch's negotiation can be larger than http-backend's default 10 MB buffer.
        GIT_HTTP_MAX_REQUEST_BUFFER="100M",
        PATH_INFO=path_info,
        REQUEST_METHOD=request.method,
        QUERY_STRING=request.query,
        CONTENT_TYPE=request.headers.get("content-type", ""),
        # The server already undid any Content-Encoding: the body goes on as it is now.
        CONTENT_LENGTH=str(len(request.body)),
        REMOTE_USER=remote_user,
        REMOTE_ADDR=request.remote,
    )
    if "git-protocol" in request.headers:  # protocol v2 travels in this header
        env["GIT_PROTOCOL"] = request.headers["git-protocol"]
    done = subprocess.run(
        ["git", "http-backend"], input=request.body, env=env, capture_output=True, check=False
    )
    # A CGI answer: header lines, a blank line, the body.
    head, separator, payload = done.stdout.partition(b"\r\n\r\n")
    if not separator:
        head, separator, payload = done.stdout.partition(b"\n\n")
    if done.returncode != 0 or not separator:
        message = f"git http-backend failed: {done.stderr.decode(errors='replace')}"
        return Response.of(500, message.encode(), {"Content-Type": "text/plain"})
    status, headers = 200, CIMultiDict[str]()
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers.add(name.strip(), value.strip())
    return Response(status, payload, headers)
