"""The webhook edge against its floor, and two App replicas on PostgreSQL against one on SQLite.

    python benchmarks/edge_targets.py                  2,000 requests per run, 5 s at 100/s
    python benchmarks/edge_targets.py --requests 5000 --seconds 10
    python benchmarks/edge_targets.py --only edge      the floor and one SQLite App, no replicas

Every figure is a ratio against a baseline measured in the same run, on the same machine, one
server after the other (never two measured at once):

    floor      read the body, verify X-Hub-Signature-256, parse the JSON, answer 202 — what
               every checking edge must do (benchmarks/webhook_load.py's floor endpoint)
    app        `create_app` as `pairbot serve` builds it (uvicorn's access log off, INFO
               logging to a file), SQLite store in a temp dir, the worker in the same process,
               a null forge in place of GitHub
    replicas   two such processes on one PostgreSQL database (a fresh one, dropped afterwards),
               the client's 16 connections split between them as a load balancer would

The edge's max-rate runs are split into `ROUNDS` rounds, floor and App alternating within
each, and added up: on a machine shared with other work, one long run of each after the other
let a burst of that work land on one of them only.

Deliveries are signed `issue_comment` deliveries of about 16 KB (the corpus example): a
*non-command* one is a comment that addresses no one (nothing to queue), a *command* one is
`/pair status` (durably queued, then run by the worker), a *duplicate* is a command delivery
sent again with its delivery id. Printed, each with its target:

    non-command   App throughput / floor throughput at max rate              (>= 0.8)
    command       App throughput / floor throughput at max rate              (>= 0.5)
    duplicate     App CPU per duplicate / App CPU per new delivery           (<= 0.3)
    p99           at 100 requests/s, and at max rate with 16 connections     (< 50 ms)
    replicas      CPU per command delivery — both replicas plus the PostgreSQL backends that
                  served them, from /proc, until the last job is done — over one SQLite
                  replica's, measured the same way, at max rate (a burst: a backlog of
                  queued jobs builds up) and at 100 requests/s (no backlog)    (<= 1.25)

A server's CPU is read from /proc/<pid>/stat (user + system, all threads) around each run; the
PostgreSQL backends are the server processes whose pg_stat_activity row names the benchmark's
database (the server's shared writer and checkpointer are not counted: other databases use
them too). The load generator runs on the same cores as the servers; its CPU is printed so a
run whose client starved the servers can be told apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.webhook_load import (
    SECRET,
    Connection,
    Measured,
    cpu_seconds,
    fixed_rate,
    max_rate,
    server_options,
)

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = ROOT / "tests" / "fixtures" / "github-webhooks" / "issue_comment"
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
GOAL_NON_COMMAND = 0.8
GOAL_COMMAND = 0.5
GOAL_DUPLICATE = 0.3
GOAL_P99_MS = 50.0
GOAL_REPLICAS = 1.25
RATE = 100.0
CONCURRENCY = 16


# -- the servers (child processes) ----------------------------------------------------------------


def _app(store: str, workdir: Path) -> Any:
    from pydantic import SecretStr  # noqa: PLC0415

    from app.web.app import create_app  # noqa: PLC0415
    from app.web.settings import AppSettings  # noqa: PLC0415
    from benchmarks.webhook_load import _NullForges  # noqa: PLC0415

    url = SecretStr(store) if store.startswith("postgresql://") else None
    settings = AppSettings(
        root=workdir,
        store=workdir / "unused.sqlite3" if url else Path(store),
        store_url=url,
        webhook_secret=SecretStr(SECRET),
        app_slug="pairbot",
    )
    # poll_s as `pairbot serve` uses it; the worker is woken by each queued delivery anyway.
    return create_app(settings, github=_NullForges())


def serve(role: str, fd: int, store: str, http: str, loop: str) -> None:
    """Child process: serve `role` ("floor" or "app") on the inherited socket `fd`."""
    import uvicorn  # noqa: PLC0415

    from app.web.serve import server_config, settle_gc  # noqa: PLC0415
    from app.web.settings import EdgeLimits  # noqa: PLC0415
    from benchmarks.webhook_load import _floor_app  # noqa: PLC0415

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = _floor_app() if role == "floor" else _app(store, Path(tempfile.gettempdir()))
    config = server_config(
        app, EdgeLimits(), **({"http": http} if http != "httptools" else {}), loop=loop
    )
    server = uvicorn.Server(config)
    settle_gc()  # as `pairbot serve` does, for every server measured
    server.run(sockets=[socket.socket(fileno=fd)])


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def start_server(
    name: str, role: str, store: str, workdir: Path, *, http: str, loop: str
) -> Iterator[Server]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    log = (workdir / f"{name}.log").open("ab")
    argv = ["--serve", role, "--fd", str(sock.fileno()), "--store", store]
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.edge_targets", *argv, "--http", http, "--loop", loop],
        cwd=ROOT,
        pass_fds=[sock.fileno()],
        stdout=log,
        stderr=log,
    )
    sock.close()
    try:
        yield Server(name, port, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


# -- the deliveries -------------------------------------------------------------------------------


class Deliveries:
    """Distinct signed deliveries as raw HTTP/1.1 requests (each with a new delivery id and
    comment id), built before any clock starts."""

    def __init__(self) -> None:
        self._template: dict[str, Any] = json.loads(
            (PAYLOAD / "created.with-installation.json").read_text()
        )
        self._next = 0

    def build(self, count: int, *, command: bool) -> list[bytes]:
        from app.web.signature import sign  # noqa: PLC0415

        built: list[bytes] = []
        for _ in range(count):
            n = self._next
            self._next += 1
            payload = copy.deepcopy(self._template)
            payload["issue"]["number"] = 1 + n % 50
            payload["comment"]["id"] = 20_000_000 + n
            payload["comment"]["body"] = (
                "/pair status" if command else f"Thanks, that reads well ({n})."
            )
            body = json.dumps(payload).encode()
            head = (
                "POST /webhooks/github HTTP/1.1\r\n"
                "Host: 127.0.0.1\r\n"
                "User-Agent: GitHub-Hookshot/benchmark\r\n"
                "Content-Type: application/json\r\n"
                "X-GitHub-Event: issue_comment\r\n"
                f"X-GitHub-Delivery: {uuid.uuid4()}\r\n"
                f"X-Hub-Signature-256: {sign(SECRET.encode(), body)}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            built.append(head.encode() + body)
        return built


# -- the database ---------------------------------------------------------------------------------


class Database:
    """A fresh PostgreSQL database for the replicas, its backends' CPU, and its open jobs."""

    def __init__(self, admin_url: str) -> None:
        import psycopg  # noqa: PLC0415

        self.name = f"pairbot_bench_{os.getpid()}"
        self._admin = psycopg.connect(admin_url, autocommit=True)
        self._admin.execute(f'CREATE DATABASE "{self.name}"')
        self.url = urlunsplit(urlsplit(admin_url)._replace(path=f"/{self.name}"))

    def backends(self) -> list[int]:
        rows = self._admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.name,)
        ).fetchall()
        return [int(row[0]) for row in rows]

    def open_jobs(self) -> int:
        import psycopg  # noqa: PLC0415

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')"
            ).fetchone()
        return int(row[0]) if row else 0

    def drop(self) -> None:
        self._admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self._admin.close()


