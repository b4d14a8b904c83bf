"""The SQLite store's one connection: opening it, and running statements and commits on it.

- WAL mode (the status page reads while the edge writes), a busy timeout (a second connection
  waits for the write lock instead of failing), foreign keys on; the schema is migrated on open
  (app/store/sqlite/schema.py).
- The stdlib `sqlite3` is blocking, and only one part of it is slow: the fsync that makes a
  commit durable. Statements and COMMITs take microseconds and run on the event loop's thread
  (`run`, `write_now`); every commit is `synchronous=NORMAL` (no fsync of its own). An asyncio
  lock (per event loop) orders the connection's users and a threading lock keeps other
  threads out.
- A delivery is durable before it is answered (`on_disk`): the WAL's fdatasync runs in a
  thread of its own (app/store/sqlite/walsync.py), shared by every commit written before it
  began — `synchronous=FULL`'s sync, out of the write lock, so the loop writes the next batch
  while one is on the disk. The worker's bookkeeping waits for no sync (`write`): a power cut
  may undo its last moments, and its jobs then run again.
- WAL checkpoints run in that thread too (walsync.CHECKPOINT_EVERY), not inside whichever
  statement SQLite's own threshold lands on.
- Writes use `BEGIN IMMEDIATE`: the write lock is taken up front, so two processes cannot
  both read "not seen" for one delivery id and then both insert it.
- Two processes share the file when the worker runs in its own (app.web.worker_process). A
  delivery's transaction never waits for the other's write lock on the event loop's thread:
  its BEGIN is tried there without the busy handler (`write_now`), and when the lock is
  taken, the whole transaction runs in a worker thread, which waits (`write_in_thread`).
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
from app.store.sqlite.walsync import WalSync

T = TypeVar("T")

# SQLite checkpoints its WAL from inside the COMMIT that crosses `wal_autocheckpoint` pages
# (1,000 by default) — more often than not a worker's bookkeeping statement on the event loop's
# thread, which then stopped serving requests for the checkpoint's fsyncs (5 ms each, about
# every 50 command deliveries: 60 such stalls, 360 ms, in 3,000). The WAL's sync thread
# checkpoints instead (app/store/sqlite/walsync.py); SQLite's own stays as a backstop, at a
# size only a worker writing with no delivery arriving can reach.
AUTOCHECKPOINT_PAGES = 10_000
# How often a delivery's transaction that found the write lock taken (by the worker's process)
# tries again, from its worker thread.
LOCK_RETRY_S = 0.0002


class LockTaken(Exception):
    """`write_now` could not begin at once: another connection, or another of this loop's
    users, holds the write lock."""


class SqliteConnection:
    """One SQLite file's connection (created with its directory on `open()`) and its locks."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._conn: sqlite3.Connection | None = None
        self._sync: WalSync | None = None

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

    def write_now(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a write transaction begun and committed on the loop's thread, without the
        disk's wait (see `on_disk`); `LockTaken` if the write lock is not free right now."""
        if self._loop_lock().locked():
            raise LockTaken  # a transaction of this loop's is open (in a worker thread)
        with self._lock:
            conn = self.get()
            if not self._begin_at_once(conn):
                raise LockTaken
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    async def write_in_thread(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a write transaction in a worker thread, which waits for the write lock
        (up to the busy timeout) where the loop's thread must not."""
        async with self._loop_lock():
            with self._lock:
                conn = self.get()
                return await self._in_thread(conn, functools.partial(self._transaction, conn, fn))

    def on_disk(self, done: Callable[[BaseException | None], None]) -> None:
        """`done(None)` on this loop once what was committed so far is on disk — `done(error)`
        if it could not be synced. Call it right after the COMMIT (app/store/sqlite/walsync.py)."""
        if self._sync is None:
            raise RuntimeError("SqliteStore.open() was not called (or close() was)")
        self._sync.after(asyncio.get_running_loop(), done)

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
        timeout), `fn`, and the COMMIT."""
        self._begin_waiting(conn)
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def _in_thread(self, conn: sqlite3.Connection, work: Callable[[], T]) -> T:
        """`work` (a whole transaction) in a worker thread; a transaction it left open is
        rolled back."""
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
            self._sync = WalSync(self.path, busy_timeout_ms=self._busy_timeout_ms)

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise OperatorError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
        # No commit waits for the disk itself: a delivery's waits for the WAL's sync thread.
        conn.execute("PRAGMA synchronous = NORMAL")
        # Checkpoints run in the WAL's sync thread (walsync.py); SQLite's own, at this many
        # pages, only if no delivery commits while the worker writes.
        conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys = ON")

    def close(self) -> None:
        """The syncs already asked for, then the connection closed."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction of the worker's bookkeeping: it commits without waiting for the
    disk (see the module docstring); the WAL's next sync covers it too."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
