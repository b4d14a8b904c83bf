"""`SqliteStore`: the App's store in one SQLite file, the embedded default (docs/app.md, The store).

- WAL mode (the status page reads while the edge writes), a busy timeout (a second connection
  waits for the write lock instead of failing), a delivery's commit `synchronous=FULL` (a
  delivery answered 2xx survives a power cut, not only a process crash), foreign keys on.
- The schema is migrated forward on `open()`: `PRAGMA user_version` counts the migrations
  applied; each runs in its own transaction, so a crash mid-migration leaves the old schema.
  A store written by a newer pairbot is refused (an operator error), never downgraded.
- The stdlib `sqlite3` is blocking, and only one part of it is slow: the fsync of a durable
  COMMIT. That runs in a worker thread (`run_in_executor`); the statements themselves take
  microseconds and run on the event loop's thread. Handing every statement to a thread costs
  more than it saves: each `execute` there releases the GIL for the SQLite call and must win it
  back from the busy event loop (up to the 5 ms switch interval), which capped a loaded
  server at a few hundred deliveries a second. One connection; an asyncio lock (per event
  loop) orders its users and a threading lock keeps other threads out, COMMIT included.
- Group commit: deliveries that arrive while a COMMIT is on disk share the next one — one
  fsync per burst. The batch is written straight into its `BEGIN IMMEDIATE` transaction, with
  no SAVEPOINT per delivery: a savepoint copies every page its delivery touches first to the
  statement journal, for a rollback that almost never comes. If a delivery does fail, the
  whole transaction is rolled back and the batch written again with a SAVEPOINT each, so each
  delivery still succeeds or fails alone, with the outcome a savepoint each would have had.
  Measured on this edge (3,000 deliveries of one command job, 16 at a time, uvloop): about
  15% less CPU per delivery (77 → 65 µs; 139 → 124 µs against a store of 200,000 rows),
  from the savepoints and from a shielded future per delivery. Measured and left out: an
  `executemany` of the batch after a SELECT for seen ids (slower than `INSERT … ON CONFLICT DO
  NOTHING` and its rowcount), a larger statement cache (the edge runs a handful), a later
  WAL checkpoint threshold and a larger page cache (no gain; 64 MB cost more), dropping the
  `deliveries_received` index (no measurable gain even dropped outright; the status page and
  the prune read it, and a rowid table would need a (source, id) index instead), and a COMMIT
  on the loop's thread (~7 µs less, but the loop would stop reading requests for the fsync);
  and the claim as one `UPDATE … WHERE id IN (<claim>) RETURNING …` (a job's claim, stage and
  outcome took 88-93 µs of CPU instead of 71-72).
- Prunes delete in chunks of `PRUNE_CHUNK` rows, each its own short transaction, so the edge
  never waits long for the write lock. Finished jobs go with their commands rows; queued and
  running jobs are never pruned.
- The worker's bookkeeping (claim, stage, outcome) commits without waiting for the disk
  (`synchronous=NORMAL`, the connection's default): a power cut may undo it, and the job then
  runs again (at least once). The stages and outcomes written in one turn of the event loop
  share one transaction (the worker's jobs run side by side and reach them together: four
  jobs, one commit instead of four); a statement that fails still fails alone.
- WAL checkpoints run in the durable commit's thread (`CHECKPOINT_EVERY`), not inside
  whichever statement SQLite's own threshold lands on.
- A delivery's commit is `synchronous=FULL`: a delivery answered 2xx is on disk first.
- Writes use `BEGIN IMMEDIATE`: the write lock is taken up front, so two processes cannot
  both read "not seen" for one delivery id and then both insert it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from app.errors import OperatorError
from app.store.base import (
    DeliveryRecord,
    InstallationChange,
    InstallationRecord,
    JobRecord,
    NewJob,
    PrunedJobs,
)
from app.store.rows import command_values, job_record, job_values, json_text

T = TypeVar("T")

# Rows a prune reads and deletes in one transaction. The edge waits on the write lock (and a
# prune runs on the event loop's thread), so a prune of a large backlog is many short
# transactions, never one long one. Measured on a store of 200,000 deliveries and finished
# jobs: 500 rows take about 5 ms for jobs and 15 ms for deliveries (their random ids touch a
# page each); 2,000 took 20-50 ms, the order of the edge's latency target.
PRUNE_CHUNK = 500

# SQLite checkpoints its WAL from inside the COMMIT that crosses `wal_autocheckpoint` pages
# (1,000 by default) — more often than not a worker's bookkeeping statement on the event loop's
# thread, which then stopped serving requests for the checkpoint's fsyncs (5 ms each, about
# every 50 command deliveries: 60 such stalls, 360 ms, in 3,000). The durable commit's thread
# checkpoints instead, passively, every `CHECKPOINT_EVERY` commits (a few hundred pages under
# load; the WAL file keeps its size once grown, so its size says nothing); SQLite's own stays
# as a backstop, at a size only a worker writing with no delivery arriving can reach.
CHECKPOINT_EVERY = 32
AUTOCHECKPOINT_PAGES = 10_000

# Each entry is one migration; its index + 1 is the `user_version` it leaves behind.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE deliveries (
        source      TEXT NOT NULL,
        id          TEXT NOT NULL,
        event       TEXT NOT NULL,
        action      TEXT,
        status      TEXT NOT NULL,
        note        TEXT NOT NULL DEFAULT '',
        jobs        INTEGER NOT NULL DEFAULT 0,
        received_at REAL NOT NULL,
        PRIMARY KEY (source, id)
    ) WITHOUT ROWID;
    CREATE INDEX deliveries_received ON deliveries (received_at);

    CREATE TABLE jobs (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id  TEXT NOT NULL,
        kind         TEXT NOT NULL CHECK (kind IN ('command', 'scope-decision', 'head-moved')),
        source       TEXT NOT NULL,
        repo         TEXT NOT NULL,
        installation INTEGER,
        target       TEXT NOT NULL CHECK (target IN ('card', 'pull')),
        number       INTEGER NOT NULL,
        dedupe_key   TEXT NOT NULL UNIQUE,
        serial_key   TEXT NOT NULL,
        request      TEXT NOT NULL,
        state        TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed')),
        stage        TEXT NOT NULL DEFAULT '',
        attempts     INTEGER NOT NULL DEFAULT 0,
        not_before   REAL NOT NULL DEFAULT 0,
        result       TEXT NOT NULL DEFAULT '',
        created_at   REAL NOT NULL,
        updated_at   REAL NOT NULL
    );
    CREATE INDEX jobs_queue ON jobs (state, serial_key, id);

    CREATE TABLE commands (
        job_id       INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
        repo         TEXT NOT NULL,
        number       INTEGER NOT NULL,
        verb         TEXT NOT NULL,
        args         TEXT NOT NULL,
        author_id    TEXT NOT NULL,
        author_login TEXT NOT NULL,
        comment_id   TEXT NOT NULL,
        comment_url  TEXT NOT NULL
    );

    CREATE TABLE installations (
        id         INTEGER PRIMARY KEY,
        account    TEXT NOT NULL,
        repos      TEXT NOT NULL DEFAULT '[]',
        suspended  INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    );
    """,
    # The queue's indexes cover open jobs only. Finished jobs stay in the table for the record
    # but leave these indexes, which so stay a few pages; finishing a job used to rewrite pages
    # of an index over every job ever run.
    """
    DROP INDEX jobs_queue;
    CREATE INDEX jobs_open ON jobs (state, serial_key, id)
        WHERE state IN ('queued', 'running');
    CREATE INDEX jobs_open_order ON jobs (state)
        WHERE state IN ('queued', 'running');
    """,
)

