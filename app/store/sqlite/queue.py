"""The SQLite store's job queue: the claim's query, reading jobs back, and the worker's
bookkeeping (stages and outcomes) written together.

The claim walks open jobs only: finished jobs stay in the table for the record but leave the
partial indexes the queue reads (migration 2), which so stay a few pages.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.store.base import JobRecord
from app.store.rows import job_record
from app.store.sqlite.connection import write

# A job is claimable when it is queued and due, nothing of its serial key is running, and no
# older job of its key is still queued (a key's jobs run in queue order; a head waiting for its
# retry time holds back the jobs behind it). The queued jobs are walked oldest first through
# jobs_open_order and the walk stops at `limit`, so a claim costs about the same with three
# jobs queued or three thousand (the query before it grouped every queued job on each claim).
# `state IN ('queued', 'running')` repeats the partial indexes' condition: SQLite uses a
# partial index only for a query whose WHERE names that condition itself.
CLAIM = """
    SELECT j.id FROM jobs AS j
    WHERE j.state IN ('queued', 'running') AND j.state = 'queued' AND j.not_before <= ?
      AND NOT EXISTS (
          SELECT 1 FROM jobs AS r
          WHERE r.state IN ('queued', 'running') AND r.state = 'running'
            AND r.serial_key = j.serial_key)
      AND NOT EXISTS (
          SELECT 1 FROM jobs AS e
          WHERE e.state IN ('queued', 'running') AND e.state = 'queued'
            AND e.serial_key = j.serial_key AND e.id < j.id)
    ORDER BY j.id
    LIMIT ?
"""
_JOB_COLUMNS = """
    j.id, j.delivery_id, j.kind, j.source, j.repo, j.installation, j.target, j.number,
    j.request, j.state, j.stage, j.attempts, j.not_before, j.result, j.created_at,
    j.updated_at, c.verb
"""
# A command job's command, once the worker has read it; once per job (a retry writes nothing).
RECORD_COMMAND = (
    "INSERT INTO commands (job_id, repo, number, verb, args, author_id, author_login, "
    "comment_id, comment_url) SELECT ?, repo, number, ?, ?, ?, ?, ?, ? FROM jobs WHERE id = ? "
    "ON CONFLICT (job_id) DO NOTHING"
)
SELECT_JOBS = f"SELECT {_JOB_COLUMNS} FROM jobs AS j LEFT JOIN commands AS c ON c.job_id = j.id"  # noqa: S608 - constant SQL


@dataclass
class Update:
    """One job's bookkeeping statement waiting for the next `update_all`."""

    sql: str
    values: tuple[Any, ...]
    future: asyncio.Future[None]


def update_all(conn: sqlite3.Connection, batch: Sequence[Update]) -> None:
    """Bookkeeping statements in one transaction (not durable: see app/store/sqlite/connection.py).
    A statement that fails rolls the batch back, and each is then run on its own, so only that
    one is answered with its error."""
    try:
        with write(conn):
            for update in batch:
                conn.execute(update.sql, update.values)
    except Exception:
        if len(batch) == 1:
            raise
        for update in batch:  # autocommit: each its own transaction
            try:
                conn.execute(update.sql, update.values)
            except Exception as err:
                if not update.future.done():
                    update.future.set_exception(err)
    for update in batch:
        if not update.future.done():
            update.future.set_result(None)


def select_jobs(conn: sqlite3.Connection, ids: Sequence[int]) -> list[JobRecord]:
    """The jobs of these ids, in id order."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"{SELECT_JOBS} WHERE j.id IN ({marks}) ORDER BY j.id", tuple(ids))
    return [job_record(row) for row in rows]


def claim_jobs(conn: sqlite3.Connection, now: float, limit: int, stamp: float) -> list[JobRecord]:
    """Mark up to `limit` claimable jobs running (`CLAIM`), in one bookkeeping transaction."""
    with write(conn):
        ids = [row[0] for row in conn.execute(CLAIM, (now, limit))]
        conn.executemany(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = ? "
            "WHERE id = ?",
            [(stamp, job_id) for job_id in ids],
        )
        return select_jobs(conn, ids)


def requeue_running(conn: sqlite3.Connection, stamp: float) -> int:
    """Queue every running job again (one process owns the file: at start-up, none runs)."""
    with write(conn):
        return conn.execute(
            "UPDATE jobs SET state = 'queued', not_before = 0, updated_at = ? "
            "WHERE state IN ('queued', 'running') AND state = 'running'",  # see CLAIM
            (stamp,),
        ).rowcount
