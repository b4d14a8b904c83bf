"""How fast the App answers signed `issue_comment` deliveries, next to a bare Starlette endpoint.

    python benchmarks/webhook_load.py          3,000 requests at max rate, then 10 s at 100/s
    python benchmarks/webhook_load.py --requests 10000 --concurrency 32
    python benchmarks/webhook_load.py --http h11 --loop asyncio     uvicorn without C speedups

Three servers run side by side in their own processes on loopback, each one uvicorn process on one
socket with the same configuration — `pairbot serve`'s: INFO logging (to a file), uvicorn's
access log off (the edge logs one line per delivery itself), and the HTTP parser and event
loop uvicorn's "auto" picks, httptools and uvloop (both pinned dependencies, so what a
production deployment runs); the header line names them:

    bare   Starlette with one route, POST /webhooks/github → 200, reading nothing
    floor  the same route doing only what the issue requires of every delivery before its
           2xx, through pairbot's own functions: read the body, verify X-Hub-Signature-256,
           parse the JSON — no routing, nothing recorded, no worker. No webhook service that
           checks its deliveries can be faster; it is measured at max rate only, to show how
           much of the bare endpoint's throughput is left before the App does anything of its own
    app    `create_app` as `pairbot serve` builds it — real SQLite store in a temp dir, the
           worker draining the queue in the same process — with the production `GitHubForges`
           against a GitHub that answers: benchmarks/answering_forge.py in its own process
           (FakeGitHub's real shapes, 5 ms per answer; writes unspaced here), so what is
           measured is the App: read, verify, parse, route, commit, answer, and run the job
           with its API calls (the permission, the 👀, the tracking comment, the dispatch)

Every delivery is a distinct signed `/pair status` comment (a new delivery id and comment id;
the App's comments are stored on the forge first, as on GitHub), so each one is verified,
parsed, committed to SQLite with its job, and then run by the worker. benchmarks/command_path.py
sets the App's command path beside a floor of the same API calls.
A small HTTP/1.1 keep-alive client (asyncio streams on uvloop, so the driver costs little next
to the servers) measures, one server after the other and in one run:

    max rate   `--concurrency` connections, each sending its next request when the last one
               is answered: throughput, and p50 / p99 latency
    100/s      an open-loop schedule of 100 requests per second for `--seconds`: p50 / p99
               latency from each request's *scheduled* time (a late send counts against it)

Beside each: the server's CPU time per request and how busy it was (all its threads, from
/proc), and the driver's — a server that is not near 100% at max rate was held back by the
driver or by the machine, not by itself. For the App, what its worker did: the jobs finished
while the deliveries arrived and how long the rest took after the last 2xx. The worker shares
the CPU with the edge throughout a max-rate run; the "end to end" line counts the whole work,
deliveries answered and jobs run.

Targets: the App's max-rate throughput at least half the bare endpoint's, and its p99 under
50 ms at 100 requests per second. Wall-clock numbers depend on the machine: compare the
columns of one run, not runs on different machines. The floor line says how much of the first
target any edge has left once it does what it must (on the machine this was written on, 0.6x
of the bare endpoint before routing, recording or running anything).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import dataclasses
import importlib.util
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python benchmarks/webhook_load.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.answering_forge import add_comments, forge_process
from benchmarks.command_servers import new_key

ROOT = Path(__file__).resolve().parents[1]
SECRET = "webhook-load-benchmark-secret"  # noqa: S105 - a throwaway secret for loopback
PAYLOAD = ROOT / "tests" / "fixtures" / "github-webhooks" / "issue_comment"
GOAL_RATIO = 0.5
GOAL_P99_MS = 50.0
RATE = 100.0
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


class _NullForge:
    """GitHub that answers at once. Not used here (the App talks to the answering forge);
    benchmarks/edge_targets.py still imports it."""

    async def permission(self, user: str) -> Any:
        return "admin"

    async def react(self, target: Any, comment_id: str | None, reaction: Any) -> None:
        return None

    async def upsert_comment(self, target: Any, marker: str, body: str) -> Any:
        return None

    async def dispatch(self, client_payload: Mapping[str, Any]) -> None:
        return None


class _NullForges:
    def __call__(self, repo: str, installation: int | None) -> _NullForge:
        return _NullForge()

    async def aclose(self) -> None:
        return None


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
) -> None:
    """Child process: serve `role` on the inherited listening socket `fd` until killed."""
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
    server.run(sockets=[socket.socket(fileno=fd)])


# -- the driver -----------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    store: Path | None = None


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) the process `pid` has used; 0 without /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


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


class Connection:
    """One keep-alive HTTP/1.1 connection: send a request, read one response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, request: bytes) -> int:
        self.writer.write(request)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length:
            await self.reader.readexactly(length)
        return status

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