# A job is claimable when it is queued and due, nothing of its serial key is running, and no
# older job of its key is still queued (a key's jobs run in queue order; a head waiting for its
# retry time holds back the jobs behind it). The queued jobs are walked oldest first through
# jobs_open_order and the walk stops at `limit`, so a claim costs about the same with three
# jobs queued or three thousand (the query before it grouped every queued job on each claim).
# `state IN ('queued', 'running')` repeats the partial indexes' condition: SQLite uses a
# partial index only for a query whose WHERE names that condition itself.
_CLAIM = """
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
_SELECT_JOBS = f"SELECT {_JOB_COLUMNS} FROM jobs AS j LEFT JOIN commands AS c ON c.job_id = j.id"  # noqa: S608 - constant SQL


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
        self._commits = 0
        self._clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        self._prune_chunk = prune_chunk
        self._lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._conn: sqlite3.Connection | None = None
        self._pending: list[_Enqueue] = []
        self._flusher: asyncio.Task[None] | None = None
        self._updates: list[_Update] = []
        self._updater: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- plumbing -----------------------------------------------------------------------------

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._loop_locks.get(loop)
        if lock is None:
            lock = self._loop_locks[loop] = asyncio.Lock()
        return lock

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("SqliteStore.open() was not called (or close() was)")
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` on the loop's thread (statements only; nothing here waits for the disk)."""
        async with self._loop_lock():
            with self._lock:
                return fn(self._connection())

    async def _run_durable(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a write transaction whose COMMIT waits for the disk (`synchronous=FULL`),
        in a worker thread."""
        async with self._loop_lock():
            with self._lock:
                conn = self._connection()
                conn.execute("PRAGMA synchronous = FULL")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(conn)
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
                    # Submitted now, not when a task would first run: another connection's
                    # BEGIN on this thread must find this COMMIT already on its way.
                    loop = asyncio.get_running_loop()
                    commit = loop.run_in_executor(None, self._commit, conn)
                    try:
                        # Never leave the connection while the thread is using it, even if
                        # this task is cancelled meanwhile.
                        await asyncio.shield(commit)
                    except asyncio.CancelledError:
                        await asyncio.wait([commit])
                        raise
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                    return result
                finally:
                    conn.execute("PRAGMA synchronous = NORMAL")

    def _commit(self, conn: sqlite3.Connection) -> None:
        """A durable COMMIT and, every `CHECKPOINT_EVERY` of them, a passive checkpoint —
        both in the commit's worker thread, never on the event loop's."""
        conn.execute("COMMIT")
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    @staticmethod
    @contextmanager
    def _write(conn: sqlite3.Connection) -> Iterator[None]:
        """A write transaction of the worker's bookkeeping: it commits without waiting for the
        disk (see the module docstring); in WAL mode the next durable COMMIT syncs it too."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def open(self) -> None:
        self._open()

    def _open(self) -> None:
        with self._lock:
            if self._conn is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path),
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,  # transactions are explicit (BEGIN IMMEDIATE … COMMIT)
                check_same_thread=False,  # used from worker threads, one at a time (the lock)
            )
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise OperatorError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
                # NORMAL by default (the worker's bookkeeping); a delivery's commit is FULL.
                conn.execute("PRAGMA synchronous = NORMAL")
                # Checkpoints run in the durable commit's thread (`_commit`); SQLite's own, at
                # this many pages, only if no delivery commits while the worker writes.
                conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
                conn.execute("PRAGMA foreign_keys = ON")
                _migrate(conn, self.path)
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher])  # answer every delivery already handed over
        if self._updater is not None and not self._updater.done():
            await asyncio.wait([self._updater])  # and write the bookkeeping already handed over
        self._close()

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

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
        loop = asyncio.get_running_loop()
        item = _Enqueue(
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
            results: list[bool | Exception]
            try:
                try:
                    results = await self._run_durable(
                        functools.partial(_enqueue_all, batch=batch, now=now)
                    )
                except _BatchFailed:
                    results = await self._run_durable(
                        functools.partial(_enqueue_each, batch=batch, now=now)
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
        stamp = self._clock()

        def claim(conn: sqlite3.Connection) -> list[JobRecord]:
            with self._write(conn):
                ids = [row[0] for row in conn.execute(_CLAIM, (now, limit))]
                conn.executemany(
                    "UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = ? "
                    "WHERE id = ?",
                    [(stamp, job_id) for job_id in ids],
                )
                return _select(conn, ids)

        return await self._run(claim)

    async def advance(self, job_id: int, stage: str) -> None:
        await self._update(job_id, "stage = ?", (stage,))

    async def finish(self, job_id: int, state: Literal["done", "failed"], result: str) -> None:
        await self._update(job_id, "state = ?, result = ?", (state, result))

    async def retry_later(self, job_id: int, not_before: float, result: str) -> None:
        await self._update(
            job_id, "state = 'queued', not_before = ?, result = ?", (not_before, result)
        )

    async def _update(self, job_id: int, assignments: str, values: tuple[Any, ...]) -> None:
        """One job's bookkeeping, committed with every other update made in the same turn of
        the event loop (`_apply_updates`): the worker's jobs run side by side and reach their
        stage and their outcome together, so one transaction serves them all."""
        loop = asyncio.get_running_loop()
        update = _Update(
            f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ?",  # noqa: S608 - constant SQL
            (*values, self._clock(), job_id),
            loop.create_future(),
        )
        self._updates.append(update)
        updater = self._updater
        if updater is None or updater.done() or updater.get_loop() is not loop:
            self._updater = loop.create_task(self._apply_updates(), name="pairbot-store-updates")
        await update.future

    async def _apply_updates(self) -> None:
        while self._updates:
            batch, self._updates = self._updates, []
            try:
                await self._run(functools.partial(_update_all, batch=batch))
            except Exception as err:  # BEGIN or COMMIT failed: none of the batch stuck
                for update in batch:
                    if not update.future.done():
                        update.future.set_exception(err)

    async def recover(self) -> int:
        stamp = self._clock()

        def recover(conn: sqlite3.Connection) -> int:
            with self._write(conn):
                return conn.execute(
                    "UPDATE jobs SET state = 'queued', not_before = 0, updated_at = ? "
                    "WHERE state IN ('queued', 'running') AND state = 'running'",  # see _CLAIM
                    (stamp,),
                ).rowcount

        return await self._run(recover)

    # -- reading ------------------------------------------------------------------------------

    async def job(self, job_id: int) -> JobRecord | None:
        found = await self._run(lambda conn: _select(conn, [job_id]))
        return found[0] if found else None

    async def jobs(self, limit: int = 100) -> list[JobRecord]:
        def jobs(conn: sqlite3.Connection) -> list[JobRecord]:
            rows = conn.execute(f"{_SELECT_JOBS} ORDER BY j.id DESC LIMIT ?", (limit,))
            return [job_record(row) for row in rows]

        return await self._run(jobs)

    async def counts(self) -> dict[str, int]:
        def counts(conn: sqlite3.Connection) -> dict[str, int]:
            # A scan of the table (no index holds finished jobs): the status page's query,
            # never on the edge's or the worker's path.
            rows = conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")
            found = {str(state): int(count) for state, count in rows}
            return {state: found.get(state, 0) for state in ("queued", "running", "done", "failed")}

        return await self._run(counts)

    async def deliveries(self, limit: int = 50) -> list[DeliveryRecord]:
        def deliveries(conn: sqlite3.Connection) -> list[DeliveryRecord]:
            rows = conn.execute(
                "SELECT source, id, event, action, status, note, received_at, jobs "
                "FROM deliveries ORDER BY received_at DESC, id LIMIT ?",
                (limit,),
            )
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

        return await self._run(deliveries)

    async def last_installation(self, repo: str) -> int | None:
        def last(conn: sqlite3.Connection) -> int | None:
            # The newest job first by rowid; finished jobs are kept 30 days (prune_jobs).
            row = conn.execute(
                "SELECT installation FROM jobs WHERE source = 'github' AND installation IS NOT "
                "NULL AND repo = ? COLLATE NOCASE ORDER BY id DESC LIMIT 1",
                (repo,),
            ).fetchone()
            return int(row[0]) if row is not None else None

        return await self._run(last)

    async def installations(self) -> list[InstallationRecord]:
        def installations(conn: sqlite3.Connection) -> list[InstallationRecord]:
            rows = conn.execute(
                "SELECT id, account, repos, suspended, updated_at FROM installations ORDER BY id"
            )
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

        return await self._run(installations)

    async def prune_deliveries(self, before: float) -> int:
        def prune(conn: sqlite3.Connection) -> tuple[int, bool]:
            with self._write(conn):
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
            count, more = await self._run(prune)
            pruned += count
            if not more:
                return pruned
            await asyncio.sleep(0)  # between chunks the edge's commits go first

    async def prune_jobs(self, before: float) -> PrunedJobs:
        pruned = PrunedJobs()
        after = 0
        while True:
            jobs, commands, last = await self._run(
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
        with self._write(conn):
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


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations this store has not seen, each in its own transaction."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(MIGRATIONS):
        raise OperatorError(
            f"{path}: the store's schema version is {version}, newer than this pairbot knows "
            f"({len(MIGRATIONS)}); run the pairbot that wrote it, or point PAIR_STORE elsewhere"
        )
    for number in range(version + 1, len(MIGRATIONS) + 1):
        try:
            # executescript would COMMIT an open transaction first: the script carries its own.
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]}\nPRAGMA user_version = {number};\n"
                "COMMIT;"
            )
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


