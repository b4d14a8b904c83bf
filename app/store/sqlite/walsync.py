"""The WAL's fsync in a thread of its own, shared by every commit written before it began.

A delivery's transaction commits without waiting for the disk (`synchronous=NORMAL`: SQLite
writes its frames to the WAL and returns); the delivery is answered once an fdatasync of the
WAL that *began after* its COMMIT returned has completed. That is what `synchronous=FULL`
does inside the COMMIT (it syncs the WAL after the commit's frames), moved out of the write
lock: while one sync is on the disk the event loop writes the next batches, and the next sync
covers them all (a pipelined group commit). Before, the loop waited for each batch's fsync —
and for the two hops to and from its thread — before it could write the next batch.

    sync = WalSync(database)
    sync.after(loop, callback)     # right after a COMMIT: callback(None) once it is on disk,
                                   # callback(error) if the sync failed; run on `loop`
    sync.close()                   # the syncs already asked for, then the thread ends

- Order: a callback runs only after a sync that began after `after` returned, so a delivery
  that saw another's row (a duplicate) is answered no sooner than that row is on disk.
- A failed fdatasync fails its callbacks and every later one (the page cache may have dropped
  the pages it could not write, and a later sync would then succeed without them): the edge
  answers 5xx until pairbot restarts, and nothing is answered 2xx that may not be on disk.
- The WAL file is opened once and its directory synced then (a new WAL's entry must be on
  disk too, as SQLite does for a journal); reopened if SQLite replaced it.
- Every `checkpoint_every` syncs, a PASSIVE checkpoint on this thread's own connection (never
  on the event loop's: a checkpoint fsyncs the WAL and the database, milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

Done = Callable[[BaseException | None], None]

# A PASSIVE checkpoint every this many syncs (SQLite's own, at `wal_autocheckpoint` pages,
# stays a backstop for a worker writing while no delivery arrives).
CHECKPOINT_EVERY = 32

_fdatasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class WalSync:
    """The fdatasyncs of one database's WAL, and the callbacks waiting for them."""

    def __init__(
        self,
        database: Path,
        *,
        busy_timeout_ms: int = 5_000,
        sync: Callable[[int], None] | None = None,
    ) -> None:
        self._database = database
        self._wal = Path(f"{database}-wal")
        self._busy_timeout_ms = busy_timeout_ms
        self._sync = sync or _fdatasync
        self._cond = threading.Condition()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, Done]] = []
        self._closing = False
        self._failure: OSError | None = None
        self._fd: int | None = None
        self._checkpointer: sqlite3.Connection | None = None
        self._syncs = 0
        self._thread: threading.Thread | None = None

    def after(self, loop: asyncio.AbstractEventLoop, done: Done) -> None:
        """`done` on `loop` once a sync that begins after this call has ended."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the WAL's sync is closed")
            self._waiting.append((loop, done))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pairbot-wal-sync", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        """Sync what was asked for, run its callbacks' hand-over, and end the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._waiting and not self._closing:
                        self._cond.wait()
                    if not self._waiting:
                        return
                    taken, self._waiting = self._waiting, []
                failure = self._sync_once()
                by_loop: dict[asyncio.AbstractEventLoop, list[Done]] = {}
                for loop, done in taken:
                    by_loop.setdefault(loop, []).append(done)
                for loop, callbacks in by_loop.items():
                    # One hand-over a loop for the whole sync; a closed loop has no one left.
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(_run_all, callbacks, failure)
                if failure is None:
                    self._syncs += 1
                    if self._syncs % CHECKPOINT_EVERY == 0:
                        self._checkpoint()
        finally:
            self._release()

    def _sync_once(self) -> OSError | None:
        if self._failure is not None:
            return self._failure
        try:
            self._sync(self._wal_fd())
        except OSError as err:
            self._failure = err
        return self._failure

    def _wal_fd(self) -> int:
        """The WAL's descriptor, opened again if SQLite replaced the file since."""
        current = self._wal.stat()
        if self._fd is not None:
            held = os.fstat(self._fd)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                return self._fd
            os.close(self._fd)
            self._fd = None
        self._fd = os.open(self._wal, os.O_RDONLY)
        _sync_directory(self._wal.parent)
        return self._fd

    def _checkpoint(self) -> None:
        """A PASSIVE checkpoint: never waits for a reader or the writer; what it cannot copy
        now, a later one will. Its failure only leaves the WAL longer."""
        try:
            if self._checkpointer is None:
                self._checkpointer = sqlite3.connect(
                    str(self._database),
                    timeout=self._busy_timeout_ms / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            return

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None


def _run_all(callbacks: list[Done], failure: BaseException | None) -> None:
    for done in callbacks:
        done(failure)


def _sync_directory(directory: Path) -> None:
    """The directory's entries on disk (a newly created WAL); not possible everywhere."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
