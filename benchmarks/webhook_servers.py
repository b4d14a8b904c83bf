"""The servers of benchmarks/webhook_load.py, each run in a child process on a listening socket
it inherits (`start_server` starts one as `python -m benchmarks.webhook_load --serve ROLE`):
the bare Starlette endpoint, the edge floor (read, verify, parse), and the App as `pairbot
serve` builds it against the answering forge; and the signed `/pair status` deliveries they
are sent. `_NullForges` (a GitHub that answers at once) and `_floor_app` are also
benchmarks/edge_targets.py's.
"""

from __future__ import annotations

import contextlib
import copy
import cProfile
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECRET = "webhook-load-benchmark-secret"  # noqa: S105 - a throwaway secret for loopback
PAYLOAD = ROOT / "tests" / "fixtures" / "github-webhooks" / "issue_comment"


def server_options() -> tuple[str, str]:
    """(http, loop) as uvicorn's "auto" resolves them here: httptools and uvloop if installed."""
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return http, loop


def describe(http: str, loop: str) -> str:
    def version(name: str) -> str:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            return name

    return (
        f"all three servers: {version('uvicorn')}, http {version(http)}, loop "
        f"{version(loop) if loop == 'uvloop' else 'asyncio'}, one process each, access log off"
    )


# -- the servers (run in child processes) ---------------------------------------------------------


def _bare_app() -> Any:
    from starlette.applications import Starlette  # noqa: PLC0415
    from starlette.requests import Request  # noqa: PLC0415
    from starlette.responses import Response  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    async def ok(_request: Request) -> Response:
        return Response(status_code=200)

    return Starlette(routes=[Route("/webhooks/github", ok, methods=["POST"])])


def _floor_app() -> Any:
    """The edge's mandatory work and nothing else (see the module docstring), as a raw ASGI
    endpoint like the App's own, so the floor pays no framework cost the App does not."""
    from starlette.applications import Starlette  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415
    from starlette.types import Receive, Scope, Send  # noqa: PLC0415

    from app.web.app import Answer, headers_of, parse_json  # noqa: PLC0415
    from app.web.limits import BodyBudget, read_body  # noqa: PLC0415
    from app.web.settings import EdgeLimits  # noqa: PLC0415
    from app.web.signature import SIGNATURE_HEADER, verify_github  # noqa: PLC0415

    key = SECRET.encode()
    wanted = frozenset({b"content-length", SIGNATURE_HEADER.encode()})
    limits = EdgeLimits()
    budget = BodyBudget(limits)

    class Floor:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            headers = headers_of(scope, wanted)
            with budget.hold() as hold:
                body = await read_body(receive, headers.get("content-length"), hold, limits)
                if not verify_github(key, body, headers.get(SIGNATURE_HEADER)):
                    await Answer(401).send(send)
                    return
                parse_json(body)
            await Answer(202, b'{"status":"checked"}').send(send)

    return Starlette(routes=[Route("/webhooks/github", Floor(), methods=["POST"])])


def _pairbot_app(store: Path, forge: int, key: Path) -> Any:
    from pydantic import SecretStr  # noqa: PLC0415

    from app.web.app import create_app  # noqa: PLC0415
    from app.web.forge import GitHubForges  # noqa: PLC0415
    from app.web.settings import AppSettings  # noqa: PLC0415
    from benchmarks.command_servers import APP_ID  # noqa: PLC0415

    settings = AppSettings(
        root=store.parent, store=store, webhook_secret=SecretStr(SECRET), app_slug="pairbot"
    )
    forges = GitHubForges(
        app_id=APP_ID,
        private_key=key.read_text(),
        base_url=f"http://127.0.0.1:{forge}",
        host_options={"write_spacing_s": 0.0},
    )
    return create_app(settings, github=forges)


def serve(
    role: str,
    fd: int,
    store: Path,
    http: str,
    loop: str,
    *,
    forge: int = 0,
    key: Path | None = None,
    profile: Path | None = None,
) -> None:
    """Child process: serve `role` on the inherited listening socket `fd` until terminated;
    with `profile`, under cProfile, its stats written to that file when terminated."""
    import uvicorn  # noqa: PLC0415

    from app.web.serve import server_config, settle_gc  # noqa: PLC0415
    from app.web.settings import EdgeLimits  # noqa: PLC0415

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app: Any
    if role == "app":
        assert key is not None  # the driver always passes it
        app = _pairbot_app(store, forge, key)
    else:
        app = _floor_app() if role == "floor" else _bare_app()
    # As `pairbot serve` configures uvicorn (app/web/serve.py: its limits, and httptools behind
    # the read deadlines of app.web.protocol), with the HTTP parser and loop named explicitly
    # so that all three surely run the same ones.
    config = server_config(
        app,
        EdgeLimits(),
        **({"http": http} if http != "httptools" else {}),  # argparse's choices: or "h11"
        loop=loop,  # "uvloop" or "asyncio"
    )
    server = uvicorn.Server(config)
    settle_gc()  # as `pairbot serve` does, for every server measured
    if profile is None:
        server.run(sockets=[socket.socket(fileno=fd)])
        return
    profiler = cProfile.Profile(time.thread_time)  # CPU of the event loop's thread, not wall

    def dump(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(profile)
        os._exit(0)

    # uvicorn re-raises the SIGTERM it stopped on once it is done: the profile is written then.
    signal.signal(signal.SIGTERM, dump)
    profiler.enable()
    server.run(sockets=[socket.socket(fileno=fd)])
    dump()


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    store: Path | None = None


@contextlib.contextmanager
def start_server(
    role: str, workdir: Path, http: str, loop: str, forge: Sequence[str] = ()
) -> Iterator[Server]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    store = workdir / f"{role}.sqlite3"
    log = (workdir / f"{role}.log").open("ab")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.webhook_load",
            "--serve",
            role,
            "--fd",
            str(sock.fileno()),
            "--store",
            str(store),
            "--http",
            http,
            "--loop",
            loop,
            *forge,
        ],
        cwd=ROOT,
        pass_fds=[sock.fileno()],
        stdout=log,
        stderr=log,
    )
    sock.close()
    try:
        yield Server(role, port, process, store if role == "app" else None)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _template() -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((PAYLOAD / "created.with-installation.json").read_text())
    return payload


def signed_requests(
    count: int, port: int, start: int = 0, comment_ids: Sequence[int] | None = None
) -> list[bytes]:
    """`count` distinct signed deliveries of `/pair status`, as raw HTTP/1.1 requests (on the
    comments `comment_ids`, when they were stored on a forge first)."""
    from app.web.signature import sign  # noqa: PLC0415

    template = _template()
    requests: list[bytes] = []
    for n in range(start, start + count):
        payload = copy.deepcopy(template)
        payload["issue"]["number"] = 1 + n % 50
        payload["comment"]["id"] = 10_000_000 + n if comment_ids is None else comment_ids[n - start]
        payload["comment"]["body"] = "/pair status"
        body = json.dumps(payload).encode()
        head = (
            "POST /webhooks/github HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\n"
            "User-Agent: GitHub-Hookshot/benchmark\r\n"
            "Content-Type: application/json\r\n"
            "X-GitHub-Event: issue_comment\r\n"
            f"X-GitHub-Delivery: {uuid.uuid4()}\r\n"
            f"X-Hub-Signature-256: {sign(SECRET.encode(), body)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        requests.append(head.encode() + body)
    return requests
