"""The PostgreSQL store's deliveries: each recorded with its jobs and commands in one statement.

A delivery is recorded with `INSERT … ON CONFLICT DO NOTHING` on (source, id) in the same
statement as its jobs and commands: two replicas handed one delivery id race on the primary
key, the second waits for the first's commit and then inserts nothing. A job's `dedupe_key`
is unique the same way, so a comment acts at most once across every replica. Deliveries that
arrive while the previous write is out go together in the next statement and commit (group
commit, app/store/batching.py), each with its own outcome (`write_deliveries`). A delivery
with an installation change, or one comment twice, takes the general path instead
(`enqueue_in_transaction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import DictRow

from app.store.base import InstallationChange, NewJob
from app.store.postgres.unnest import columns
from app.store.rows import command_values, delivery_status, installation_values, job_values


@dataclass(frozen=True)
class Delivery:
    """A delivery to record: its row, its jobs' rows and its commands' rows."""

    row: tuple[Any, ...]  # source, id, event, action, status, note, jobs, received_at
    jobs: tuple[tuple[Any, ...], ...]  # rows.job_values
    commands: tuple[tuple[Any, ...], ...]  # delivery id, dedupe key, rows.command_values[1:]


# How many jobs of a delivery were queued; None: seen before; an error: refused alone.
Outcome = int | None | psycopg.Error


def same_delivery(a: Delivery, b: Delivery) -> bool:
    # By id alone (whatever the source): the statement tells its deliveries apart by id.
    return bool(a.row[1] == b.row[1])


def new_delivery(
    delivery_id: str, jobs: Sequence[NewJob], requests: Sequence[str], row: tuple[Any, ...]
) -> Delivery:
    """A delivery's row, its jobs' rows and its commands' rows, for `write_deliveries`."""
    now = row[-1]
    jobs_rows = [
        job_values(delivery_id, job, request, now)
        for job, request in zip(jobs, requests, strict=True)
    ]
    commands = []
    for job in jobs:
        command = command_values(0, job)
        if command is not None:
            commands.append((delivery_id, job.dedupe_key, *command[1:]))
    return Delivery(row, tuple(jobs_rows), tuple(commands))


# Deliveries, their jobs and their commands — however many — in ONE statement (one round
# trip, one durable commit), their columns as arrays: one text, prepared and planned once per
# connection. A delivery's jobs are inserted only when the delivery is new, a job only when
# its dedupe key is (the first in queue order wins), a command only with its job. Answers
# each new delivery's id and how many of its jobs were queued.
ENQUEUE = """
    WITH delivery AS (
        INSERT INTO deliveries (source, id, event, action, status, note, jobs, received_at)
        SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                             %s::text[], %s::int[], %s::float8[])
        ON CONFLICT DO NOTHING RETURNING id
    ), job AS (
        INSERT INTO jobs (delivery_id, kind, source, repo, installation, target, number,
                          dedupe_key, serial_key, request, created_at, updated_at)
        SELECT v.delivery_id, v.kind, v.source, v.repo, v.installation, v.target, v.number,
               v.dedupe_key, v.serial_key, v.request, v.created_at, v.updated_at
        FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[],
                    %s::text[], %s::int[], %s::text[], %s::text[], %s::text[], %s::float8[],
                    %s::float8[])
             AS v (ord, delivery_id, kind, source, repo, installation, target, number,
                   dedupe_key, serial_key, request, created_at, updated_at)
        WHERE v.delivery_id IN (SELECT id FROM delivery)
        ORDER BY v.ord
        ON CONFLICT (dedupe_key) DO NOTHING
        RETURNING id, delivery_id, dedupe_key
    ), command AS (
        INSERT INTO commands (job_id, repo, number, verb, args, author_id, author_login,
                              comment_id, comment_url)
        SELECT job.id, c.repo, c.number, c.verb, c.args, c.author_id, c.author_login,
               c.comment_id, c.comment_url
        FROM job JOIN unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::text[],
                             %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])
             AS c (delivery_id, dedupe_key, repo, number, verb, args, author_id,
                   author_login, comment_id, comment_url)
          ON c.delivery_id = job.delivery_id AND c.dedupe_key = job.dedupe_key
    )
    SELECT d.id, (SELECT count(*) FROM job WHERE job.delivery_id = d.id) AS queued
    FROM delivery AS d
"""