@dataclass(frozen=True)
class Measured:
    """One run against one server."""

    requests: int
    seconds: float
    latencies_ms: tuple[float, ...]
    failures: int
    server_cpu_s: float = 0.0  # the server process's CPU time during the run
    driver_cpu_s: float = 0.0  # this process's
    jobs_done: int | None = None  # the App's jobs finished during the run (of `requests`)
    drain_s: float | None = None  # then how long until every job was done

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * self.server_cpu_s / self.requests if self.requests else 0.0

    def busy(self, cpu_s: float) -> float:
        """`cpu_s` as a share of the run's wall time, in %."""
        return 100 * cpu_s / self.seconds if self.seconds > 0 else 0.0

    @property
    def end_to_end(self) -> float | None:
        """Deliveries answered and their jobs run, per second of run plus drain."""
        if self.drain_s is None:
            return None
        return self.requests / (self.seconds + self.drain_s)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
        return ordered[index]


async def wait_ready(port: int, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while True:
        try:
            connection = await Connection.open(port)
            await connection.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def max_rate(
    port: int | Sequence[int], requests: Sequence[bytes], concurrency: int
) -> Measured:
    """Closed loop: `concurrency` connections, each sends its next request when answered.
    Several ports: the connections are spread over them in turn (replicas)."""
    ports = [port] if isinstance(port, int) else list(port)
    connections = [await Connection.open(ports[i % len(ports)]) for i in range(concurrency)]
    queue = iter(requests)
    latencies: list[float] = []
    failures = 0

    async def worker(connection: Connection) -> None:
        nonlocal failures
        for request in queue:
            began = time.perf_counter()
            status = await connection.send(request)
            latencies.append((time.perf_counter() - began) * 1000)
            failures += not 200 <= status < 300

    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    seconds = time.perf_counter() - began
    for connection in connections:
        await connection.close()
    return Measured(len(latencies), seconds, tuple(latencies), failures)


async def fixed_rate(
    port: int | Sequence[int], requests: Sequence[bytes], rate: float, connections: int = 16
) -> Measured:
    """Open loop: request i is due at start + i / rate; latency counts from when it was due (a
    late send counts). Several ports: the connections are spread over them (replicas)."""
    ports = [port] if isinstance(port, int) else list(port)
    pool: asyncio.Queue[Connection] = asyncio.Queue()
    for i in range(connections):
        pool.put_nowait(await Connection.open(ports[i % len(ports)]))
    latencies: list[float] = []
    failures = 0
    start = time.perf_counter() + 0.05

    async def one(index: int, request: bytes) -> None:
        nonlocal failures
        due = start + index / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        connection = await pool.get()
        try:
            status = await connection.send(request)
        finally:
            pool.put_nowait(connection)
        latencies.append((time.perf_counter() - due) * 1000)
        failures += not 200 <= status < 300

    await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
    seconds = time.perf_counter() - start
    while not pool.empty():
        await pool.get_nowait().close()
    return Measured(len(latencies), seconds, tuple(latencies), failures)


_OPEN = "state IN ('queued', 'running')"  # as the store's partial indexes spell it
_DONE = "state IN ('done', 'failed')"


def _jobs(store: Path | None, where: str) -> int:
    """How many of the App's jobs match `where` (_OPEN or _DONE), read beside the server."""
    if store is None or not store.exists():
        return 0
    conn = sqlite3.connect(store, timeout=5)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {where}").fetchone()[0])  # noqa: S608 - constant SQL
    finally:
        conn.close()


def _queue_drained(store: Path | None, timeout: float = 120.0) -> float:
    """Wait until the App's worker has run every job (so the next run starts on a quiet CPU);
    returns how long that took."""
    began = time.perf_counter()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _jobs(store, _OPEN):
        time.sleep(0.02)
    return time.perf_counter() - began


@dataclass(frozen=True)
class Result:
    """Both servers, both modes, and the floor at max rate."""

    bare_max: Measured
    app_max: Measured
    bare_rate: Measured
    app_rate: Measured
    floor_max: Measured

    @property
    def ratio(self) -> float:
        bare = self.bare_max.throughput
        return self.app_max.throughput / bare if bare else 0.0

    @property
    def floor_ratio(self) -> float:
        """The floor's throughput over the bare endpoint's: the most any checking edge keeps."""
        bare = self.bare_max.throughput
        return self.floor_max.throughput / bare if bare else 0.0

    @property
    def meets_goals(self) -> bool:
        return self.ratio >= GOAL_RATIO and self.app_rate.percentile(99) < GOAL_P99_MS


def format_table(result: Result, concurrency: int) -> str:
    rows = [
        ("max rate: requests", result.bare_max.requests, result.app_max.requests, "{:>10d}"),
        (
            "max rate: throughput /s",
            result.bare_max.throughput,
            result.app_max.throughput,
            "{:>10.0f}",
        ),
        (
            "max rate: p50 ms",
            result.bare_max.percentile(50),
            result.app_max.percentile(50),
            "{:>10.2f}",
        ),
        (
            "max rate: p99 ms",
            result.bare_max.percentile(99),
            result.app_max.percentile(99),
            "{:>10.2f}",
        ),
        (f"{RATE:.0f}/s: requests", result.bare_rate.requests, result.app_rate.requests, "{:>10d}"),
        (
            f"{RATE:.0f}/s: p50 ms",
            result.bare_rate.percentile(50),
            result.app_rate.percentile(50),
            "{:>10.2f}",
        ),
        (
            f"{RATE:.0f}/s: p99 ms",
            result.bare_rate.percentile(99),
            result.app_rate.percentile(99),
            "{:>10.2f}",
        ),
        (
            "non-2xx answers",
            result.bare_max.failures + result.bare_rate.failures,
            result.app_max.failures + result.app_rate.failures,
            "{:>10d}",
        ),
    ]
    for mode, bare_run, app_run in (
        ("max rate", result.bare_max, result.app_max),
        (f"{RATE:.0f}/s", result.bare_rate, result.app_rate),
    ):
        rows += [
            (
                f"{mode}: server CPU us/req",
                bare_run.cpu_us_per_request,
                app_run.cpu_us_per_request,
                "{:>10.0f}",
            ),
            (
                f"{mode}: server CPU busy %",
                bare_run.busy(bare_run.server_cpu_s),
                app_run.busy(app_run.server_cpu_s),
                "{:>10.0f}",
            ),
            (
                f"{mode}: driver CPU busy %",
                bare_run.busy(bare_run.driver_cpu_s),
                app_run.busy(app_run.driver_cpu_s),
                "{:>10.0f}",
            ),
        ]
    lines = [f"{'':<26}{'bare':>10}{'app':>10}{'app/bare':>10}"]
    for label, bare, app, fmt in rows:
        ratio = f"{app / bare:>10.2f}" if isinstance(bare, float) and bare else f"{'':>10}"
        lines.append(f"{label:<26}{fmt.format(bare)}{fmt.format(app)}{ratio}")
    lines.append("")
    for mode, run in (("max rate", result.app_max), (f"{RATE:.0f}/s", result.app_rate)):
        if run.jobs_done is None or run.drain_s is None:
            continue
        line = (
            f"app worker, {mode}: {run.jobs_done:,} of {run.requests:,} jobs done during the "
            f"run, the rest within {run.drain_s:.2f} s after its last answer"
        )
        if mode == "max rate" and run.end_to_end is not None:
            line += f"; end to end (answered and run) {run.end_to_end:,.0f} deliveries/s"
        lines.append(line)
    floor = result.floor_max
    lines += [
        "",
        "the floor (read, verify, parse; nothing routed or recorded), max rate: "
        f"{floor.throughput:,.0f}/s = {result.floor_ratio:.2f}x bare, "
        f"{floor.cpu_us_per_request:.0f} us CPU/req; the app reaches "
        f"{result.app_max.throughput / floor.throughput if floor.throughput else 0:.2f}x the floor",
    ]
    ok_ratio = "yes" if result.ratio >= GOAL_RATIO else "NO"
    ok_p99 = "yes" if result.app_rate.percentile(99) < GOAL_P99_MS else "NO"
    lines += [
        "",
        f"goal: app throughput >= {GOAL_RATIO}x bare at max rate ({concurrency} connections): "
        f"{result.ratio:.2f}x — {ok_ratio}",
        f"goal: app p99 < {GOAL_P99_MS:.0f} ms at {RATE:.0f} requests/s: "
        f"{result.app_rate.percentile(99):.2f} ms — {ok_p99}",
    ]
    return "\n".join(lines)


async def _observed(server: Server, run: Awaitable[Measured]) -> Measured:
    """`run`, with the server's and the driver's CPU time around it, and for the App what its
    worker finished meanwhile and how long the rest took after the last answer."""
    done_before = _jobs(server.store, _DONE)
    server_cpu, driver_cpu = cpu_seconds(server.process.pid), time.process_time()
    measured = await run
    server_cpu = cpu_seconds(server.process.pid) - server_cpu
    driver_cpu = time.process_time() - driver_cpu
    jobs_done = _jobs(server.store, _DONE) - done_before
    drain_s = _queue_drained(server.store)
    if server.store is None:
        return dataclasses.replace(measured, server_cpu_s=server_cpu, driver_cpu_s=driver_cpu)
    return dataclasses.replace(
        measured,
        server_cpu_s=server_cpu,
        driver_cpu_s=driver_cpu,
        jobs_done=jobs_done,
        drain_s=drain_s,
    )


async def _measure(
    servers: Mapping[str, Server], requests: int, seconds: float, concurrency: int, forge: int
) -> Result:
    runs: dict[tuple[str, str], Measured] = {}
    offset = 0

    def batch(server: Server, count: int) -> list[bytes]:
        nonlocal offset
        ids = None
        if server.name == "app":  # its jobs react to the comments: GitHub must know them
            comments = [(1 + n % 50, "/pair status") for n in range(offset, offset + count)]
            ids = add_comments(forge, comments)
        built = signed_requests(count, server.port, offset, ids)
        offset += count
        return built

    for server in servers.values():
        await wait_ready(server.port)
        await max_rate(server.port, batch(server, min(200, requests)), concurrency)  # warm-up
        _queue_drained(server.store)
    for name, server in servers.items():  # bare, floor, app: one after the other
        built = batch(server, requests)  # built before the clocks start
        runs[(name, "max")] = await _observed(server, max_rate(server.port, built, concurrency))
    rate_requests = max(1, int(RATE * seconds))
    for name, server in servers.items():
        if name == "floor":
            continue
        built = batch(server, rate_requests)
        runs[(name, "rate")] = await _observed(server, fixed_rate(server.port, built, RATE))
    return Result(
        bare_max=runs[("bare", "max")],
        app_max=runs[("app", "max")],
        bare_rate=runs[("bare", "rate")],
        app_rate=runs[("app", "rate")],
        floor_max=runs[("floor", "max")],
    )


def _run_driver(main: Coroutine[Any, Any, Result]) -> Result:
    """The driver on uvloop when installed: the cheaper the client, the less it takes from the
    servers on a small machine (its CPU is in the table)."""
    if importlib.util.find_spec("uvloop"):
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)


