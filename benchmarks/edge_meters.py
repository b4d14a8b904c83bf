"""What the webhook benchmarks read beside their servers: CPU of a set of processes, the App's
open jobs (SQLite or PostgreSQL), and a fresh PostgreSQL database for replicas.

Not run on its own: benchmarks/edge_targets.py uses `CpuMeter`, `sqlite_open_jobs` and
`drained`; benchmarks/command_path.py and command_replicas.py import `Database`, `CpuMeter`
and `sqlite_open_jobs` (through edge_targets.py, which re-exports them).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from benchmarks.load_client import cpu_seconds

_OPEN = "state IN ('queued', 'running')"  # as the store's partial indexes spell it


class Database:
    """A fresh PostgreSQL database for replicas, its backends' pids, and its open jobs."""

    def __init__(self, admin_url: str) -> None:
        import psycopg  # noqa: PLC0415 - only the replicas' benchmarks need PostgreSQL

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
            row = conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {_OPEN}").fetchone()  # noqa: S608 - constant SQL
        return int(row[0]) if row else 0

    def drop(self) -> None:
        self._admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self._admin.close()


def sqlite_jobs(path: Path, state: str) -> int:
    """How many of the jobs in the SQLite store at `path` are in `state`."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=5)
    try:
        row = conn.execute("SELECT COUNT(*) FROM jobs WHERE state = ?", (state,))
        return int(row.fetchone()[0])
    finally:
        conn.close()


def sqlite_open_jobs(path: Path) -> int:
    """The jobs queued or running in the SQLite store at `path` (0 before it exists)."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=5)
    try:
        row = conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {_OPEN}")  # noqa: S608 - constant SQL
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