def sqlite_open_jobs(path: Path) -> int:
    import sqlite3  # noqa: PLC0415

    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=5)
    try:
        row = conn.execute("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')")
        return int(row.fetchone()[0])
    finally:
        conn.close()


def drained(open_jobs: Callable[[], int], timeout_s: float = 120.0) -> float:
    """Seconds until no job is open (bounded by `timeout_s`)."""
    began = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    while open_jobs() and time.monotonic() < deadline:
        time.sleep(0.02)
    return time.perf_counter() - began


class CpuMeter:
    """CPU seconds used by a set of processes, some found only once the run has begun."""

    def __init__(self, pids: Callable[[], Sequence[int]]) -> None:
        self._pids = pids
        self._start = {pid: cpu_seconds(pid) for pid in pids()}

    def used(self) -> float:
        # A process that appeared during the run (a pool's new connection) counts in full.
        return sum(cpu_seconds(pid) - self._start.get(pid, 0.0) for pid in self._pids())


# -- the load -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One measured run: the load's figures, and the CPU of the servers measured."""

    load: Measured
    cpu_s: float  # the measured processes, while the requests were answered
    total_cpu_s: float | None = None  # and until every job they queued was done
    drain_s: float | None = None
    database_cpu_s: float = 0.0  # of that, the PostgreSQL backends'

    def us_per_request(self, cpu_s: float | None = None) -> float:
        spent = self.cpu_s if cpu_s is None else cpu_s
        return 1e6 * spent / self.load.requests if self.load.requests else 0.0