def main(
    requests: int = 3_000,
    seconds: float = 10.0,
    concurrency: int = 16,
    *,
    http: str | None = None,
    loop: str | None = None,
    out: Callable[[str], None] = print,
) -> Result:
    """Start the three servers, measure them one after the other, print the table."""
    auto_http, auto_loop = server_options()
    http, loop = http or auto_http, loop or auto_loop
    with tempfile.TemporaryDirectory(prefix="pairbot-webhook-load-") as tmp:
        workdir = Path(tmp)
        out(
            f"webhook load: signed issue_comment deliveries over loopback, {requests:,} at max "
            f"rate ({concurrency} connections), {RATE:.0f}/s for {seconds:g} s; "
            f"{sys.implementation.name} {sys.version.split()[0]}, {os.cpu_count()} CPU(s)"
        )
        auto = (http, loop) == (auto_http, auto_loop)
        out(
            describe(http, loop) + (" — what `pairbot serve` runs (uvicorn's auto)" if auto else "")
        )
        key = workdir / "app.pem"
        key.write_text(new_key())
        with (
            forge_process(workdir, key) as forge,
            start_server("bare", workdir, http, loop) as bare,
            start_server("floor", workdir, http, loop) as floor,
            start_server("app", workdir, http, loop, _forge_args(forge, key)) as app,
        ):
            servers = {"bare": bare, "floor": floor, "app": app}
            result = _run_driver(_measure(servers, requests, seconds, concurrency, forge))
            for server in (bare, floor, app):
                if server.process.poll() is not None:
                    raise RuntimeError(f"the {server.name} server died: see its log")
        out(format_table(result, concurrency))
        return result


def _forge_args(port: int, key: Path) -> list[str]:
    return ["--forge", str(port), "--key", str(key)]


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=3_000, help="at max rate, per server")
    parser.add_argument("--seconds", type=float, default=10.0, help="at 100 requests/s")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve", choices=("app", "bare", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--forge", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--key", type=Path, help=argparse.SUPPRESS)
    auto_http, auto_loop = server_options()
    parser.add_argument("--http", choices=("httptools", "h11"), default=auto_http)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default=auto_loop)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.fd, args.store, args.http, args.loop, forge=args.forge, key=args.key)
        return
    main(args.requests, args.seconds, args.concurrency, http=args.http, loop=args.loop)


if __name__ == "__main__":
    _cli(sys.argv[1:])