@dataclass
class _Enqueue:
    """One `enqueue_delivery` call waiting for the next group commit."""

    source: str
    delivery_id: str
    event: str
    action: str | None
    jobs: tuple[NewJob, ...]
    note: str
    installation: InstallationChange | None
    future: asyncio.Future[bool]


@dataclass
class _Update:
    """One job's bookkeeping statement waiting for `_apply_updates`."""

    sql: str
    values: tuple[Any, ...]
    future: asyncio.Future[None]


def _update_all(conn: sqlite3.Connection, batch: Sequence[_Update]) -> None:
    """Bookkeeping statements in one transaction (not durable: see the module docstring). A
    statement that fails rolls the batch back, and each is then run on its own, so only that
    one is answered with its error."""
    try:
        with SqliteStore._write(conn):
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


class _BatchFailed(Exception):
    """A delivery of a group commit failed; the batch is written again, one SAVEPOINT each."""


def _enqueue_all(
    conn: sqlite3.Connection, batch: Sequence[_Enqueue], now: float
) -> list[bool | Exception]:
    """The common case: every delivery of the batch written straight into the transaction.

    A SAVEPOINT around each delivery cost more than the inserts it guarded: every page a
    delivery touches first is copied to the statement journal, on the edge's critical path,
    for a rollback that almost never comes. Any failure instead rolls back the whole batch
    (`_run_durable`) and `_flush` writes it again with `_enqueue_each`.
    """
    try:
        return [_enqueue_one(conn, item, now) for item in batch]
    except Exception as err:
        if len(batch) == 1:  # alone in its transaction: the failure is its own
            raise
        raise _BatchFailed from err