async def measure(
    ports: Sequence[int],
    requests: Sequence[bytes],
    pids: Callable[[], Sequence[int]],
    *,
    rate: float | None = None,
    open_jobs: Callable[[], int] | None = None,
    database: Callable[[], Sequence[int]] | None = None,
) -> Run:
    meter = CpuMeter(pids)
    db_meter = CpuMeter(database) if database is not None else None
    if rate is None:
        load = await max_rate(ports, requests, CONCURRENCY)
    else:
        load = await fixed_rate(ports, requests, rate, CONCURRENCY)
    cpu_s = meter.used()
    if open_jobs is None:
        return Run(load, cpu_s)
    drain_s = drained(open_jobs)
    return Run(
        load,
        cpu_s,
        total_cpu_s=meter.used(),
        drain_s=drain_s,
        database_cpu_s=db_meter.used() if db_meter is not None else 0.0,
    )


@dataclass(frozen=True)
class Result:
    floor_plain: Run
    floor_command: Run
    app_plain: Run
    app_command: Run
    app_duplicate: Run
    app_plain_rate: Run
    app_command_rate: Run
    replicas_command: Run | None  # None under `--only edge`
    replicas_command_rate: Run | None
    driver_cpu_s: float
    wall_s: float

    @property
    def non_command_ratio(self) -> float:
        return _ratio(self.app_plain.load.throughput, self.floor_plain.load.throughput)

    @property
    def command_ratio(self) -> float:
        return _ratio(self.app_command.load.throughput, self.floor_command.load.throughput)

    @property
    def duplicate_ratio(self) -> float:
        """Duplicate CPU over a new non-command delivery's (the cheaper, stricter baseline)."""
        return _ratio(self.app_duplicate.us_per_request(), self.app_plain.us_per_request())

    @property
    def replicas_ratio(self) -> float:
        """At max rate: a backlog of queued jobs builds up, as in a burst."""
        assert self.replicas_command is not None  # reported only when measured
        return _ratio(
            self.replicas_command.us_per_request(self.replicas_command.total_cpu_s),
            self.app_command.us_per_request(self.app_command.total_cpu_s),
        )

    @property
    def replicas_rate_ratio(self) -> float:
        """At 100 requests/s: each job runs soon after its delivery, no backlog."""
        assert self.replicas_command_rate is not None  # reported only when measured
        return _ratio(
            self.replicas_command_rate.us_per_request(self.replicas_command_rate.total_cpu_s),
            self.app_command_rate.us_per_request(self.app_command_rate.total_cpu_s),
        )


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _ok(good: bool) -> str:
    return "yes" if good else "NO"


