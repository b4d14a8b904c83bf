"""The SQLite store's deliveries: a group commit's batch of deliveries written with their jobs,
commands and installation changes.

The batch is written straight into its `BEGIN IMMEDIATE` transaction, with no SAVEPOINT per
delivery: a savepoint copies every page its delivery touches first to the statement journal,
for a rollback that almost never comes. If a delivery does fail, the whole transaction is
rolled back and the batch written again with a SAVEPOINT each (`enqueue_each`), so each
delivery still succeeds or fails alone, with the outcome a savepoint each would have had.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from app.store.base import InstallationChange, NewJob
from app.store.rows import (
    command_values,
    delivery_status,
    installation_values,
    job_values,
    json_text,
)


@dataclass
class Enqueue:
    """One `enqueue_delivery` call waiting for the next group commit."""

    source: str
    delivery_id: str
    event: str
    action: str | None
    jobs: tuple[NewJob, ...]
    note: str
    installation: InstallationChange | None
    future: asyncio.Future[int | None]


class BatchFailed(Exception):
    """A delivery of a group commit failed; the batch is written again, one SAVEPOINT each."""


def enqueue_all(
    conn: sqlite3.Connection, batch: Sequence[Enqueue], now: float
) -> list[int | Exception | None]:
    """The common case: every delivery of the batch written straight into the transaction.

    A SAVEPOINT around each delivery cost more than the inserts it guarded: every page a
    delivery touches first is copied to the statement journal, on the edge's critical path,
    for a rollback that almost never comes. Any failure instead rolls back the whole batch
    (the connection's `run_durable`) and the store writes it again with `enqueue_each`.
    """
    try:
        return [enqueue_one(conn, item, now) for item in batch]
    except Exception as err:
        if len(batch) == 1:  # alone in its transaction: the failure is its own
            raise
        raise BatchFailed from err


def enqueue_each(
    conn: sqlite3.Connection, batch: Sequence[Enqueue], now: float
) -> list[int | Exception | None]:
    """A batch in which a delivery failed: each delivery in its own SAVEPOINT, so only the
    failing one is rolled back and answered with its error."""
    results: list[int | Exception | None] = []
    for item in batch:  # inside run_durable's transaction
        conn.execute("SAVEPOINT delivery")
        try:
            results.append(enqueue_one(conn, item, now))
        except Exception as err:
            conn.execute("ROLLBACK TO delivery")
            results.append(err)
        conn.execute("RELEASE delivery")
    return results


def enqueue_one(conn: sqlite3.Connection, item: Enqueue, now: float) -> int | None:
    """Record one delivery and queue its jobs (inside the caller's transaction): how many of its
    jobs were queued, None when the delivery was seen before."""
    jobs = len(item.jobs)
    inserted = conn.execute(
        "INSERT INTO deliveries (source, id, event, action, status, note, jobs, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            item.source,
            item.delivery_id,
            item.event,
            item.action,
            delivery_status(jobs, jobs),
            item.note,
            jobs,
            now,
        ),
    ).rowcount
    if not inserted:
        return None  # seen before: nothing is written
    queued = sum(insert_job(conn, item.delivery_id, job, now) for job in item.jobs)
    if queued != jobs:  # a job of this comment was queued by another delivery
        conn.execute(
            "UPDATE deliveries SET status = ?, jobs = ? WHERE source = ? AND id = ?",
            (delivery_status(jobs, queued), queued, item.source, item.delivery_id),
        )
    if item.installation is not None:
        apply_installation(conn, item.installation, now)
    return queued


def insert_job(conn: sqlite3.Connection, delivery_id: str, job: NewJob, now: float) -> int:
    """Insert one job unless its dedupe key exists; 1 if inserted."""
    cursor = conn.execute(
        "INSERT INTO jobs (delivery_id, kind, source, repo, installation, target, number, "
        "dedupe_key, serial_key, request, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedupe_key) DO NOTHING",
        job_values(delivery_id, job, json_text(job.request), now),
    )
    if not cursor.rowcount:
        return 0
    command = command_values(cast(int, cursor.lastrowid), job)
    if command is not None:
        conn.execute(
            "INSERT INTO commands (job_id, repo, number, verb, args, author_id, author_login, "
            "comment_id, comment_url) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            command,
        )
    return 1


def apply_installation(conn: sqlite3.Connection, change: InstallationChange, now: float) -> None:
    """Write what an installation event says (app/store/rows.py merges it with the row)."""
    if change.deleted:
        conn.execute("DELETE FROM installations WHERE id = ?", (change.id,))
        return
    row = conn.execute(
        "SELECT account, repos, suspended FROM installations WHERE id = ?", (change.id,)
    ).fetchone()
    account, repos, suspended = installation_values(change, row)
    conn.execute(
        "INSERT INTO installations (id, account, repos, suspended, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET account = excluded.account, "
        "repos = excluded.repos, suspended = excluded.suspended, updated_at = excluded.updated_at",
        (change.id, account, repos, int(suspended), now),
    )