def _enqueue_each(
    conn: sqlite3.Connection, batch: Sequence[_Enqueue], now: float
) -> list[bool | Exception]:
    """A batch in which a delivery failed: each delivery in its own SAVEPOINT, so only the
    failing one is rolled back and answered with its error."""
    results: list[bool | Exception] = []
    for item in batch:  # inside _run_durable's transaction
        conn.execute("SAVEPOINT delivery")
        try:
            results.append(_enqueue_one(conn, item, now))
        except Exception as err:
            conn.execute("ROLLBACK TO delivery")
            results.append(err)
        conn.execute("RELEASE delivery")
    return results


def _enqueue_one(conn: sqlite3.Connection, item: _Enqueue, now: float) -> bool:
    """Record one delivery and queue its jobs (inside the caller's transaction)."""
    inserted = conn.execute(
        "INSERT INTO deliveries (source, id, event, action, status, note, jobs, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            item.source,
            item.delivery_id,
            item.event,
            item.action,
            "queued" if item.jobs else "ignored",
            item.note,
            len(item.jobs),
            now,
        ),
    ).rowcount
    if not inserted:
        return False  # seen before: nothing is written
    queued = sum(_insert_job(conn, item.delivery_id, job, now) for job in item.jobs)
    if queued != len(item.jobs):  # a job of this comment was queued by another delivery
        conn.execute(
            "UPDATE deliveries SET status = ?, jobs = ? WHERE source = ? AND id = ?",
            ("queued" if queued else "already-queued", queued, item.source, item.delivery_id),
        )
    if item.installation is not None:
        _apply_installation(conn, item.installation, now)
    return True


def _insert_job(conn: sqlite3.Connection, delivery_id: str, job: NewJob, now: float) -> int:
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


def _apply_installation(conn: sqlite3.Connection, change: InstallationChange, now: float) -> None:
    if change.deleted:
        conn.execute("DELETE FROM installations WHERE id = ?", (change.id,))
        return
    row = conn.execute(
        "SELECT account, repos, suspended FROM installations WHERE id = ?", (change.id,)
    ).fetchone()
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
    conn.execute(
        "INSERT INTO installations (id, account, repos, suspended, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET account = excluded.account, "
        "repos = excluded.repos, suspended = excluded.suspended, updated_at = excluded.updated_at",
        (change.id, account, json.dumps(sorted(repos)), int(suspended), now),
    )


def _select(conn: sqlite3.Connection, ids: Sequence[int]) -> list[JobRecord]:
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"{_SELECT_JOBS} WHERE j.id IN ({marks}) ORDER BY j.id", tuple(ids))
    return [job_record(row) for row in rows]