async def write_deliveries(
    conn: psycopg.AsyncConnection[DictRow], batch: Sequence[Delivery]
) -> list[Outcome]:
    """A batch of deliveries in one statement (`ENQUEUE`); per delivery how many of its jobs
    were queued, None when it was seen before."""
    deliveries = columns([delivery.row for delivery in batch], 8)
    jobs = columns([(n, *row) for n, row in enumerate(row for d in batch for row in d.jobs)], 13)
    commands = columns([row for delivery in batch for row in delivery.commands], 10)
    cursor = await conn.execute(ENQUEUE, [*deliveries, *jobs, *commands])
    queued = {str(row["id"]): int(row["queued"]) for row in await cursor.fetchall()}
    return [queued.get(delivery.row[1]) for delivery in batch]


async def enqueue_in_transaction(
    conn: psycopg.AsyncConnection[DictRow],
    delivery: tuple[Any, ...],
    jobs: Sequence[NewJob],
    requests: Sequence[str],
    installation: InstallationChange | None,
) -> int | None:
    """The general path: one delivery, its jobs one by one and its installation change, in one
    transaction; how many of its jobs were queued, None when the delivery was seen before."""
    source, delivery_id, now = delivery[0], delivery[1], delivery[-1]
    async with conn.transaction():
        inserted = await conn.execute(
            "INSERT INTO deliveries (source, id, event, action, status, note, jobs, "
            "received_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            delivery,
        )
        if not inserted.rowcount:
            return None  # seen before, by this replica or another: nothing is written
        queued = 0
        for job, request in zip(jobs, requests, strict=True):
            queued += await insert_job(conn, delivery_id, job, request, now)
        if queued != len(jobs):  # a job of this comment was queued by another delivery
            await conn.execute(
                "UPDATE deliveries SET status = %s, jobs = %s WHERE source = %s AND id = %s",
                (delivery_status(len(jobs), queued), queued, source, delivery_id),
            )
        if installation is not None:
            await apply_installation(conn, installation, now)
        return queued


async def insert_job(
    conn: psycopg.AsyncConnection[DictRow], delivery_id: str, job: NewJob, request: str, now: float
) -> int:
    """Insert one job unless its dedupe key exists; 1 if inserted."""
    cursor = await conn.execute(
        "INSERT INTO jobs (delivery_id, kind, source, repo, installation, target, number, "
        "dedupe_key, serial_key, request, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (dedupe_key) DO NOTHING RETURNING id",
        job_values(delivery_id, job, request, now),
    )
    row = await cursor.fetchone()
    if row is None:
        return 0
    command = command_values(int(row["id"]), job)
    if command is not None:
        await conn.execute(
            "INSERT INTO commands (job_id, repo, number, verb, args, author_id, author_login, "
            "comment_id, comment_url) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            command,
        )
    return 1


async def apply_installation(
    conn: psycopg.AsyncConnection[DictRow], change: InstallationChange, now: float
) -> None:
    """Write what an installation event says (app/store/rows.py merges it with the row)."""
    if change.deleted:
        await conn.execute("DELETE FROM installations WHERE id = %s", (change.id,))
        return
    cursor = await conn.execute(
        "SELECT account, repos, suspended FROM installations WHERE id = %s FOR UPDATE",
        (change.id,),
    )
    account, repos, suspended = installation_values(change, await cursor.fetchone())
    await conn.execute(
        "INSERT INTO installations (id, account, repos, suspended, updated_at) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET account = excluded.account, "
        "repos = excluded.repos, suspended = excluded.suspended, updated_at = excluded.updated_at",
        (change.id, account, repos, suspended, now),
    )
