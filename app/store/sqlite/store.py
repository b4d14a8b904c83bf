"""`SqliteStore`: the App's store in one SQLite file, the embedded default (docs/app.md, The store).

Its parts: the connection and its commits (app/store/sqlite/connection.py), the schema
(schema.py), a batch of deliveries written (deliveries.py), the job queue (queue.py). Here:
the `Store` methods, and the batching that lets writes arriving together share a commit.

- Group commit: deliveries that arrive while a COMMIT is on disk share the next one — one
  fsync per burst (`synchronous=FULL`: a delivery answered 2xx survives a power cut, not only
  a process crash), written as deliveries.py says. Measured on this edge (3,000 deliveries of
  one command job, 16 at a time, uvloop): about 15% less CPU per delivery (77 → 65 µs;
  139 → 124 µs against a store of 200,000 rows), from the savepoints and from a shielded
  future per delivery. Measured and left out: an `executemany` of the batch after a SELECT
  for seen ids (slower than `INSERT … ON CONFLICT DO NOTHING` and its rowcount), a larger
  statement cache (the edge runs a handful), a later WAL checkpoint threshold and a larger
  page cache (no gain; 64 MB cost more), dropping the `deliveries_received` index (no
  measurable gain even dropped outright; the status page and the prune read it, and a rowid
  table would need a (source, id) index instead), and a COMMIT on the loop's thread (~7 µs
  less, but the loop would stop reading requests for the fsync); and the claim as one
  `UPDATE … WHERE id IN (<claim>) RETURNING …` (a job's claim, stage and outcome took
  88-93 µs of CPU instead of 71-72).
- Prunes delete in chunks of `PRUNE_CHUNK` rows, each its own short transaction, so the edge
  never waits long for the write lock. Finished jobs go with their commands rows; queued and
  running jobs are never pruned.
- The worker's bookkeeping (claim, stage, outcome) commits without waiting for the disk
  (`synchronous=NORMAL`): a power cut may undo it, and the job then runs again (at least
  once). The stages and outcomes written in one turn of the event loop share one transaction
  (the worker's jobs run side by side and reach them together: four jobs, one commit instead
  of four); a statement that fails still fails alone.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from app.store.base import (
    CommandRecord,
    DeliveryRecord,
    InstallationChange,
    InstallationRecord,
    JobRecord,
    NewJob,
    PrunedJobs,
)
from app.store.rows import (
    delivery_record,
    installation_record,
    job_counts,
    job_record,
    record_values,
)
from app.store.sqlite.connection import SqliteConnection, write
from app.store.sqlite.deliveries import BatchFailed, Enqueue, enqueue_all, enqueue_each
from app.store.sqlite.queue import (
    RECORD_COMMAND,
    SELECT_JOBS,
    Update,
    claim_jobs,
    requeue_running,
    select_jobs,
    update_all,
)

# Rows a prune reads and deletes in one transaction. The edge waits on the write lock (and a
# prune runs on the event loop's thread), so a prune of a large backlog is many short
# transactions, never one long one. Measured on a store of 200,000 deliveries and finished
# jobs: 500 rows take about 5 ms for jobs and 15 ms for deliveries (their random ids touch a
# page each); 2,000 took 20-50 ms, the order of the edge's latency target.
PRUNE_CHUNK = 500


class SqliteStore:
    """`Store` in one SQLite file (created with its directory on `open()`)."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_ms: int = 5_000,
        prune_chunk: int = PRUNE_CHUNK,
    ) -> None:
        if prune_chunk < 1:
            raise ValueError("a prune needs a chunk of at least one row")
        self.path = Path(path)
        self._db = SqliteConnection(self.path, busy_timeout_ms=busy_timeout_ms)
        self._clock = clock
        self._prune_chunk = prune_chunk
        self._pending: list[Enqueue] = []
        self._flusher: asyncio.Task[None] | None = None
        self._updates: list[Update] = []
        self._updater: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def _connection(self) -> sqlite3.Connection:
        return self._db.get()

    async def open(self) -> None:
        self._db.open()

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher])  # answer every delivery already handed over
        if self._updater is not None and not self._updater.done():
            await asyncio.wait([self._updater])  # and write the bookkeeping already handed over
        self._db.close()

    # -- the edge -----------------------------------------------------------------------------

    async def enqueue_delivery(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        jobs: Sequence[NewJob],
        *,
        source: str = "github",
        status: str | None = None,
        installation: InstallationChange | None = None,
    ) -> int | None:
        loop = asyncio.get_running_loop()
        item = Enqueue(
            source=source,
            delivery_id=delivery_id,
            event=event,
            action=action,
            jobs=tuple(jobs),
            note=status or "",
            installation=installation,
            future=loop.create_future(),
        )
        self._pending.append(item)
        flusher = self._flusher
        if flusher is None or flusher.done() or flusher.get_loop() is not loop:
            self._flusher = loop.create_task(self._flush(), name="pairbot-store-commit")
        # A request cancelled here (its client went away) cancels only its own future: the
        # item stays in its batch, the commit goes ahead for the others, and its delivery is
        # then recorded — right, since its work is queued; `_flush` skips a done future. Not
        # `asyncio.shield`, which did the same with a second future and callbacks per call.
        return await item.future

    async def _flush(self) -> None:
        """Group commit: every enqueue that arrived while the last commit ran shares the next.

        One fsync (synchronous=FULL) then covers a whole burst of deliveries instead of one
        each. The batch is written without a SAVEPOINT per delivery; if one delivery fails,
        the whole transaction rolls back and the batch is written again with one SAVEPOINT
        each, so each delivery still succeeds or fails on its own (see the module docstring).
        """
        while self._pending:
            batch, self._pending = self._pending, []
            now = self._clock()
            results: list[int | Exception | None]
            try:
                try:
                    results = await self._db.run_durable(
                        functools.partial(enqueue_all, batch=batch, now=now)
                    )
                except BatchFailed:
                    results = await self._db.run_durable(
                        functools.partial(enqueue_each, batch=batch, now=now)
                    )
            except Exception as err:  # BEGIN or COMMIT failed: nothing of the batch stuck
                results = [err] * len(batch)
            for item, result in zip(batch, results, strict=True):
                if item.future.done():
                    continue
                if isinstance(result, BaseException):
                    item.future.set_exception(result)
                else:
                    item.future.set_result(result)

    # -- the worker ---------------------------------------------------------------------------

    async def claim(self, limit: int, now: float) -> list[JobRecord]:
        if limit <= 0:
            return []
        return await self._db.run(
            functools.partial(claim_jobs, now=now, limit=limit, stamp=self._clock())
        )

    async def advance(self, job_id: int, stage: str, command: CommandRecord | None = None) -> None:
        stage_written = self._queue(*_update_sql(job_id, "stage = ?", (stage,), self._clock()))
        if command is None:
            await stage_written
            return
        # Queued in the same turn of the loop: one transaction holds both.
        kept = self._queue(RECORD_COMMAND, (job_id, *record_values(command), job_id))
        await asyncio.gather(stage_written, kept)

    async def finish(self, job_id: int, state: Literal["done", "failed"], result: str) -> None:
        await self._update(job_id, "state = ?, result = ?", (state, result))

    async def retry_later(self, job_id: int, not_before: float, result: str) -> None:
        await self._update(
            job_id, "state = 'queued', not_before = ?, result = ?", (not_before, result)
        )

    async def record_command(self, job_id: int, record: CommandRecord) -> None:
        # Bookkeeping like a stage: its job runs again if a power cut undoes it, and writes it
        # again then.
        await self._queue(RECORD_COMMAND, (job_id, *record_values(record), job_id))

    async def _update(self, job_id: int, assignments: str, values: tuple[Any, ...]) -> None:
        await self._queue(*_update_sql(job_id, assignments, values, self._clock()))

    def _queue(self, sql: str, values: tuple[Any, ...]) -> asyncio.Future[None]:
        """One statement of the worker's bookkeeping, committed with every other one queued in
        the same turn of the event loop (`_apply_updates`): the worker's jobs run side by side
        and reach their stage and their outcome together, so one transaction serves them all."""
        loop = asyncio.get_running_loop()
        update = Update(sql, values, loop.create_future())
        self._updates.append(update)
        updater = self._updater
        if updater is None or updater.done() or updater.get_loop() is not loop:
            self._updater = loop.create_task(self._apply_updates(), name="pairbot-store-updates")
        return update.future

    async def _apply_updates(self) -> None:
        while self._updates:
            batch, self._updates = self._updates, []
            try:
                await self._db.run(functools.partial(update_all, batch=batch))
            except Exception as err:  # BEGIN or COMMIT failed: none of the batch stuck
                for update in batch:
                    if not update.future.done():
                        update.future.set_exception(err)

    async def recover(self) -> int:
        return await self._db.run(functools.partial(requeue_running, stamp=self._clock()))

    # -- reading ------------------------------------------------------------------------------

    async def job(self, job_id: int) -> JobRecord | None:
        found = await self._db.run(lambda conn: select_jobs(conn, [job_id]))
        return found[0] if found else None

    async def jobs(self, limit: int = 100) -> list[JobRecord]:
        def jobs(conn: sqlite3.Connection) -> list[JobRecord]:
            rows = conn.execute(f"{SELECT_JOBS} ORDER BY j.id DESC LIMIT ?", (limit,))
            return [job_record(row) for row in rows]

        return await self._db.run(jobs)

    async def counts(self) -> dict[str, int]:
        def counts(conn: sqlite3.Connection) -> dict[str, int]:
            # A scan of the table (no index holds finished jobs): the status page's query,
            # never on the edge's or the worker's path.
            return job_counts(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state"))

        return await self._db.run(counts)

    async def deliveries(self, limit: int = 50) -> list[DeliveryRecord]:
        def deliveries(conn: sqlite3.Connection) -> list[DeliveryRecord]:
            rows = conn.execute(
                "SELECT source, id, event, action, status, note, received_at, jobs "
                "FROM deliveries ORDER BY received_at DESC, id LIMIT ?",
                (limit,),
            )
            return [delivery_record(row) for row in rows]

        return await self._db.run(deliveries)

    async def last_installation(self, repo: str) -> int | None:
        def last(conn: sqlite3.Connection) -> int | None:
            # The newest job first by rowid; finished jobs are kept 30 days (prune_jobs).
            row = conn.execute(
                "SELECT installation FROM jobs WHERE source = 'github' AND installation IS NOT "
                "NULL AND repo = ? COLLATE NOCASE ORDER BY id DESC LIMIT 1",
                (repo,),
            ).fetchone()
            return int(row[0]) if row is not None else None

        return await self._db.run(last)

    async def installations(self) -> list[InstallationRecord]:
        def installations(conn: sqlite3.Connection) -> list[InstallationRecord]:
            rows = conn.execute(
                "SELECT id, account, repos, suspended, updated_at FROM installations ORDER BY id"
            )
            return [installation_record(row) for row in rows]

        return await self._db.run(installations)

    # -- pruning ------------------------------------------------------------------------------

    async def prune_deliveries(self, before: float) -> int:
        def prune(conn: sqlite3.Connection) -> tuple[int, bool]:
            with write(conn):
                keys = [
                    (row[0], row[1])
                    for row in conn.execute(
                        "SELECT source, id FROM deliveries WHERE received_at < ? "
                        "ORDER BY received_at LIMIT ?",
                        (before, self._prune_chunk),
                    )
                ]
                conn.executemany("DELETE FROM deliveries WHERE source = ? AND id = ?", keys)
                return len(keys), len(keys) == self._prune_chunk

        pruned = 0
        while True:
            count, more = await self._db.run(prune)
            pruned += count
            if not more:
                return pruned
            await asyncio.sleep(0)  # between chunks the edge's commits go first

    async def prune_jobs(self, before: float) -> PrunedJobs:
        pruned = PrunedJobs()
        after = 0
        while True:
            jobs, commands, last = await self._db.run(
                functools.partial(self._prune_jobs_chunk, before=before, after=after)
            )
            pruned = PrunedJobs(pruned.jobs + jobs, pruned.commands + commands)
            if last is None:
                return pruned
            after = last
            await asyncio.sleep(0)  # between chunks the edge's commits go first

    def _prune_jobs_chunk(
        self, conn: sqlite3.Connection, before: float, after: int
    ) -> tuple[int, int, int | None]:
        """Walk up to a chunk of jobs in id order from `after`; delete the finished old ones.

        No index holds finished jobs (migration 2), and a scan for them would read the whole
        table every hour. Jobs are queued in id order, so the walk stops at the first job
        created at or after `before`: every later one is younger. (Were the clock stepped back,
        a job behind that one would only be forgotten later, never early.) Returns the jobs
        and commands rows deleted, and the id to walk on from — None when the walk is done.
        """
        with write(conn):
            rows = conn.execute(
                "SELECT id, state, created_at, updated_at FROM jobs WHERE id > ? "
                "ORDER BY id LIMIT ?",
                (after, self._prune_chunk),
            ).fetchall()
            doomed: list[tuple[int]] = []
            last: int | None = rows[-1][0] if len(rows) == self._prune_chunk else None
            for job_id, state, created_at, updated_at in rows:
                if created_at >= before:
                    last = None
                    break
                if state in ("done", "failed") and updated_at < before:
                    doomed.append((job_id,))
            # Explicitly, though the foreign key cascades: so the count can be reported.
            commands = conn.executemany("DELETE FROM commands WHERE job_id = ?", doomed).rowcount
            jobs = conn.executemany("DELETE FROM jobs WHERE id = ?", doomed).rowcount
            return jobs, commands, last


def _update_sql(
    job_id: int, assignments: str, values: tuple[Any, ...], now: float
) -> tuple[str, tuple[Any, ...]]:
    """A job's bookkeeping `UPDATE` and its values (`assignments`: constant SQL)."""
    return (
        f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ?",  # noqa: S608 - constant SQL
        (*values, now, job_id),
    )
