"""The webhook edge against its floor, and two App replicas on PostgreSQL against one on SQLite.

    python benchmarks/edge_targets.py                  2,000 requests per run, 5 s at 100/s
    python benchmarks/edge_targets.py --requests 5000 --seconds 10
    python benchmarks/edge_targets.py --only edge      the floor and one SQLite App, no replicas
    python benchmarks/edge_targets.py --only replicas  the replicas target alone (and its
                                                       SQLite baseline), three runs in a row
    python benchmarks/edge_targets.py --only replicas --profile DIR --count-sql
                                                       also: each server's cProfile in DIR,
                                                       and the SQL each replica sent per
                                                       delivery (both slow the servers: read
                                                       those runs' ratios as indicative)

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
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.webhook_load import (
    SECRET,
    Measured,
    cpu_seconds,
    fixed_rate,
    max_rate,
    server_options,
    wait_ready,
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
T = TypeVar("T")


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
    if os.environ.get(COUNT_SQL_ENV) and store.startswith("postgresql://"):
        counted = _count_sql()
        out = Path(os.environ[COUNT_SQL_ENV]) / f"sql-{os.getpid()}.json"
        # The benchmark asks for the counts so far with SIGUSR1, before and after a run.
        signal.signal(signal.SIGUSR1, lambda *_: out.write_text(json.dumps(counted)))
    app = _floor_app() if role == "floor" else _app(store, Path(tempfile.gettempdir()))
    config = server_config(
        app, EdgeLimits(), **({"http": http} if http != "httptools" else {}), loop=loop
    )
    server = uvicorn.Server(config)
    settle_gc()  # as `pairbot serve` does, for every server measured
    profile_dir = os.environ.get(PROFILE_ENV)
    if not profile_dir:
        server.run(sockets=[socket.socket(fileno=fd)])
    else:
        import cProfile  # noqa: PLC0415

        kind = "postgres" if store.startswith("postgresql://") else role
        profile = cProfile.Profile(time.thread_time)  # CPU of the event loop's thread, not wall

        def dump(*_: object) -> None:
            profile.disable()
            profile.dump_stats(Path(profile_dir) / f"{kind}-{os.getpid()}.prof")
            os._exit(0)

        # uvicorn re-raises the SIGTERM it stopped on once it is done: the profile is written then.
        signal.signal(signal.SIGTERM, dump)
        profile.enable()
        server.run(sockets=[socket.socket(fileno=fd)])
        dump()


PROFILE_ENV = "PAIR_BENCH_PROFILE"  # a directory: each server writes its cProfile there
COUNT_SQL_ENV = "PAIR_BENCH_COUNT_SQL"  # a directory: each replica writes its SQL counts there


def _count_sql() -> dict[str, int]:
    """Count every statement a replica sends (by its text) and every transaction it opens:
    psycopg's cursors and connections patched in this child process only."""
    import psycopg  # noqa: PLC0415

    counts: dict[str, int] = {}

    def note(key: str) -> None:
        counts[key] = counts.get(key, 0) + 1

    execute = psycopg.AsyncCursor.execute
    executemany = psycopg.AsyncCursor.executemany
    transaction = psycopg.AsyncConnection.transaction

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(" ".join(str(query).split())[:120])
        return await execute(self, query, *args, **kwargs)

    async def counted_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note("(many) " + " ".join(str(query).split())[:113])
        return await executemany(self, query, *args, **kwargs)

    def counted_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        note("(transaction: BEGIN + COMMIT)")
        return transaction(self, *args, **kwargs)

    psycopg.AsyncCursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.AsyncCursor.executemany = counted_executemany  # type: ignore[method-assign]
    psycopg.AsyncConnection.transaction = counted_transaction  # type: ignore[method-assign]
    return counts


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
    lines += replica_lines(one, r.app_command_rate, rep, r.replicas_command_rate)
    return lines


def replica_lines(one: Run, one_rate: Run, rep: Run, rep_rate: Run) -> list[str]:
    """The replicas target's lines: two PostgreSQL replicas (`rep` at max rate, `rep_rate` at
    RATE) against one SQLite replica measured the same way (`one`, `one_rate`)."""
    ratio = _ratio(rep.us_per_request(rep.total_cpu_s), one.us_per_request(one.total_cpu_s))
    rate_ratio = _ratio(
        rep_rate.us_per_request(rep_rate.total_cpu_s),
        one_rate.us_per_request(one_rate.total_cpu_s),
    )
    return [
        "two replicas on PostgreSQL at max rate: CPU per command delivery / one SQLite "
        f"replica's = {ratio:.2f} ({_cpu_split(rep)}, vs "
        f"{one.us_per_request(one.total_cpu_s):.0f} us; answered and run) "
        f"(target <= {GOAL_REPLICAS}) — {_ok(ratio <= GOAL_REPLICAS)}",
        f"two replicas on PostgreSQL at {RATE:.0f} requests/s: CPU per command delivery / one "
        f"SQLite replica's = {rate_ratio:.2f} "
        f"({_cpu_split(rep_rate)} vs "
        f"{one_rate.us_per_request(one_rate.total_cpu_s):.0f} us; p99 "
        f"{rep_rate.load.percentile(99):.2f} ms) (target <= {GOAL_REPLICAS}) — "
        f"{_ok(rate_ratio <= GOAL_REPLICAS)}",
        f"two replicas on PostgreSQL: throughput {rep.load.throughput:.0f} answered/s, "
        f"{_end_to_end(rep):.0f} answered and run/s; one SQLite replica "
        f"{one.load.throughput:.0f} answered/s, {_end_to_end(one):.0f} answered and run/s",
    ]


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


