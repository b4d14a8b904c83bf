"""`PostgresStore`: the App's store on a PostgreSQL server, for several `pairbot serve` replicas.

Selected by `PAIR_STORE=postgresql://…` (docs/app.md, Replicas on PostgreSQL); psycopg is an
optional extra (`pip install 'pairbot[postgres]'`) and only this module imports it.

- Every replica keeps two pools of connections (`psycopg_pool.AsyncConnectionPool`), each in
  autocommit mode: the edge's (and the status pages'), whose commits wait for the WAL on disk,
  and the worker's, whose bookkeeping commits do not (`synchronous_commit = off`: a crash of
  the server may undo its last fraction of a second, and those jobs run again — SqliteStore's
  `synchronous=NORMAL` for the same writes). A replica holds one more connection to LISTEN.
- Each hot operation is ONE statement, prepared once per connection with a generic plan, each
  of its lookups a probe of a primary key or a small partial index, however long the queue
  or the table's history (the statements' comments say why each has its shape).
- A delivery is recorded with `INSERT … ON CONFLICT DO NOTHING` on (source, id) in the same
  statement as its jobs and commands: two replicas handed one delivery id race on the primary
  key, the second waits for the first's commit and then inserts nothing. A job's `dedupe_key`
  is unique the same way, so a comment acts at most once across every replica. Deliveries
  that arrive while the previous write is out go together in the next statement and commit
  (group commit, app/store/batching.py), each with its own outcome; so do the worker's stage
  and outcome writes.
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
- The schema is migrated forward on `open()`: `MIGRATIONS` is a versioned list of DDL, applied
  in one transaction under an advisory lock (replicas starting together migrate once) and
  recorded in `schema_version`. A schema written by a newer pairbot is refused.
- `run_alone(name, body)`: the worker's ticks (`PAIR_EXECUTION=worker`) run on one replica at
  a time, under a session advisory lock; a replica whose tick finds the lock taken skips it.
- Timestamps (created, updated, received) come from the store's clock like SQLite's; leases
  use the database's clock, the one clock every replica shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import astuple, dataclass
from typing import Any, Literal, TypeVar, cast

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from app.errors import OperatorError
from app.store.base import (
    DeliveryRecord,
    InstallationChange,
    InstallationRecord,
    JobRecord,
    NewJob,
    PrunedJobs,
)
from app.store.batching import Batcher
from app.store.factory import redact_url
from app.store.rows import command_values, job_record, job_values, json_text

T = TypeVar("T")
_Pool = AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]
log = logging.getLogger(__name__)

PRUNE_CHUNK = 500  # rows per prune transaction, as in SqliteStore
WORKER_POOL_SIZE = 4  # the worker's statements are short and few at a time
NOTIFY_CHANNEL = "pairbot_jobs"
ANNOUNCE_EVERY_S = 0.05
EXPIRE_EVERY_S = 1.0  # a replica's claims look for expired leases at most this often
LEASE_S = 60.0  # a dead replica's running job is queued again this long after its last renewal
# The advisory lock key migrations run under (any constant; "pairbot" as ASCII bytes).
_MIGRATION_LOCK = 0x70616972626F74

# Each entry is one migration; its index + 1 is the version `schema_version` records.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE deliveries (
            source      TEXT NOT NULL,
            id          TEXT NOT NULL,
            event       TEXT NOT NULL,
            action      TEXT,
            status      TEXT NOT NULL,
            note        TEXT NOT NULL DEFAULT '',
            jobs        INTEGER NOT NULL DEFAULT 0,
            received_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (source, id)
        )
        """,
        "CREATE INDEX deliveries_received ON deliveries (received_at)",
        """
        CREATE TABLE jobs (
            id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            delivery_id  TEXT NOT NULL,
            kind         TEXT NOT NULL
                         CHECK (kind IN ('command', 'scope-decision', 'head-moved')),
            source       TEXT NOT NULL,
            repo         TEXT NOT NULL,
            installation BIGINT,
            target       TEXT NOT NULL CHECK (target IN ('card', 'pull')),
            number       INTEGER NOT NULL,
            dedupe_key   TEXT NOT NULL UNIQUE,
            serial_key   TEXT NOT NULL,
            request      TEXT NOT NULL,
            state        TEXT NOT NULL DEFAULT 'queued'
                         CHECK (state IN ('queued', 'running', 'done', 'failed')),
            stage        TEXT NOT NULL DEFAULT '',
            attempts     INTEGER NOT NULL DEFAULT 0,
            not_before   DOUBLE PRECISION NOT NULL DEFAULT 0,
            result       TEXT NOT NULL DEFAULT '',
            created_at   DOUBLE PRECISION NOT NULL,
            updated_at   DOUBLE PRECISION NOT NULL,
            owner        TEXT NOT NULL DEFAULT '',
            lease_until  DOUBLE PRECISION NOT NULL DEFAULT 0
        )
        """,
        # Open jobs only: finished ones stay for the record but out of the queue's indexes.
        "CREATE INDEX jobs_open ON jobs (serial_key, id) WHERE state IN ('queued', 'running')",
        "CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued'",
        "CREATE INDEX jobs_running ON jobs (owner, lease_until) WHERE state = 'running'",
        "CREATE INDEX jobs_repo ON jobs (lower(repo), id)",
        """
        CREATE TABLE commands (
            job_id       BIGINT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
            repo         TEXT NOT NULL,
            number       INTEGER NOT NULL,
            verb         TEXT NOT NULL,
            args         TEXT NOT NULL,
            author_id    TEXT NOT NULL,
            author_login TEXT NOT NULL,
            comment_id   TEXT NOT NULL,
            comment_url  TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE installations (
            id         BIGINT PRIMARY KEY,
            account    TEXT NOT NULL,
            repos      TEXT NOT NULL DEFAULT '[]',
            suspended  BOOLEAN NOT NULL DEFAULT FALSE,
            updated_at DOUBLE PRECISION NOT NULL
        )
        """,
    ),
    (
        # The claim's two tests per candidate job, each one probe of a small partial index:
        # the oldest queued job of its key (jobs_queued_key), nothing of its key running
        # (jobs_running_key). They replace jobs_open and jobs_running: with those, a plan
        # could hash the whole table for the first test, and read every running job's entry
        # for the second. The lease statements that read running jobs by owner or by lease run
        # once a second at most.
        "CREATE INDEX jobs_queued_key ON jobs (serial_key, id) WHERE state = 'queued'",
        "CREATE INDEX jobs_running_key ON jobs (serial_key) WHERE state = 'running'",
        "DROP INDEX jobs_open",
        "DROP INDEX jobs_running",
    ),
)