def report(result: Result) -> list[str]:
    r = result
    sat = max(r.app_plain.load.percentile(99), r.app_command.load.percentile(99))
    rate_p99 = max(r.app_plain_rate.load.percentile(99), r.app_command_rate.load.percentile(99))
    rep, one = r.replicas_command, r.app_command
    lines = [
        f"{'max rate, 16 connections':<34}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}",
    ]
    for label, run in (
        ("floor, non-command", r.floor_plain),
        ("floor, command", r.floor_command),
        ("app, non-command", r.app_plain),
        ("app, command (answered)", r.app_command),
        ("app, duplicate", r.app_duplicate),
        ("2 replicas on PG, command", rep),
    ):
        if run is None:
            continue
        load = run.load
        lines.append(
            f"{label:<34}{load.throughput:>9.0f}{load.percentile(50):>9.2f}"
            f"{load.percentile(99):>9.2f}{run.us_per_request():>12.0f}"
        )
    failures = sum(
        run.load.failures
        for run in (
            r.floor_plain,
            r.floor_command,
            r.app_plain,
            r.app_command,
            r.app_duplicate,
            r.app_plain_rate,
            r.app_command_rate,
            rep,
            r.replicas_command_rate,
        )
        if run is not None
    )
    lines += [
        f"non-2xx answers: {failures}; load generator CPU {100 * r.driver_cpu_s / r.wall_s:.0f}% "
        f"of one core over the run",
        "",
        f"non-command deliveries: app/floor = {r.non_command_ratio:.2f} "
        f"(target >= {GOAL_NON_COMMAND}) — {_ok(r.non_command_ratio >= GOAL_NON_COMMAND)}; "
        f"by CPU per request {_cpu_ratio(r.floor_plain, r.app_plain)}",
        f"command deliveries: app/floor = {r.command_ratio:.2f} "
        f"(target >= {GOAL_COMMAND}) — {_ok(r.command_ratio >= GOAL_COMMAND)}; "
        f"by CPU per request {_cpu_ratio(r.floor_command, r.app_command)}",
        f"duplicate CPU / new delivery CPU = {r.duplicate_ratio:.2f} "
        f"({r.app_duplicate.us_per_request():.0f} us vs {r.app_plain.us_per_request():.0f} us "
        f"for a new non-command delivery; "
        f"{_ratio(r.app_duplicate.us_per_request(), one.us_per_request()):.2f} of a new command "
        f"delivery's answer) (target <= {GOAL_DUPLICATE}) — "
        f"{_ok(r.duplicate_ratio <= GOAL_DUPLICATE)}",
        f"p99 at {RATE:.0f} requests/s = {rate_p99:.2f} ms (non-command "
        f"{r.app_plain_rate.load.percentile(99):.2f}, command "
        f"{r.app_command_rate.load.percentile(99):.2f}) (target < {GOAL_P99_MS:.0f}) — "
        f"{_ok(rate_p99 < GOAL_P99_MS)}",
        f"p99 at saturation, 16 connections = {sat:.2f} ms (non-command "
        f"{r.app_plain.load.percentile(99):.2f}, command {r.app_command.load.percentile(99):.2f})"
        f" (target < {GOAL_P99_MS:.0f}) — {_ok(sat < GOAL_P99_MS)}",
    ]
    if rep is None or r.replicas_command_rate is None:
        return lines
    lines += [
        "two replicas on PostgreSQL at max rate: CPU per command delivery / one SQLite "
        f"replica's = {r.replicas_ratio:.2f} ({_cpu_split(rep)}, vs "
        f"{one.us_per_request(one.total_cpu_s):.0f} us; answered and run) "
        f"(target <= {GOAL_REPLICAS}) — {_ok(r.replicas_ratio <= GOAL_REPLICAS)}",
        f"two replicas on PostgreSQL at {RATE:.0f} requests/s: CPU per command delivery / one "
        f"SQLite replica's = {r.replicas_rate_ratio:.2f} "
        f"({_cpu_split(r.replicas_command_rate)} vs "
        f"{r.app_command_rate.us_per_request(r.app_command_rate.total_cpu_s):.0f} us; p99 "
        f"{r.replicas_command_rate.load.percentile(99):.2f} ms) (target <= {GOAL_REPLICAS}) — "
        f"{_ok(r.replicas_rate_ratio <= GOAL_REPLICAS)}",
        f"two replicas on PostgreSQL: throughput {rep.load.throughput:.0f} answered/s, "
        f"{_end_to_end(rep):.0f} answered and run/s; one SQLite replica "
        f"{one.load.throughput:.0f} answered/s, {_end_to_end(one):.0f} answered and run/s",
    ]
    return lines


def _cpu_ratio(floor: Run, app: Run) -> str:
    """floor CPU / app CPU per request: the throughput ratio of two CPU-bound servers, less
    disturbed than wall-clock throughput by whatever else the cores run meanwhile."""
    return (
        f"{_ratio(floor.us_per_request(), app.us_per_request()):.2f} "
        f"({floor.us_per_request():.0f} us / {app.us_per_request():.0f} us)"
    )


def _cpu_split(run: Run) -> str:
    total = run.total_cpu_s or 0.0
    return (
        f"{run.us_per_request(total):.0f} us: replicas "
        f"{run.us_per_request(total - run.database_cpu_s):.0f} + postgres "
        f"{run.us_per_request(run.database_cpu_s):.0f}"
    )


def _end_to_end(run: Run) -> float:
    return _ratio(run.load.requests, run.load.seconds + (run.drain_s or 0.0))


# -- the run --------------------------------------------------------------------------------------


async def _ready(port: int, within_s: float = 60.0) -> None:
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


ROUNDS = 4  # the edge's max-rate runs, each split into this many, floor and App alternating
_EDGE_RUNS = ("floor_plain", "app_plain", "floor_command", "app_command", "app_duplicate")


