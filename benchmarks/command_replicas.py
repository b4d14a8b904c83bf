"""Two App replicas on one PostgreSQL store against one App on SQLite: CPU per command,
answered and run, against the GitHub that answers (issue #29 item 6).

    python benchmarks/command_path.py --replicas            3 runs, 3 rounds of 1,000 each
    python benchmarks/command_path.py --replicas --runs 1 --requests 300 --rate 0

Processes on loopback, each as `pairbot serve` runs (benchmarks/command_servers.py):

    forge     benchmarks/answering_forge.py, every answer `--latency-ms` late
    sqlite    one App on a SQLite store in a temp dir
    replicas  two Apps sharing one fresh PostgreSQL database (created for the run, dropped
              afterwards), the sender's 16 connections dealt between them in turn, as a
              round-robin load balancer would

Each run sends the same kind of deliveries (distinct signed `/pair status` commands) to both
sides, at max rate (16 connections), then at `--rate` a second, each in `--rounds` rounds (3)
pooled per side; which side goes first alternates from round to round and from run to run,
so other work on the shared machine weighs on both alike. CPU is
counted from the first delivery until the last job behind them is done (its API calls
answered): the App processes (every thread, from /proc), and apart from them the PostgreSQL
backends serving the benchmark's database (the server's background processes, shared with
any other database on it, are not counted). The issue's target compares the App's CPU per
command; the line with PostgreSQL's backends says what the shared store costs besides.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from benchmarks.answering_forge import fetch_stats
from benchmarks.edge_targets import CpuMeter, Database, sqlite_open_jobs
from benchmarks.load_client import pooled_measures, tree_cpu_seconds
from benchmarks.webhook_load import Measured, fixed_rate, max_rate

GOAL_REPLICAS = 1.25
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
CONNECTIONS = 16


@dataclass(frozen=True)
class Side:
    """One side's figures for one kind of load."""

    measured: Measured
    app_cpu_s: float  # the App processes, until their last job was done
    database_cpu_s: float  # the PostgreSQL backends serving the database (0 for SQLite)
    forge_requests: int
    transactions: int = 0  # PostgreSQL's commits in the benchmark's database (0 for SQLite)

    def us(self, cpu_s: float) -> float:
        return 1e6 * cpu_s / self.measured.requests if self.measured.requests else 0.0

    @property
    def app_us(self) -> float:
        return self.us(self.app_cpu_s)

    @property
    def total_us(self) -> float:
        return self.us(self.app_cpu_s + self.database_cpu_s)


@dataclass(frozen=True)
class Comparison:
    """Two replicas against one SQLite App, one load, one run."""

    load: str
    sqlite: Side
    replicas: Side

    @property
    def app_ratio(self) -> float:
        return self.replicas.app_us / self.sqlite.app_us

    @property
    def total_ratio(self) -> float:
        return self.replicas.total_us / self.sqlite.app_us


async def settle(open_jobs: Callable[[], int], timeout_s: float = 300.0) -> None:
    """Until no job is queued or running (its API calls answered)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while open_jobs():
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(f"the jobs were not done in {timeout_s:.0f} s")
        await asyncio.sleep(0.02)


async def measure_side(  # noqa: PLR0917 - one call site per side, every argument named
    ports: Sequence[int],
    pids: Sequence[int],
    requests: Sequence[bytes],
    open_jobs: Callable[[], int],
    forge_port: int,
    rate: float | None,
    database: Watch | None = None,
) -> Side:
    before = fetch_stats(forge_port)["requests"]
    app = {pid: tree_cpu_seconds(pid) for pid in pids}  # edge + worker process
    backends = CpuMeter(database.backends) if database is not None else None
    commits = transactions(database.database) if database is not None else 0
    if rate is None:
        measured = await max_rate(list(ports), requests, CONNECTIONS)
    else:
        measured = await fixed_rate(list(ports), requests, rate, CONNECTIONS)
    await settle(open_jobs)
    app_cpu = sum(tree_cpu_seconds(pid) - start for pid, start in app.items())
    after = fetch_stats(forge_port)["requests"]
    used = backends.used() if backends else 0.0
    commits = transactions(database.database) - commits if database is not None else 0
    return Side(measured, app_cpu, used, after - before, commits)


class Watch:
    """The benchmark's own look at the database: its open jobs, on one connection kept open
    (a connection per poll would add backends, and their CPU, to what is measured), and the
    replicas' backends, that connection's left out."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.conn = psycopg.connect(database.url, autocommit=True)
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        self.pid = int(row[0]) if row else 0

    def open_jobs(self) -> int:
        row = self.conn.execute(
            "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')"
        ).fetchone()
        return int(row[0]) if row else 0

    def backends(self) -> list[int]:
        return [pid for pid in self.database.backends() if pid != self.pid]

    def close(self) -> None:
        self.conn.close()


