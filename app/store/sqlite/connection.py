"""The SQLite store's one connection: opening it, and running statements and commits on it.

- WAL mode (the status page reads while the edge writes), a busy timeout (a second connection
  waits for the write lock instead of failing), foreign keys on; the schema is migrated on open
  (app/store/sqlite/schema.py).
- The stdlib `sqlite3` is blocking, and only one part of it is slow: the fsync of a durable
  COMMIT. That runs in a worker thread (`run_in_executor`); the statements themselves take
  microseconds and run on the event loop's thread (`run`). An asyncio lock (per event loop)
  orders the connection's users and a threading lock keeps other threads out, COMMIT included.
- A delivery's commit is `synchronous=FULL` (`run_durable`): a delivery answered 2xx is on disk
  first. The worker's bookkeeping commits without waiting for the disk (`synchronous=NORMAL`,
  the connection's default; `write`).
- WAL checkpoints run in the durable commit's thread (`CHECKPOINT_EVERY`), not inside
  whichever statement SQLite's own threshold lands on.
- Writes use `BEGIN IMMEDIATE`: the write lock is taken up front, so two processes cannot
  both read "not seen" for one delivery id and then both insert it.
- Two processes share the file when the worker runs in its own (app.web.worker_process). A
  durable transaction never waits for the other's write lock on the event loop's thread:
  its BEGIN is tried there without the busy handler, and when the lock is taken, the whole
  transaction (BEGIN, statements, COMMIT) runs in the commit's worker thread, which waits.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from app.errors import OperatorError
from app.store.sqlite.schema import migrate

T = TypeVar("T")

# SQLite checkpoints its WAL from inside the COMMIT that crosses `wal_autocheckpoint` pages
# (1,000 by default) — more often than not a worker's bookkeeping statement on the event loop's
# thread, which then stopped serving requests for the checkpoint's fsyncs (5 ms each, about
# every 50 command deliveries: 60 such stalls, 360 ms, in 3,000). The durable commit's thread
# checkpoints instead, passively, every `CHECKPOINT_EVERY` commits (a few hundred pages under
# load; the WAL file keeps its size once grown, so its size says nothing); SQLite's own stays
# as a backstop, at a size only a worker writing with no delivery arriving can reach.
CHECKPOINT_EVERY = 32
AUTOCHECKPOINT_PAGES = 10_000
# How often a durable transaction that found the write lock taken (by the worker's process)
# tries again, from its worker thread.
LOCK_RETRY_S = 0.0002


class SqliteConnection:
    """One SQLite file's connection (created with its directory on `open()`) and its locks."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self.path = path
        self._commits = 0
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._conn: sqlite3.Connection | None = None

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._loop_locks.get(loop)
        if lock is None:
            lock = self._loop_locks[loop] = asyncio.Lock()
        return lock

    def get(self) -> sqlite3.Connection:
        """The open connection; a RuntimeError before `open()` or after `close()`."""
        if self._conn is None:
            raise RuntimeError("SqliteStore.open() was not called (or close() was)")
        return self._conn

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` on the loop's thread (statements only; nothing here waits for the disk)."""
        async with self._loop_lock():
            with self._lock:
                return fn(self.get())

    async def run_durable(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a write transaction whose COMMIT waits for the disk (`synchronous=FULL`),
        in a worker thread."""
        async with self._loop_lock():
            with self._lock:
                conn = self.get()
                conn.execute("PRAGMA synchronous = FULL")
                try:
                    if not self._begin_at_once(conn):
                        # Another process (the worker's) holds the write lock: SQLite's busy
                        # handler would sleep on this loop's thread. The whole transaction
                        # waits for it in a worker thread instead.
                        return await self._in_thread(
                            conn, functools.partial(self._transaction, conn, fn)
                        )
                    try:
                        result = fn(conn)
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
                    await self._in_thread(conn, functools.partial(self._commit, conn))
                    return result
                finally:
                    conn.execute("PRAGMA synchronous = NORMAL")

    def _begin_at_once(self, conn: sqlite3.Connection) -> bool:
        """`BEGIN IMMEDIATE` if the write lock is free now, without the busy handler's wait;
        False (no transaction begun) if another connection holds it."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            if err.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return True

    def _begin_waiting(self, conn: sqlite3.Connection) -> None:
        """In a worker thread: `BEGIN IMMEDIATE`, tried again every `LOCK_RETRY_S` until the
        busy timeout. The worker's transactions hold the lock for microseconds; SQLite's own
        busy handler would sleep a whole millisecond first, then 2, then 5."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while not self._begin_at_once(conn):
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError("database is locked")
            time.sleep(LOCK_RETRY_S)

    def _transaction(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """In a worker thread: `BEGIN IMMEDIATE` (waiting for the lock, up to the busy
        timeout), `fn`, and the durable COMMIT."""
        self._begin_waiting(conn)
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._commit(conn)
        return result

    async def _in_thread(self, conn: sqlite3.Connection, work: Callable[[], T]) -> T:
        """`work` (a COMMIT, or a whole transaction) in a worker thread; a transaction it
        left open is rolled back."""
        # Submitted now, not when a task would first run: another connection's BEGIN on this
        # thread must find this COMMIT already on its way.
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(None, work)
        try:
            # Never leave the connection while the thread is using it, even if this task is
            # cancelled meanwhile.
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            await asyncio.wait([done])
            raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _commit(self, conn: sqlite3.Connection) -> None:
        """A durable COMMIT and, every `CHECKPOINT_EVERY` of them, a passive checkpoint —
        both in the commit's worker thread, never on the event loop's."""
        conn.execute("COMMIT")
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def open(self) -> None:
        """Connect, set the connection up and migrate the schema; nothing if already open."""
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
                self._configure(conn)
                migrate(conn, self.path)
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise OperatorError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
        # NORMAL by default (the worker's bookkeeping); a delivery's commit is FULL.
        conn.execute("PRAGMA synchronous = NORMAL")
        # Checkpoints run in the durable commit's thread (`_commit`); SQLite's own, at this
        # many pages, only if no delivery commits while the worker writes.
        conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys = ON")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction of the worker's bookkeeping: it commits without waiting for the
    disk (see the module docstring); in WAL mode the next durable COMMIT syncs it too."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
