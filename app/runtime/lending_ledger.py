"""The ledger of what pairbot's OS user has lent to the agent user, and who is still alive.

Every pairbot of one OS user — several processes, and several steps in one process (the App's
worker runs up to four at once) — shares one ledger, `/tmp/pairbot-lendings-<uid>` (0700, that
user's only): one record per lending (`<pid>-<key>.json`), written before anything is lent and
removed once it is taken back. What lending and taking back decide depends on the other
lendings (a directory two steps hold stays lent until the last one ends), so each of them runs
under the ledger's lock (`locked`): a `flock` on `<ledger>/.lock` for other processes, and a
thread lock for this process's other steps (a flock is held per open file, so two opens in
one process exclude each other too; the thread lock keeps the wait bounded and cheap).

Whether a lending's pairbot is alive is also a flock: the lending process holds
`<pid>-<key>.lock` for as long as the lending lasts, and the kernel releases it the moment that
process ends, however it ends. A sweeper that can take the lock knows the lender is gone; one
that cannot leaves the lending alone. Unlike a pid, this holds across PID namespaces (a pairbot
in a container sharing /tmp records a pid that means another process here) and pid reuse. A
record without a lock file (an older pairbot's) falls back to the pid and its start time
(/proc/<pid>/stat field 22).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from app.errors import UserError

__all__ = ["Ledger", "Record", "locked", "process_start"]

_PREFIX: Final = "pairbot-lendings-"
_WAIT_S: Final = 600.0  # a lending's chown of a large tree runs under the lock, a few at a time
_POLL_S: Final = 0.02
_THIS_PROCESS = threading.Lock()
# This process's live lendings, by key, with the liveness lock each holds (-1: no ledger, so
# no lock): closing one ends the lending's life.
_HELD: dict[str, tuple[int, Record]] = {}


class Record(Protocol):
    """What the ledger needs of a lending: its name, its lender, and its JSON."""

    @property
    def pid(self) -> int: ...
    @property
    def started(self) -> str: ...
    @property
    def key(self) -> str: ...
    def to_json(self) -> str: ...


@dataclass(frozen=True)
class Ledger:
    """The ledger directory, while its lock is held (None: no ledger could safely be had, so
    only this process's own lendings are known)."""

    path: Path | None

    def names(self) -> list[Path]:
        """The records, oldest pid first (any order would do; sorted for repeatability)."""
        return [] if self.path is None else sorted(self.path.glob("*.json"))

    @staticmethod
    def own() -> list[Record]:
        """This process's live lendings (known even without a ledger)."""
        return [record for _, record in _HELD.values()]

    def write(self, record: Record) -> None:
        """Hold the record's liveness lock, then write it (atomically, 0600)."""
        if self.path is None:
            _HELD[record.key] = (-1, record)  # alive for this process; nobody else sees it
            return
        stem = self.path / f"{record.pid}-{record.key}"
        descriptor = os.open(f"{stem}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh name: never taken
        _HELD[record.key] = (descriptor, record)
        temporary = Path(f"{stem}.tmp")
        temporary.write_text(record.to_json())
        temporary.replace(f"{stem}.json")

    def forget(self, record: Record) -> None:
        """Remove the record, then end its life (the lock file goes, the lock with it)."""
        if self.path is not None:
            stem = self.path / f"{record.pid}-{record.key}"
            Path(f"{stem}.json").unlink(missing_ok=True)
            Path(f"{stem}.lock").unlink(missing_ok=True)
        descriptor, _ = _HELD.pop(record.key, (-1, record))
        if descriptor >= 0:
            os.close(descriptor)

    def drop_orphans(self) -> None:
        """Remove each liveness lock whose record is gone and whose lender is too: an older
        pairbot's sweep removes a record it finds dead, never the lock beside it."""
        if self.path is None:
            return
        for lock in self.path.glob("*-*.lock"):
            if lock.with_suffix(".json").exists():
                continue
            try:
                descriptor = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                lock.unlink(missing_ok=True)
            except BlockingIOError:
                pass  # its lender lives (a live lending whose record an older pairbot took)
            finally:
                os.close(descriptor)

    def alive(self, record: Record) -> bool:
        """Whether the pairbot that made `record` still runs."""
        if record.key in _HELD:
            return True  # this process's own
        if self.path is None:
            return _pid_alive(record)
        lock = self.path / f"{record.pid}-{record.key}.lock"
        try:
            descriptor = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            return _pid_alive(record)  # an older pairbot's record: no lock to ask
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(descriptor)  # releases the lock if it was taken
        return False


@contextlib.contextmanager
def locked() -> Iterator[Ledger]:
    """The ledger, held against every other lending and sweep of this OS user; `UserError`
    when another holds it longer than a lending can take."""
    if not _THIS_PROCESS.acquire(timeout=_WAIT_S):
        raise UserError(f"agent isolation: the lending ledger stayed busy for {_WAIT_S:.0f} s")
    try:
        path = _directory()
        if path is None:
            yield Ledger(None)
            return
        descriptor = os.open(path / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            _flock(descriptor, path)
            yield Ledger(path)
        finally:
            os.close(descriptor)  # the lock goes with the last descriptor of this open
    finally:
        _THIS_PROCESS.release()


def _flock(descriptor: int, path: Path) -> None:
    deadline = time.monotonic() + _WAIT_S
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise UserError(
                    f"agent isolation: another pairbot of this user held the lending ledger "
                    f"{path} for {_WAIT_S:.0f} s; if none runs, remove {path / '.lock'}"
                ) from None
            time.sleep(_POLL_S)  # a bounded poll: flock itself cannot time out


def _directory() -> Path | None:
    """pairbot's user's ledger directory, made if missing; None when it is not safely ours."""
    # /tmp, not TMPDIR: every pairbot of this user must find the same ledger.
    path = Path("/tmp") / f"{_PREFIX}{os.geteuid()}"  # noqa: S108  # checked below
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    # Another user could have made it first in a shared /tmp: only our own 0700 directory.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None
    return path


def _pid_alive(record: Record) -> bool:
    """The pid and its start time: the same process, not a reused pid."""
    if record.started:
        return process_start(record.pid) == record.started
    try:  # no start time was readable: the pid alone, erring on the side of alive
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot, /proc/<pid>/stat field 22),
    None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name in parentheses may hold spaces; the fields after it are plain (field 3,
    # the state, comes first: field 22 is the 20th).
    fields = text.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None