def transactions(database: Database) -> int:
    """Commits in the benchmark's database so far (the statistics collector's count: each
    autocommit statement is one). Read from a connection of the benchmark's own, in a fresh
    snapshot of the statistics, so its own reads count a handful at most."""
    admin = database._admin
    admin.execute("SELECT pg_stat_clear_snapshot()")
    row = admin.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (database.name,)
    ).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class Targets:
    """The two sides as started: ports, pids, and how to see their open jobs."""

    sqlite_port: int
    sqlite_pid: int
    sqlite_store: Path
    replica_ports: tuple[int, ...]
    replica_pids: tuple[int, ...]
    database: Watch
    forge_port: int


def pooled_sides(sides: Sequence[Side]) -> Side:
    """One side's rounds as one: everything they measured, added up."""
    return Side(
        pooled_measures([side.measured for side in sides]),
        sum(side.app_cpu_s for side in sides),
        sum(side.database_cpu_s for side in sides),
        sum(side.forge_requests for side in sides),
        sum(side.transactions for side in sides),
    )


async def compare(  # noqa: PLR0917 - the targets, the load and its place in the runs
    targets: Targets,
    build: Callable[[int], list[bytes]],
    n: int,
    rate: float | None,
    index: int,
    rounds: int = 1,
) -> Comparison:
    """Both sides under the same load, in `rounds` rounds of `n` deliveries each, the side
    that goes first alternating from round to round (and with `index`), each side's rounds
    pooled: the machine's drift over a run falls on both alike."""
    t = targets

    async def sqlite() -> Side:
        return await measure_side(
            [t.sqlite_port],
            [t.sqlite_pid],
            build(n),
            lambda: sqlite_open_jobs(t.sqlite_store),
            t.forge_port,
            rate,
        )

    async def replicas() -> Side:
        return await measure_side(
            t.replica_ports,
            t.replica_pids,
            build(n),
            t.database.open_jobs,
            t.forge_port,
            rate,
            t.database,
        )

    ones: list[Side] = []
    twos: list[Side] = []
    for round_ in range(rounds):
        if (index + round_) % 2:
            ones.append(await sqlite())
            twos.append(await replicas())
        else:
            twos.append(await replicas())
            ones.append(await sqlite())
    load = "max rate" if rate is None else f"{rate:g}/s"
    return Comparison(load, pooled_sides(ones), pooled_sides(twos))


def format_comparison(c: Comparison, index: int) -> list[str]:
    s, r = c.sqlite, c.replicas
    return [
        f"run {index}, {c.load}: two PostgreSQL replicas / one SQLite App, CPU per command "
        f"answered and run: App processes {c.app_ratio:.2f} ({r.app_us:.0f} / {s.app_us:.0f} us; "
        f"target <= {GOAL_REPLICAS}), with PostgreSQL's backends {c.total_ratio:.2f} "
        f"({r.total_us:.0f} us = {r.app_us:.0f} + {r.us(r.database_cpu_s):.0f})",
        f"  answered/s {r.measured.throughput:.0f} vs {s.measured.throughput:.0f}; p99 "
        f"{r.measured.percentile(99):.1f} vs {s.measured.percentile(99):.1f} ms; forge requests "
        f"per command {r.forge_requests / r.measured.requests:.2f} vs "
        f"{s.forge_requests / s.measured.requests:.2f}; failures "
        f"{r.measured.failures} vs {s.measured.failures}; PostgreSQL transactions per command "
        f"{r.transactions / r.measured.requests:.2f} (its polls of the queue included)",
    ]


def postgres_admin_url() -> str:
    return os.environ.get("PAIR_TEST_POSTGRES_URL") or DEFAULT_POSTGRES