def _round_sizes(requests: int, rounds: int) -> list[int]:
    """`requests` split into at most `rounds` shares that add up to it."""
    count = max(1, min(rounds, requests))
    return [requests // count + (1 if i < requests % count else 0) for i in range(count)]


def _combined(runs: Sequence[Run]) -> Run:
    """Several runs of one kind as one: their requests, time, latencies and CPU added up."""

    def total(values: Sequence[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    load = Measured(
        requests=sum(run.load.requests for run in runs),
        seconds=sum(run.load.seconds for run in runs),
        latencies_ms=tuple(ms for run in runs for ms in run.load.latencies_ms),
        failures=sum(run.load.failures for run in runs),
    )
    return Run(
        load,
        sum(run.cpu_s for run in runs),
        total_cpu_s=total([run.total_cpu_s for run in runs]),
        drain_s=total([run.drain_s for run in runs]),
        database_cpu_s=sum(run.database_cpu_s for run in runs),
    )


async def _measure_all(  # noqa: PLR0917 - one call site, every argument named there
    floor: Server,
    app: Server,
    app_store: Path,
    replicas: Sequence[Server],
    database: Database | None,
    requests: int,
    seconds: float,
) -> Result:
    made = Deliveries()
    warm = min(200, requests)
    for server in (floor, app, *replicas):
        await _ready(server.port)
        await max_rate([server.port], made.build(warm, command=False), CONCURRENCY)
    for server in (app, *replicas):
        await max_rate([server.port], made.build(min(50, requests), command=True), CONCURRENCY)
    drained(lambda: sqlite_open_jobs(app_store))
    if database is not None:
        drained(database.open_jobs)

    def pids(*servers: Server) -> Callable[[], list[int]]:
        return lambda: [server.process.pid for server in servers]

    began, driver_began = time.perf_counter(), time.process_time()
    sqlite_jobs: Callable[[], int] = lambda: sqlite_open_jobs(app_store)  # noqa: E731
    rounds: dict[str, list[Run]] = {name: [] for name in _EDGE_RUNS}
    for size in _round_sizes(requests, ROUNDS):
        # Floor and App alternate, a share of the requests each round: whatever else the
        # machine runs meanwhile weighs on both alike (one long run each, one after the
        # other, let a burst of other work land on one of them only).
        plain = rounds["floor_plain"], rounds["app_plain"]
        plain[0].append(await measure([floor.port], made.build(size, command=False), pids(floor)))
        plain[1].append(await measure([app.port], made.build(size, command=False), pids(app)))
        command = rounds["floor_command"], rounds["app_command"]
        command[0].append(await measure([floor.port], made.build(size, command=True), pids(floor)))
        commands = made.build(size, command=True)
        command[1].append(await measure([app.port], commands, pids(app), open_jobs=sqlite_jobs))
        rounds["app_duplicate"].append(await measure([app.port], commands, pids(app)))
    floor_plain, app_plain, floor_command, app_command, app_duplicate = (
        _combined(rounds[name]) for name in _EDGE_RUNS
    )
    rate_n = max(1, int(RATE * seconds))
    app_plain_rate = await measure(
        [app.port], made.build(rate_n, command=False), pids(app), rate=RATE
    )
    app_command_rate = await measure(
        [app.port], made.build(rate_n, command=True), pids(app), rate=RATE, open_jobs=sqlite_jobs
    )
    replicas_command = replicas_command_rate = None
    if database is not None:
        replicas_command, replicas_command_rate = await _measure_replicas(
            replicas, database, made, requests, rate_n
        )
    return Result(
        floor_plain=floor_plain,
        floor_command=floor_command,
        app_plain=app_plain,
        app_command=app_command,
        app_duplicate=app_duplicate,
        app_plain_rate=app_plain_rate,
        app_command_rate=app_command_rate,
        replicas_command=replicas_command,
        replicas_command_rate=replicas_command_rate,
        driver_cpu_s=time.process_time() - driver_began,
        wall_s=time.perf_counter() - began,
    )


async def _measure_replicas(
    replicas: Sequence[Server], database: Database, made: Deliveries, requests: int, rate_n: int
) -> tuple[Run, Run]:
    def pids(*servers: Server) -> Callable[[], list[int]]:
        return lambda: [server.process.pid for server in servers]

    ports = [server.port for server in replicas]
    replica_pids = pids(*replicas)
    replicas_command = await measure(
        ports,
        made.build(requests, command=True),
        lambda: [*replica_pids(), *database.backends()],
        open_jobs=database.open_jobs,
        database=database.backends,
    )
    replicas_command_rate = await measure(
        ports,
        made.build(rate_n, command=True),
        lambda: [*replica_pids(), *database.backends()],
        rate=RATE,
        open_jobs=database.open_jobs,
        database=database.backends,
    )
    return replicas_command, replicas_command_rate


def main(
    requests: int = 2_000,
    seconds: float = 5.0,
    *,
    postgres_url: str | None = None,
    only: str | None = None,
    out: Callable[[str], None] = print,
) -> Result:
    """Start the floor, one SQLite App and two PostgreSQL replicas; measure; print.
    `only="edge"`: the floor and the SQLite App only (no PostgreSQL needed)."""
    http, loop = server_options()
    admin = postgres_url or os.environ.get("PAIR_TEST_POSTGRES_URL") or DEFAULT_POSTGRES
    out(
        f"edge targets: signed ~16 KB issue_comment deliveries over loopback, {requests:,} per "
        f"max-rate run ({CONCURRENCY} connections), {RATE:.0f}/s for {seconds:g} s; uvicorn "
        f"with {http} and {loop}; {os.cpu_count()} CPU(s) shared by the load generator, the "
        "servers and PostgreSQL"
    )
    if only == "edge":
        result = _edge_only(requests, seconds, http=http, loop=loop)
        for line in report(result):
            out(line)
        return result
    database = Database(admin)
    try:
        with tempfile.TemporaryDirectory(prefix="pairbot-edge-targets-") as tmp:
            workdir = Path(tmp)
            app_store = workdir / "app.sqlite3"
            with (
                start_server("floor", "floor", "", workdir, http=http, loop=loop) as floor,
                start_server("app", "app", str(app_store), workdir, http=http, loop=loop) as app,
                start_server(
                    "replica-1", "app", database.url, workdir, http=http, loop=loop
                ) as one,
                start_server(
                    "replica-2", "app", database.url, workdir, http=http, loop=loop
                ) as two,
            ):
                result = _run(
                    _measure_all(
                        floor=floor,
                        app=app,
                        app_store=app_store,
                        replicas=(one, two),
                        database=database,
                        requests=requests,
                        seconds=seconds,
                    )
                )
                for server in (floor, app, one, two):
                    if server.process.poll() is not None:
                        log = (workdir / f"{server.name}.log").read_text()[-2000:]
                        raise RuntimeError(f"the {server.name} server died:\n{log}")
    finally:
        database.drop()
    for line in report(result):
        out(line)
    return result


def _edge_only(requests: int, seconds: float, *, http: str, loop: str) -> Result:
    with tempfile.TemporaryDirectory(prefix="pairbot-edge-targets-") as tmp:
        workdir = Path(tmp)
        app_store = workdir / "app.sqlite3"
        with (
            start_server("floor", "floor", "", workdir, http=http, loop=loop) as floor,
            start_server("app", "app", str(app_store), workdir, http=http, loop=loop) as app,
        ):
            result = _run(
                _measure_all(
                    floor=floor,
                    app=app,
                    app_store=app_store,
                    replicas=(),
                    database=None,
                    requests=requests,
                    seconds=seconds,
                )
            )
            for server in (floor, app):
                if server.process.poll() is not None:
                    log = (workdir / f"{server.name}.log").read_text()[-2000:]
                    raise RuntimeError(f"the {server.name} server died:\n{log}")
    return result


def _run(main: Any) -> Result:
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a pinned dependency
        return asyncio.run(main)  # type: ignore[no-any-return]
    return uvloop.run(main)  # type: ignore[no-any-return]


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2_000, help="per max-rate run")
    parser.add_argument("--seconds", type=float, default=5.0, help="at 100 requests/s")
    parser.add_argument("--postgres", help="an admin URL (default: PAIR_TEST_POSTGRES_URL)")
    parser.add_argument(
        "--only", choices=("edge",), help="edge: the floor and one SQLite App, no replicas"
    )
    parser.add_argument("--serve", choices=("app", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="", help=argparse.SUPPRESS)
    http, loop = server_options()
    parser.add_argument("--http", choices=("httptools", "h11"), default=http)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default=loop)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.fd, args.store, args.http, args.loop)
        return
    main(args.requests, args.seconds, postgres_url=args.postgres, only=args.only)


if __name__ == "__main__":
    _cli(sys.argv[1:])