def _check_alive(servers: Sequence[Server], workdir: Path) -> None:
    """Fail with the tail of its log if a server exited during the measurement."""
    for server in servers:
        if server.process.poll() is not None:
            log = (workdir / f"{server.name}.log").read_text()[-2000:]
            raise RuntimeError(f"the {server.name} server died:\n{log}")


# -- the run --------------------------------------------------------------------------------------


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
        await wait_ready(server.port)
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
        replicas_command, replicas_command_rate = await _replicas_both_rates(
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


async def _replicas_both_rates(
    replicas: Sequence[Server], database: Database, made: Deliveries, requests: int, rate_n: int
) -> tuple[Run, Run]:
    """The replicas' command deliveries at max rate, then at RATE (the full run's part)."""

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
                _check_alive((floor, app, one, two), workdir)
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
            _check_alive((floor, app), workdir)
    return result


# -- the replicas target alone ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicasRun:
    """One run of the replicas target and its SQLite baseline; `statements`: what the two
    replicas sent per command delivery at max rate, by statement (with --count-sql)."""

    one: Run
    one_rate: Run
    replicas: Run
    replicas_rate: Run
    statements: dict[str, float] | None = None
    statements_rate: dict[str, float] | None = None  # the same at RATE


async def _measure_replicas(  # noqa: PLR0917 - one call site, every argument named there
    app: Server,
    app_store: Path,
    replicas: Sequence[Server],
    database: Database,
    requests: int,
    seconds: float,
    runs: int,
    sql_dir: Path | None,
) -> list[ReplicasRun]:
    made = Deliveries()
    for server in (app, *replicas):
        await wait_ready(server.port)
        await max_rate([server.port], made.build(min(200, requests), command=False), CONCURRENCY)
        await max_rate([server.port], made.build(min(50, requests), command=True), CONCURRENCY)
    drained(lambda: sqlite_open_jobs(app_store))
    drained(database.open_jobs)
    sqlite_jobs: Callable[[], int] = lambda: sqlite_open_jobs(app_store)  # noqa: E731
    replica_pids = [server.process.pid for server in replicas]
    both: Callable[[], list[int]] = lambda: [*replica_pids, *database.backends()]  # noqa: E731
    rate_n = max(1, int(RATE * seconds))
    done: list[ReplicasRun] = []
    for _ in range(runs):
        one = await measure(
            [app.port],
            made.build(requests, command=True),
            lambda: [app.process.pid],
            open_jobs=sqlite_jobs,
        )
        one_rate = await measure(
            [app.port],
            made.build(rate_n, command=True),
            lambda: [app.process.pid],
            rate=RATE,
            open_jobs=sqlite_jobs,
        )
        ports = [server.port for server in replicas]
        before = _sql_counts(replica_pids, sql_dir)
        rep = await measure(
            ports,
            made.build(requests, command=True),
            both,
            open_jobs=database.open_jobs,
            database=database.backends,
        )
        after = _sql_counts(replica_pids, sql_dir)
        rep_rate = await measure(
            ports,
            made.build(rate_n, command=True),
            both,
            rate=RATE,
            open_jobs=database.open_jobs,
            database=database.backends,
        )
        after_rate = _sql_counts(replica_pids, sql_dir)
        statements = statements_rate = None
        if sql_dir is not None:
            statements = {key: (n - before.get(key, 0)) / requests for key, n in after.items()}
            statements_rate = {
                key: (n - after.get(key, 0)) / rate_n for key, n in after_rate.items()
            }
        done.append(ReplicasRun(one, one_rate, rep, rep_rate, statements, statements_rate))
    return done


def _sql_counts(pids: Sequence[int], sql_dir: Path | None) -> dict[str, int]:
    """The statements the replicas sent so far, summed (asked for with SIGUSR1)."""
    if sql_dir is None:
        return {}
    total: dict[str, int] = {}
    for pid in pids:
        path = sql_dir / f"sql-{pid}.json"
        path.unlink(missing_ok=True)
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while True:
            try:
                counts: dict[str, int] = json.loads(path.read_text())
                break
            except (OSError, ValueError):  # not written yet, or half written
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replica {pid} wrote no SQL counts") from None
                time.sleep(0.01)
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return total


def main_replicas(
    requests: int = 2_000,
    seconds: float = 5.0,
    *,
    runs: int = 3,
    postgres_url: str | None = None,
    profile: Path | None = None,
    count_sql: bool = False,
    out: Callable[[str], None] = print,
) -> list[ReplicasRun]:
    """The replicas target alone: one SQLite App and two PostgreSQL replicas, `runs` times."""
    http, loop = server_options()
    admin = postgres_url or os.environ.get("PAIR_TEST_POSTGRES_URL") or DEFAULT_POSTGRES
    out(
        f"replicas target: command deliveries, {requests:,} per max-rate run ({CONCURRENCY} "
        f"connections), {RATE:.0f}/s for {seconds:g} s, {runs} run(s); uvicorn with {http} and "
        f"{loop}; {os.cpu_count()} CPU(s) shared by the load generator, the servers and "
        "PostgreSQL"
    )
    saved = {key: os.environ.get(key) for key in (PROFILE_ENV, COUNT_SQL_ENV)}
    database = Database(admin)
    try:
        with tempfile.TemporaryDirectory(prefix="pairbot-edge-targets-") as tmp:
            workdir = Path(tmp)
            app_store = workdir / "app.sqlite3"
            sql_dir = workdir if count_sql else None
            if profile is not None:
                profile.mkdir(parents=True, exist_ok=True)
                os.environ[PROFILE_ENV] = str(profile.resolve())
            if sql_dir is not None:
                os.environ[COUNT_SQL_ENV] = str(sql_dir)
            with (
                start_server("app", "app", str(app_store), workdir, http=http, loop=loop) as app,
                start_server(
                    "replica-1", "app", database.url, workdir, http=http, loop=loop
                ) as one,
                start_server(
                    "replica-2", "app", database.url, workdir, http=http, loop=loop
                ) as two,
            ):
                done = _run(
                    _measure_replicas(
                        app=app,
                        app_store=app_store,
                        replicas=(one, two),
                        database=database,
                        requests=requests,
                        seconds=seconds,
                        runs=runs,
                        sql_dir=sql_dir,
                    )
                )
                _check_alive((app, one, two), workdir)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        database.drop()
    for number, run in enumerate(done, 1):
        failures = sum(
            r.load.failures for r in (run.one, run.one_rate, run.replicas, run.replicas_rate)
        )
        out(f"run {number}: non-2xx answers {failures}")
        for line in replica_lines(run.one, run.one_rate, run.replicas, run.replicas_rate):
            out(f"  {line}")
        for where, counted in (
            ("max rate", run.statements),
            (f"{RATE:.0f}/s", run.statements_rate),
        ):
            if counted is None:
                continue
            total = sum(n for key, n in counted.items() if not key.startswith("(t"))
            out(f"  statements per command delivery (both replicas, {where}): {total:.2f}")
            for key, n in sorted(counted.items(), key=lambda item: -item[1]):
                if n >= 0.005:
                    out(f"    {n:6.2f}  {key}")
    return done


def _run(main: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a pinned dependency
        return asyncio.run(main)
    return uvloop.run(main)


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2_000, help="per max-rate run")
    parser.add_argument("--seconds", type=float, default=5.0, help="at 100 requests/s")
    parser.add_argument("--postgres", help="an admin URL (default: PAIR_TEST_POSTGRES_URL)")
    parser.add_argument("--serve", choices=("app", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="", help=argparse.SUPPRESS)
    http, loop = server_options()
    parser.add_argument("--http", choices=("httptools", "h11"), default=http)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default=loop)
    parser.add_argument(
        "--only",
        choices=("edge", "replicas"),
        help="measure part of it: `edge` (the floor and one SQLite App, no PostgreSQL) or "
        "`replicas` (with its SQLite baseline)",
    )
    parser.add_argument("--runs", type=int, default=3, help="with --only replicas: how many runs")
    parser.add_argument(
        "--profile", type=Path, help="with --only replicas: write each server's cProfile here"
    )
    parser.add_argument(
        "--count-sql",
        action="store_true",
        help="with --only replicas: print the statements the replicas send per delivery",
    )
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.fd, args.store, args.http, args.loop)
        return
    if args.requests < 1 or args.seconds <= 0 or args.runs < 1:
        parser.error("--requests and --runs need at least 1, --seconds a positive number")
    if args.only is None and (args.profile is not None or args.count_sql):
        parser.error("--profile and --count-sql go with --only replicas")
    if args.only == "edge":
        main(args.requests, args.seconds, postgres_url=args.postgres, only="edge")
        return
    if args.only == "replicas":
        main_replicas(
            args.requests,
            args.seconds,
            runs=args.runs,
            postgres_url=args.postgres,
            profile=args.profile,
            count_sql=args.count_sql,
        )
        return
    main(args.requests, args.seconds, postgres_url=args.postgres)


if __name__ == "__main__":
    _cli(sys.argv[1:])