_DB_NOW = "extract(epoch FROM clock_timestamp())"
# Running jobs whose replica stopped renewing their lease go back to the queue.
_EXPIRE = (
    "UPDATE jobs SET state = 'queued', not_before = 0, owner = '', updated_at = %s "  # noqa: S608 - constant SQL
    f"WHERE state = 'running' AND lease_until < {_DB_NOW}"
)
_JOB_COLUMNS = """
    j.id, j.delivery_id, j.kind, j.source, j.repo, j.installation, j.target, j.number,
    j.request, j.state, j.stage, j.attempts, j.not_before, j.result, j.created_at,
    j.updated_at
"""
# One statement, one round trip, whatever the backlog: `picked` is SqliteStore's claim
# (queued and due, the oldest queued job of its key, nothing of its key running), walked
# oldest first through the jobs_queued index and stopped at the limit, each test one probe
# (the first a correlated subquery with LIMIT 1, which no plan turns into a hash of the
# table; `<=` means `=` there, as the job is itself a queued job of its key, but leaves the
# planner expecting many heads of keys, so it walks in order and stops early);
# SKIP LOCKED leaves a job another replica is claiming right now to it. The claimed rows
# and their commands' verbs are found by primary key (`= ANY(ARRAY(…))`, a scalar subquery):
# a generic plan would otherwise hash-join them with a scan of the whole table.
_CLAIM_PICK = f"""
    picked AS (
        SELECT j.id FROM jobs AS j
        WHERE j.state = 'queued' AND j.not_before <= %(now)s
          AND j.id <= (
              SELECT e.id FROM jobs AS e
              WHERE e.state = 'queued' AND e.serial_key = j.serial_key
              ORDER BY e.id LIMIT 1)
          AND NOT EXISTS (
              SELECT 1 FROM jobs AS r
              WHERE r.state = 'running' AND r.serial_key = j.serial_key)
        ORDER BY j.id
        LIMIT %(limit)s
        FOR UPDATE OF j SKIP LOCKED
    ), j AS (
        UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = %(stamp)s,
               owner = %(owner)s, lease_until = {_DB_NOW} + %(lease)s
        WHERE jobs.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING jobs.*
    )
    SELECT {_JOB_COLUMNS}, (SELECT c.verb FROM commands AS c WHERE c.job_id = j.id) AS verb
    FROM j ORDER BY j.id
"""  # noqa: S608 - constant SQL
_CLAIM = f"WITH {_CLAIM_PICK}"
# A claim that also queues again the jobs of a replica that stopped renewing its lease (they
# are claimable from the next claim on, by any replica). Sent at most once per EXPIRE_EVERY_S
# by each replica: it reads every running job's index entry. `expired` and `picked` never
# touch one row: `picked` reads queued jobs, `expired` running ones, in one snapshot.
_CLAIM_EXPIRING = f"""
    WITH expired AS (
        UPDATE jobs SET state = 'queued', not_before = 0, owner = '', updated_at = %(stamp)s
        WHERE state = 'running' AND lease_until < {_DB_NOW}
    ), {_CLAIM_PICK}
"""  # noqa: S608 - constant SQL
_SELECT_JOBS = (
    f"SELECT {_JOB_COLUMNS}, c.verb FROM jobs AS j LEFT JOIN commands AS c ON c.job_id = j.id"  # noqa: S608 - constant SQL
)


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
        self._pool: _Pool | None = None
        self._work: _Pool | None = None
        self._renewer: asyncio.Task[None] | None = None
        # The worker's stage and outcome writes, group-committed (app/store/batching.py).
        self._updates: Batcher[_Update, None] | None = None
        # Deliveries too, each batch one durable commit: SqliteStore's group commit.
        self._enqueues: Batcher[_Delivery, _Outcome] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._announcing: asyncio.Task[None] | None = None
        self._announced_at = float("-inf")
        self._expired_at = float("-inf")

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r})"

    # -- plumbing -----------------------------------------------------------------------------

    def _connection(self) -> _Pool:
        if self._pool is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._pool

    def _worker_pool(self) -> _Pool:
        if self._work is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._work

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout_s))
            )
        except psycopg.Error as err:
            reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            raise OperatorError(
                f"PAIR_STORE: cannot connect to PostgreSQL at {redact_url(self.url)}: {reason}"
            ) from None
        async with conn:
            await _migrate(conn, redact_url(self.url))
        edge = self._new_pool("pairbot-store", self._pool_size, durable=True)
        work = self._new_pool("pairbot-worker", WORKER_POOL_SIZE, durable=False)
        try:
            await edge.open(wait=True, timeout=self._connect_timeout_s)
            await work.open(wait=True, timeout=self._connect_timeout_s)
        except BaseException:
            await edge.close()
            await work.close()
            raise
        self._pool, self._work = edge, work
        self._updates = Batcher(self._write_updates, conflicts=_same_job)
        self._enqueues = Batcher(self._write_deliveries, conflicts=_same_delivery)
        self._renewer = asyncio.create_task(self._renew(), name="pairbot-store-leases")

    def _new_pool(self, name: str, size: int, *, durable: bool) -> _Pool:
        async def configure(conn: psycopg.AsyncConnection[DictRow]) -> None:
            # A delivery's commit waits for the WAL on disk: answered 2xx, it survives a crash
            # of the database server. The worker's bookkeeping (claim, stage, outcome, leases)
            # does not, as SqliteStore's does not: a crash of the server may undo its last
            # fraction of a second, and those jobs run again (at least once). JIT off: the
            # queue's statements are index probes, never worth compiling. Generic plans: each
            # statement is planned once per connection, not on each of its first five runs
            # (its plan does not depend on the values: every lookup is by key or partial index).
            sync = "on" if durable else "off"
            await conn.execute(
                f"SET synchronous_commit = {sync}; SET jit = off; "
                "SET plan_cache_mode = force_generic_plan",
                prepare=False,
            )

        return AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=size,
            # Every statement is prepared on its first run: the edge's and the worker's run
            # thousands of times, and a prepared one skips the parse and plan.
            kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0},
            configure=configure,
            open=False,
            name=name,
        )

    async def close(self) -> None:
        """Stop renewing leases and listening; queue this replica's unfinished jobs again."""
        if self._work is None:
            return
        await self._stop_tasks()
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
                        f"UPDATE jobs SET lease_until = {_DB_NOW} + %s "  # noqa: S608 - constant SQL
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
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout_s))
                ) as conn:
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
    ) -> bool:
        now = self._clock()
        # Encoded before the statement: a request that is not JSON writes nothing.
        requests = [json_text(job.request) for job in jobs]
        delivery = (
            source,
            delivery_id,
            event,
            action,
            "queued" if jobs else "ignored",
            status or "",
            len(jobs),
            now,
        )
        if installation is not None or len({job.dedupe_key for job in jobs}) != len(jobs):
            # Rare (an installation event; one comment twice in a delivery): the general path.
            return await self._enqueue_in_transaction(delivery, jobs, requests, installation)
        jobs_rows = [
            job_values(delivery_id, job, request, now)
            for job, request in zip(jobs, requests, strict=True)
        ]
        commands = []
        for job in jobs:
            command = command_values(0, job)
            if command is not None:
                commands.append((delivery_id, job.dedupe_key, *command[1:]))
        outcome = await self._deliveries().submit(
            _Delivery(delivery, tuple(jobs_rows), tuple(commands))
        )
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is None:
            return False  # seen before, by this replica or another: nothing is written
        if outcome != len(jobs):
            # A job of this comment was queued by another delivery first: this record says so.
            # Its own statement, after the commit: a crash between the two leaves only this
            # record's status stale, never a job lost or doubled.
            async with self._connection().connection() as conn:
                await conn.execute(
                    "UPDATE deliveries SET status = %s, jobs = %s WHERE source = %s AND id = %s",
                    ("queued" if outcome else "already-queued", outcome, source, delivery_id),
                )
        return True

    def _deliveries(self) -> Batcher[_Delivery, _Outcome]:
        if self._enqueues is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._enqueues

    async def _write_deliveries(self, batch: Sequence[_Delivery]) -> list[_Outcome]:
        """Deliveries, their jobs and commands in ONE statement and one durable commit; per
        delivery how many of its jobs were queued, None when it was seen before. A batch the
        database refuses is written again one delivery at a time, so each fails alone."""
        try:
            return await self._write_deliveries_now(batch)
        except psycopg.Error as error:
            if len(batch) == 1:
                return [error]
        outcomes: list[_Outcome] = []
        for delivery in batch:
            try:
                outcomes += await self._write_deliveries_now([delivery])
            except psycopg.Error as error:
                outcomes.append(error)
        return outcomes

    async def _write_deliveries_now(self, batch: Sequence[_Delivery]) -> list[_Outcome]:
        deliveries = _columns([delivery.row for delivery in batch], 8)
        jobs = _columns(
            [(n, *row) for n, row in enumerate(row for d in batch for row in d.jobs)], 13
        )
        commands = _columns([row for delivery in batch for row in delivery.commands], 10)
        async with self._connection().connection() as conn:
            cursor = await conn.execute(_ENQUEUE, [*deliveries, *jobs, *commands])
            queued = {str(row["id"]): int(row["queued"]) for row in await cursor.fetchall()}
        return [queued.get(delivery.row[1]) for delivery in batch]

    async def _enqueue_in_transaction(
        self,
        delivery: tuple[Any, ...],
        jobs: Sequence[NewJob],
        requests: Sequence[str],
        installation: InstallationChange | None,
    ) -> bool:
        source, delivery_id, now = delivery[0], delivery[1], delivery[-1]
        async with self._connection().connection() as conn, conn.transaction():
            inserted = await conn.execute(
                "INSERT INTO deliveries (source, id, event, action, status, note, jobs, "
                "received_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                delivery,
            )
            if not inserted.rowcount:
                return False  # seen before, by this replica or another: nothing is written
            queued = 0
            for job, request in zip(jobs, requests, strict=True):
                queued += await _insert_job(conn, delivery_id, job, request, now)
            if queued != len(jobs):  # a job of this comment was queued by another delivery
                await conn.execute(
                    "UPDATE deliveries SET status = %s, jobs = %s WHERE source = %s AND id = %s",
                    ("queued" if queued else "already-queued", queued, source, delivery_id),
                )
            if installation is not None:
                await _apply_installation(conn, installation, now)
            return True

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
        async with self._worker_pool().connection() as conn:
            cursor = await conn.execute(_CLAIM_EXPIRING if expiring else _CLAIM, values)
            return [job_record(row) for row in await cursor.fetchall()]

    async def advance(self, job_id: int, stage: str) -> None:
        await self._bookkeeping().submit(_Update(job_id, self._clock(), stage=stage))

    async def finish(self, job_id: int, state: Literal["done", "failed"], result: str) -> None:
        await self._bookkeeping().submit(_Update(job_id, self._clock(), state, result=result))

    async def retry_later(self, job_id: int, not_before: float, result: str) -> None:
        await self._bookkeeping().submit(
            _Update(job_id, self._clock(), "queued", result=result, not_before=not_before)
        )

    def _bookkeeping(self) -> Batcher[_Update, None]:
        if self._updates is None:
            raise RuntimeError("PostgresStore.open() was not called (or close() was)")
        return self._updates

    async def _write_updates(self, updates: Sequence[_Update]) -> list[None]:
        """The running jobs' stages and outcomes, however many, in one statement. Only while
        this replica holds a job: one whose lease ran out is another's now."""
        columns = _columns([(*astuple(update), self.owner) for update in updates], 7)
        async with self._worker_pool().connection() as conn:
            await conn.execute(_UPDATE, columns)
        return [None] * len(updates)

    async def recover(self) -> int:
        """Queue again the running jobs whose replica's lease has passed (not every running
        job, as SQLite does: other replicas' jobs are alive); how many."""
        async with self._worker_pool().connection() as conn:
            return (await conn.execute(_EXPIRE, (self._clock(),))).rowcount

    # -- reading ------------------------------------------------------------------------------

    async def job(self, job_id: int) -> JobRecord | None:
        async with self._connection().connection() as conn:
            found = await _select(conn, [job_id])
        return found[0] if found else None

    async def jobs(self, limit: int = 100) -> list[JobRecord]:
        async with self._connection().connection() as conn:
            cursor = await conn.execute(f"{_SELECT_JOBS} ORDER BY j.id DESC LIMIT %s", (limit,))
            return [job_record(row) for row in await cursor.fetchall()]

    async def counts(self) -> dict[str, int]:
        async with self._connection().connection() as conn:
            cursor = await conn.execute("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
            found = {str(row["state"]): int(row["n"]) for row in await cursor.fetchall()}
        return {state: found.get(state, 0) for state in ("queued", "running", "done", "failed")}

    async def deliveries(self, limit: int = 50) -> list[DeliveryRecord]:
        async with self._connection().connection() as conn:
            cursor = await conn.execute(
                "SELECT source, id, event, action, status, note, received_at, jobs "
                "FROM deliveries ORDER BY received_at DESC, id LIMIT %s",
                (limit,),
            )
            rows = await cursor.fetchall()
        return [
            DeliveryRecord(
                source=row["source"],
                id=row["id"],
                event=row["event"],
                action=row["action"],
                status=row["status"] + (f": {row['note']}" if row["note"] else ""),
                received_at=row["received_at"],
                jobs=row["jobs"],
            )
            for row in rows
        ]

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
        return [
            InstallationRecord(
                id=row["id"],
                account=row["account"],
                repos=tuple(json.loads(row["repos"])),
                suspended=bool(row["suspended"]),
                updated_at=row["updated_at"],
            )
            for row in rows
        ]

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


@dataclass(frozen=True)
class _Update:
    """A running job's new stage, or its outcome (None: that column stays)."""

    job_id: int
    stamp: float
    state: str | None = None
    stage: str | None = None
    result: str | None = None
    not_before: float | None = None


# However many jobs' updates, as arrays: ONE statement text, prepared once per connection and
# planned once (a text per batch size would be prepared and planned per size and connection).
# A job put back in the queue (`state = 'queued'`) leaves this replica (`owner = ''`). Each
# job is found by its primary key: the owner is compared row by row, so the plan cannot walk
# the running-jobs index by owner instead (and every dead entry left there since the last
# vacuum).
_UPDATE = (
    "UPDATE jobs SET state = coalesce(v.state, jobs.state), "
    "stage = coalesce(v.stage, jobs.stage), result = coalesce(v.result, jobs.result), "
    "not_before = coalesce(v.not_before, jobs.not_before), "
    "owner = CASE WHEN v.state = 'queued' THEN '' ELSE jobs.owner END, updated_at = v.stamp "
    "FROM unnest(%s::bigint[], %s::float8[], %s::text[], %s::text[], %s::text[], "
    "%s::float8[], %s::text[]) AS v (id, stamp, state, stage, result, not_before, owner) "
    "WHERE jobs.id = v.id AND jobs.state = 'running' AND jobs.owner = v.owner"
)


def _same_job(a: _Update, b: _Update) -> bool:
    return a.job_id == b.job_id


@dataclass(frozen=True)
class _Delivery:
    """A delivery to record: its row, its jobs' rows and its commands' rows."""

    row: tuple[Any, ...]  # source, id, event, action, status, note, jobs, received_at
    jobs: tuple[tuple[Any, ...], ...]  # rows.job_values
    commands: tuple[tuple[Any, ...], ...]  # delivery id, dedupe key, rows.command_values[1:]


# How many jobs of a delivery were queued; None: seen before; an error: refused alone.
_Outcome = int | None | psycopg.Error


def _same_delivery(a: _Delivery, b: _Delivery) -> bool:
    # By id alone (whatever the source): the statement tells its deliveries apart by id.
    return bool(a.row[1] == b.row[1])


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows as `width` column lists: the arrays `unnest` turns back into rows."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


# Deliveries, their jobs and their commands — however many — in ONE statement (one round
# trip, one durable commit), their columns as arrays: one text, prepared and planned once per
# connection. A delivery's jobs are inserted only when the delivery is new, a job only when
# its dedupe key is (the first in queue order wins), a command only with its job. Answers
# each new delivery's id and how many of its jobs were queued.
_ENQUEUE = """
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


async def _migrate(conn: psycopg.AsyncConnection[Any], where: str) -> None:
    """Apply the migrations this database has not seen, in one transaction under an advisory
    lock: replicas starting at once wait for each other, and the second finds nothing to do."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = await (await conn.execute("SELECT max(version) FROM schema_version")).fetchone()
        version = int(row[0]) if row is not None and row[0] is not None else 0
        if version > len(MIGRATIONS):
            raise OperatorError(
                f"{where}: the store's schema version is {version}, newer than this pairbot "
                f"knows ({len(MIGRATIONS)}); run the pairbot that wrote it, or point PAIR_STORE "
                "elsewhere"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            for statement in MIGRATIONS[number - 1]:
                await conn.execute(cast(Any, statement))
            await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (number,))


async def _insert_job(
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


async def _apply_installation(
    conn: psycopg.AsyncConnection[DictRow], change: InstallationChange, now: float
) -> None:
    if change.deleted:
        await conn.execute("DELETE FROM installations WHERE id = %s", (change.id,))
        return
    cursor = await conn.execute(
        "SELECT account, repos, suspended FROM installations WHERE id = %s FOR UPDATE",
        (change.id,),
    )
    row = await cursor.fetchone()
    old_repos: list[str] = json.loads(row["repos"]) if row is not None else []
    repos = list(change.repos) if change.repos is not None else old_repos
    repos += [repo for repo in change.added if repo not in repos]
    repos = [repo for repo in repos if repo not in change.removed]
    account = change.account or (row["account"] if row is not None else "")
    suspended = (
        change.suspended
        if change.suspended is not None
        else bool(row["suspended"])
        if row is not None
        else False
    )
    await conn.execute(
        "INSERT INTO installations (id, account, repos, suspended, updated_at) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET account = excluded.account, "
        "repos = excluded.repos, suspended = excluded.suspended, updated_at = excluded.updated_at",
        (change.id, account, json.dumps(sorted(repos)), suspended, now),
    )


async def _select(conn: psycopg.AsyncConnection[DictRow], ids: Sequence[int]) -> list[JobRecord]:
    cursor = await conn.execute(
        f"{_SELECT_JOBS} WHERE j.id = ANY(%s) ORDER BY j.id",
        (list(ids),),
    )
    return [job_record(row) for row in await cursor.fetchall()]
