"""`PostgresStore`: the App's store on a PostgreSQL server, for several `pairbot serve` replicas.

Its parts: the connections and pools (app/store/postgres/pools.py), the schema (schema.py),
deliveries recorded with their jobs (deliveries.py), the job queue's statements (queue.py).
Here: the `Store` methods, the group commits, and what replicas do for one another.

- The worker's stage writes, like deliveries, are group-committed (app/store/batching.py):
  the writes that arrive while one statement is out go in the next. A job's outcome (done,
  failed) rides the worker's next claim, in the same statement (`finish`): a job's end and the
  claim of the job that takes its slot cost one round trip; with no claim within a few
  milliseconds it goes alone, group-committed with the stages.
- Jobs are claimed with `UPDATE … WHERE id = ANY(SELECT … FOR UPDATE SKIP LOCKED)`: replicas
  claiming at once never wait for each other and never take one job twice. Only the oldest
  queued job of a serial key is claimable, and only while none of its key runs, so one card
  runs one job at a time across replicas too.
- A replica whose worker is full when a job is queued there `announce`s it (NOTIFY); the
  others `listen` and wake their workers, which would otherwise see it at their next poll.
- Leases, where SQLite re-queues every running job at start-up (one process owns that file):
  here other replicas are alive, and their running jobs are theirs. A claimed job carries its
  replica's `owner` and a `lease_until` (the database's clock plus `lease_s`); the replica
  renews the leases of all its running jobs, in one statement, every `lease_s / 3`. A replica
  that dies (SIGKILL, power) stops renewing; once its lease has passed, `recover`, or a claim
  on any replica (which looks at most once every EXPIRE_EVERY_S), queues the job again, and
  its `stage` lets the next run skip the effects already had. A replica
  stopped cleanly queues its unfinished jobs again at once (`close`). A replica that lost its
  lease (paused past it) finds its later `advance` / `finish` ignored: the job is another's.
- `run_alone(name, body)`: the worker's ticks (`PAIR_EXECUTION=worker`) run on one replica at
  a time, under a session advisory lock; a replica whose tick finds the lock taken skips it.
- Timestamps (created, updated, received) come from the store's clock like SQLite's; leases
  use the database's clock, the one clock every replica shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

import psycopg

from app.store.base import (
    CommandRecord,
    DeliveryRecord,
    InstallationChange,
    InstallationRecord,
    JobRecord,
    NewJob,
    PrunedJobs,
)
from app.store.batching import Batcher
from app.store.postgres.deliveries import (
    Delivery,
    Outcome,
    enqueue_in_transaction,
    new_delivery,
    same_delivery,
    write_deliveries,
)
from app.store.postgres.pools import Pool, connect, connect_or_explain, new_pool, open_pools
from app.store.postgres.queue import (
    CLAIM,
    CLAIM_EXPIRING,
    DB_NOW,
    EXPIRE,
    RECORD_COMMAND,
    SELECT_JOBS,
    UPDATE,
    UPDATE_KEEPING,
    UPDATE_KEEPING_WIDTH,
    UPDATE_WIDTH,
    Update,
    finishing,
    same_job,
    select_jobs,
)
from app.store.postgres.schema import migrate
from app.store.postgres.unnest import columns
from app.store.rows import (
    delivery_record,
    delivery_status,
    installation_record,
    job_counts,
    job_record,
    json_text,
    record_values,
)
from app.store.urls import redact_url

T = TypeVar("T")
log = logging.getLogger(__name__)

PRUNE_CHUNK = 500  # rows per prune transaction, as in SqliteStore
WORKER_POOL_SIZE = 4  # the worker's statements are short and few at a time
NOTIFY_CHANNEL = "pairbot_jobs"
ANNOUNCE_EVERY_S = 0.05
EXPIRE_EVERY_S = 1.0  # a replica's claims look for expired leases at most this often
LEASE_S = 60.0  # a dead replica's running job is queued again this long after its last renewal
# A job's outcome waits this long for the worker's next claim to carry it (see `finish`);
# then it goes alone.
OUTCOME_WAIT_S = 0.005


class PostgresStore:
    """`Store` on a PostgreSQL database, shared by any number of replicas."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        lease_s: float = LEASE_S,
        prune_chunk: int = PRUNE_CHUNK,
        pool_size: int = 8,
        connect_timeout_s: float = 10.0,
    ) -> None:
        if prune_chunk < 1:
            raise ValueError("a prune needs a chunk of at least one row")
        if lease_s <= 0:
            raise ValueError("a lease must last a positive number of seconds")
        self.url = url
        self._clock = clock
        self._lease_s = lease_s
        self._prune_chunk = prune_chunk
        self._pool_size = pool_size
        self._connect_timeout_s = connect_timeout_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # The edge's pool (and the status page's reads), and the worker's: a delivery never
        # waits for a connection behind the worker's bookkeeping, and each pool's sessions
        # carry their own durability (see `_configure`).
        self._pool: Pool | None = None
        self._work: Pool | None = None
        self._renewer: asyncio.Task[None] | None = None
        # The worker's stage and outcome writes, group-committed (app/store/batching.py).
        self._updates: Batcher[Update, None] | None = None
        # Deliveries too, each batch one durable commit: SqliteStore's group commit.
        self._enqueues: Batcher[Delivery, Outcome] | None = None
        # Outcomes (done, failed) not yet sent: the next claim carries them (`finish`).
        self._outcomes: list[Update] = []
        self._outcomes_due: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._announcing: asyncio.Task[None] | None = None
        self._announced_at = float("-inf")
        self._expired_at = float("-inf")

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r})"

    # -- plumbing -----------------------------------------------------------------------------

    def _connection(self) -> Pool:
        if self._pool is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._pool

    def _worker_pool(self) -> Pool:
        if self._work is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._work

    async def open(self) -> None:
        if self._pool is not None:
            return
        async with await connect_or_explain(self.url, self._connect_timeout_s) as conn:
            await migrate(conn, redact_url(self.url))
        edge = new_pool(self.url, "pairbot-store", self._pool_size, durable=True)
        work = new_pool(self.url, "pairbot-worker", WORKER_POOL_SIZE, durable=False)
        await open_pools((edge, work), self._connect_timeout_s)
        self._pool, self._work = edge, work
        self._updates = Batcher(self._write_updates, conflicts=same_job)
        self._enqueues = Batcher(self._write_deliveries, conflicts=same_delivery)
        self._renewer = asyncio.create_task(self._renew(), name="pairbot-store-leases")

    async def close(self) -> None:
        """Stop renewing leases and listening; queue this replica's unfinished jobs again."""
        if self._work is None:
            return
        await self._stop_tasks()
        with contextlib.suppress(psycopg.Error):
            await self._outcomes_written()  # before the requeue below: these jobs are done
        for batcher in (self._updates, self._enqueues):
            if batcher is not None:
                with contextlib.suppress(psycopg.Error):
                    await batcher.close()  # the writes already on their way
        with contextlib.suppress(psycopg.Error):
            async with self._work.connection() as conn:
                await conn.execute(
                    "UPDATE jobs SET state = 'queued', not_before = 0, owner = '', "
                    "updated_at = %s WHERE state = 'running' AND owner = %s",
                    (self._clock(), self.owner),
                )
        await self._abandon()

    async def _abandon(self) -> None:
        """Drop the connections as they are (a killed process's): no lease renewed, no job
        handed back. `close` ends with it; tests call it alone."""
        await self._stop_tasks()
        if self._outcomes_due is not None:
            self._outcomes_due.cancel()  # a killed process's outcomes are lost: run again
        self._outcomes_due, self._outcomes = None, []
        self._updates = self._enqueues = None
        pools = (self._pool, self._work)
        self._pool = self._work = None
        for pool in pools:
            if pool is not None:
                await pool.close()

    async def _stop_tasks(self) -> None:
        await self._stop_renewing()
        for task in (self._listener, self._announcing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._listener = self._announcing = None

    async def _stop_renewing(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None

    async def _renew(self) -> None:
        """The replica's heartbeat: one statement, every third of a lease, extends the leases
        of all its running jobs (however many: never one task or statement per job)."""
        while True:
            await asyncio.sleep(self._lease_s / 3)
            with contextlib.suppress(psycopg.Error):  # the next round tries again
                async with self._worker_pool().connection() as conn:
                    await conn.execute(
                        f"UPDATE jobs SET lease_until = {DB_NOW} + %s "  # noqa: S608 - constant SQL
                        "WHERE state = 'running' AND owner = %s",
                        (self._lease_s, self.owner),
                    )

    # -- waking other replicas ----------------------------------------------------------------

    async def listen(self, wake: Callable[[], None]) -> None:
        """Call `wake()` whenever another replica announces jobs it cannot run at once
        (`announce`): LISTEN on a connection of its own, reconnecting after a failure."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(wake), name="pairbot-store-listen")

    async def _listen(self, wake: Callable[[], None]) -> None:
        while True:
            try:
                async with await connect(self.url, self._connect_timeout_s) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    wake()  # announcements missed while (re)connecting: look once
                    async for notice in conn.notifies():
                        if notice.payload != self.owner:
                            wake()
            except psycopg.Error as err:
                log.warning("listening for other replicas' jobs failed (%s); retrying", err)
            await asyncio.sleep(1.0)  # the worker's poll covers the gap

    def announce(self) -> None:
        """Tell the other replicas that jobs wait which this one cannot run now (its worker is
        full). At most one announcement in flight and one per `ANNOUNCE_EVERY_S`: a burst of
        deliveries to a busy replica costs a handful of notifications, not one each."""
        now = time.monotonic()
        if self._pool is None or self._announcing is not None:
            return
        if now - self._announced_at < ANNOUNCE_EVERY_S:
            return
        self._announced_at = now
        self._announcing = asyncio.create_task(self._announce(), name="pairbot-store-announce")

    async def _announce(self) -> None:
        try:
            async with self._worker_pool().connection() as conn:
                await conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, self.owner))
        except (psycopg.Error, RuntimeError) as err:
            log.debug("could not announce queued jobs: %s", err)  # the others' poll finds them
        finally:
            self._announcing = None

    async def run_alone(self, name: str, body: Callable[[], Awaitable[T]]) -> T | None:
        """`body()` while no other replica runs a body of this `name`; None, without running
        it, when one does. A session advisory lock on one pooled connection, held for the
        body: a replica that dies drops its connection, and the lock with it."""
        async with self._connection().connection() as conn:
            cursor = await conn.execute(
                "SELECT pg_try_advisory_lock(hashtext(%s)) AS taken", (f"pairbot:{name}",)
            )
            row = await cursor.fetchone()
            if row is None or not row["taken"]:
                return None
            try:
                return await body()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"pairbot:{name}",))

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
        now = self._clock()
        # Encoded before the statement: a request that is not JSON writes nothing.
        requests = [json_text(job.request) for job in jobs]
        count = len(jobs)
        row = (source, delivery_id, event, action, delivery_status(count, count), status or "")
        delivery = (*row, count, now)
        if installation is not None or len({job.dedupe_key for job in jobs}) != count:
            # Rare (an installation event; one comment twice in a delivery): the general path.
            async with self._connection().connection() as conn:
                return await enqueue_in_transaction(conn, delivery, jobs, requests, installation)
        outcome = await self._deliveries().submit(
            new_delivery(delivery_id, jobs, requests, delivery)
        )
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is None:
            return None  # seen before, by this replica or another: nothing is written
        if outcome != count:
            # A job of this comment was queued by another delivery first: this record says so.
            # Its own statement, after the commit: a crash between the two leaves only this
            # record's status stale, never a job lost or doubled.
            async with self._connection().connection() as conn:
                await conn.execute(
                    "UPDATE deliveries SET status = %s, jobs = %s WHERE source = %s AND id = %s",
                    (delivery_status(count, outcome), outcome, source, delivery_id),
                )
        return outcome

    def _deliveries(self) -> Batcher[Delivery, Outcome]:
        if self._enqueues is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._enqueues

    async def _write_deliveries(self, batch: Sequence[Delivery]) -> list[Outcome]:
        """Deliveries, their jobs and commands in ONE statement and one durable commit; per
        delivery how many of its jobs were queued, None when it was seen before. A batch the
        database refuses is written again one delivery at a time, so each fails alone."""
        try:
            return await self._write_deliveries_now(batch)
        except psycopg.Error as error:
            if len(batch) == 1:
                return [error]
        outcomes: list[Outcome] = []
        for delivery in batch:
            try:
                outcomes += await self._write_deliveries_now([delivery])
            except psycopg.Error as error:
                outcomes.append(error)
        return outcomes

    async def _write_deliveries_now(self, batch: Sequence[Delivery]) -> list[Outcome]:
        async with self._connection().connection() as conn:
            return await write_deliveries(conn, batch)

    # -- the worker ---------------------------------------------------------------------------

    async def claim(self, limit: int, now: float) -> list[JobRecord]:
        if limit <= 0:
            return []
        values = {
            "stamp": self._clock(),
            "now": now,
            "limit": limit,
            "owner": self.owner,
            "lease": self._lease_s,
        }
        now_s = time.monotonic()
        expiring = now_s - self._expired_at >= EXPIRE_EVERY_S
        if expiring:
            self._expired_at = now_s
        outcomes = self._take_outcomes()
        try:
            async with self._worker_pool().connection() as conn:
                cursor = await conn.execute(
                    CLAIM_EXPIRING if expiring else CLAIM, {**values, **finishing(outcomes)}
                )
                return [job_record(row) for row in await cursor.fetchall()]
        except BaseException:
            # Not written, or not known to be: sent again (writing one twice changes nothing).
            self._defer(outcomes)
            raise

    async def advance(self, job_id: int, stage: str, command: CommandRecord | None = None) -> None:
        await self._bookkeeping().submit(
            Update(job_id, self._clock(), stage=stage, command=command)
        )

    async def finish(self, job_id: int, state: Literal["done", "failed"], result: str) -> None:
        """Recorded with the worker's next claim, its next statement: the job's slot is taken
        by the next job in the same round trip that ends this one. A claim that does not come
        within OUTCOME_WAIT_S leaves it to go alone. Like the worker's other bookkeeping it is
        not durable (`synchronous_commit = off`): a replica that dies before it is sent
        leaves the job running until its lease passes, then it runs again (at least once).
        This replica's own reads (`job`, `jobs`, `counts`) and prunes send it first, or wait
        for it if it is already on its way (`_outcomes_written`)."""
        self._bookkeeping()  # open, or raise as the other writes do
        self._defer([Update(job_id, self._clock(), state, result=result)])

    def _defer(self, outcomes: Sequence[Update]) -> None:
        if not outcomes or self._updates is None:
            return
        self._outcomes[:0] = [u for u in outcomes if u not in self._outcomes]
        if self._outcomes_due is None:
            loop = asyncio.get_running_loop()
            self._outcomes_due = loop.call_later(OUTCOME_WAIT_S, self._outcomes_alone)

    def _take_outcomes(self) -> list[Update]:
        if self._outcomes_due is not None:
            self._outcomes_due.cancel()
            self._outcomes_due = None
        taken, self._outcomes = self._outcomes, []
        return taken

    def _outcomes_alone(self) -> None:
        """No claim came: the outcomes go in the worker's group-committed updates."""
        self._outcomes_due = None
        task = asyncio.create_task(self._send_outcomes(), name="pairbot-store-outcomes")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _outcomes_written(self) -> None:
        """Every outcome this replica has recorded, written: those waiting for a claim sent
        now, and those already on their way (`_outcomes_alone`) waited for. A read must see
        them, and a prune's `FOR UPDATE SKIP LOCKED` would skip their rows while that write
        holds them."""
        await self._send_outcomes()
        if self._sending:
            await asyncio.wait(list(self._sending))

    async def _send_outcomes(self) -> None:
        outcomes = self._take_outcomes()
        if not outcomes:
            return
        try:
            await asyncio.gather(*(self._bookkeeping().submit(u) for u in outcomes))
        except (psycopg.Error, RuntimeError) as err:
            # As a replica that died: the jobs stay running until their lease passes.
            log.warning("could not record %d job outcomes (%s)", len(outcomes), err)

    async def retry_later(self, job_id: int, not_before: float, result: str) -> None:
        await self._bookkeeping().submit(
            Update(job_id, self._clock(), "queued", result=result, not_before=not_before)
        )

    async def record_command(self, job_id: int, record: CommandRecord) -> None:
        # A statement of its own, for a command answered instead of run (a refusal, a usage):
        # one that runs is kept with its stage (`advance`), in the same round trip. Like the
        # stages, not durable; a job undone by a crash reads its comment and writes it again.
        async with self._worker_pool().connection() as conn:
            await conn.execute(RECORD_COMMAND, (*record_values(record), job_id))

    def _bookkeeping(self) -> Batcher[Update, None]:
        if self._updates is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._updates

    async def _write_updates(self, updates: Sequence[Update]) -> list[None]:
        """The running jobs' stages and outcomes, however many, in one statement. Only while
        this replica holds a job: one whose lease ran out is another's now."""
        keeping = any(update.command is not None for update in updates)
        rows = [update.row(self.owner, keeping=keeping) for update in updates]
        statement, width = (
            (UPDATE_KEEPING, UPDATE_KEEPING_WIDTH) if keeping else (UPDATE, UPDATE_WIDTH)
        )
        async with self._worker_pool().connection() as conn:
            await conn.execute(statement, columns(rows, width))
        return [None] * len(updates)

    async def recover(self) -> int:
        """Queue again the running jobs whose replica's lease has passed (not every running
        job, as SQLite does: other replicas' jobs are alive); how many."""
        async with self._worker_pool().connection() as conn:
            return (await conn.execute(EXPIRE, (self._clock(),))).rowcount

    # -- reading ------------------------------------------------------------------------------

    async def job(self, job_id: int) -> JobRecord | None:
        await self._outcomes_written()
        async with self._connection().connection() as conn:
            found = await select_jobs(conn, [job_id])
        return found[0] if found else None

    async def jobs(self, limit: int = 100) -> list[JobRecord]:
        await self._outcomes_written()
        async with self._connection().connection() as conn:
            cursor = await conn.execute(f"{SELECT_JOBS} ORDER BY j.id DESC LIMIT %s", (limit,))
            return [job_record(row) for row in await cursor.fetchall()]

    async def counts(self) -> dict[str, int]:
        await self._outcomes_written()
        async with self._connection().connection() as conn:
            cursor = await conn.execute("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
            return job_counts((row["state"], row["n"]) for row in await cursor.fetchall())

    async def deliveries(self, limit: int = 50) -> list[DeliveryRecord]:
        async with self._connection().connection() as conn:
            cursor = await conn.execute(
                "SELECT source, id, event, action, status, note, received_at, jobs "
                "FROM deliveries ORDER BY received_at DESC, id LIMIT %s",
                (limit,),
            )
            rows = await cursor.fetchall()
        return [delivery_record(row) for row in rows]

    async def last_installation(self, repo: str) -> int | None:
        async with self._connection().connection() as conn:
            cursor = await conn.execute(
                "SELECT installation FROM jobs WHERE source = 'github' AND installation IS NOT "
                "NULL AND lower(repo) = lower(%s) ORDER BY id DESC LIMIT 1",
                (repo,),
            )
            row = await cursor.fetchone()
        return int(row["installation"]) if row is not None else None

    async def installations(self) -> list[InstallationRecord]:
        async with self._connection().connection() as conn:
            cursor = await conn.execute(
                "SELECT id, account, repos, suspended, updated_at FROM installations ORDER BY id"
            )
            rows = await cursor.fetchall()
        return [installation_record(row) for row in rows]

    # -- pruning ------------------------------------------------------------------------------

    async def prune_deliveries(self, before: float) -> int:
        pruned = 0
        while True:
            async with self._connection().connection() as conn:
                count = (
                    await conn.execute(
                        "DELETE FROM deliveries WHERE (source, id) IN (SELECT source, id FROM "
                        "deliveries WHERE received_at < %s ORDER BY received_at LIMIT %s)",
                        (before, self._prune_chunk),
                    )
                ).rowcount
            pruned += count
            if count < self._prune_chunk:
                return pruned

    async def prune_jobs(self, before: float) -> PrunedJobs:
        await self._outcomes_written()  # this replica's finished jobs are finished for it too
        pruned = PrunedJobs()
        while True:
            async with self._connection().connection() as conn, conn.transaction():
                cursor = await conn.execute(
                    "SELECT id FROM jobs WHERE state IN ('done', 'failed') AND created_at < %s "
                    "AND updated_at < %s ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                    (before, before, self._prune_chunk),
                )
                ids = [int(row["id"]) for row in await cursor.fetchall()]
                # Explicitly, though the foreign key cascades: so the count can be reported.
                commands = (
                    await conn.execute("DELETE FROM commands WHERE job_id = ANY(%s)", (ids,))
                ).rowcount
                jobs = (await conn.execute("DELETE FROM jobs WHERE id = ANY(%s)", (ids,))).rowcount
            pruned = PrunedJobs(pruned.jobs + jobs, pruned.commands + commands)
            if len(ids) < self._prune_chunk:
                return pruned
