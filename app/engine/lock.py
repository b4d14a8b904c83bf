"""The per-batch single-flight step lock (`step.lock`): acquiring skips, it never waits.

A successful acquire hands back a `LockProof`; functions that mutate batch state take it as a
parameter, so the type checker catches an unlocked call. The lock file is created with
O_CREAT|O_EXCL and holds its owner as JSON:

    {"pid": 123, "startTime": "4567", "host": "box", "at": "2026-01-01T00:00:00+00:00"}

`startTime` is the owner's start time from `/proc/<pid>/stat`, so a recycled pid does not keep a
dead owner's lock alive. A lock is stale, and reclaimed, when its owner is on this host and is
dead, a zombie, or a different process under the same pid; or when the file is still empty or
unparseable more than `EMPTY_GRACE_SECONDS` after it was created (its creator crashed between
create and write). An owner on another host is always treated as live: we cannot probe it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from app.errors import BatchLockedError

__all__ = [
    "EMPTY_GRACE_SECONDS",
    "LockProof",
    "acquire",
    "held",
    "process_start_time",
    "release",
    "try_acquire",
]

EMPTY_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class LockProof:
    """Evidence that this process holds the batch step lock at `path`."""

    path: Path
    pid: int
    start_time: str | None
    host: str


@dataclass(frozen=True)
class _Owner:
    """The parsed content of a lock file."""

    pid: int
    start_time: str | None
    host: str
    at: str


@dataclass(frozen=True)
class _Held:
    """Why an acquire skipped: the live owner, or None while its file is not yet written."""

    owner: _Owner | None


def try_acquire(path: Path, *, now: datetime) -> LockProof | None:
    """Take the lock at `path`, reclaiming a stale one; None when a live process holds it."""
    result = _attempt(path, now)
    return result if isinstance(result, LockProof) else None


def acquire(path: Path, *, now: datetime) -> LockProof:
    """Like `try_acquire`, but raises `BatchLockedError` (naming the owner) instead of None."""
    result = _attempt(path, now)
    if isinstance(result, LockProof):
        return result
    owner = result.owner
    if owner is None:
        held_by = "batch lock is being taken by another process (its lock file is not written yet)"
    else:
        held_by = f"batch lock held by pid {owner.pid} on host {owner.host} since {owner.at}"
    raise BatchLockedError(
        f"{held_by}; another pairbot step is running for this batch"
        f" — try again when it finishes (lock file: {path})"
    )


def release(proof: LockProof) -> None:
    """Remove the lock file if it still names this owner; someone else's lock is left alone."""
    read = _read(proof.path)
    if read is None:
        return
    owner, _ = read
    if owner is not None and (owner.pid, owner.start_time, owner.host) == (
        proof.pid,
        proof.start_time,
        proof.host,
    ):
        # No check-then-delete race: while we live, nobody else judges this lock stale.
        proof.path.unlink(missing_ok=True)


@contextlib.contextmanager
def held(path: Path, *, now: datetime) -> Iterator[LockProof]:
    """Hold the lock for the block; raises `BatchLockedError` if a live process holds it."""
    proof = acquire(path, now=now)
    try:
        yield proof
    finally:
        release(proof)


def process_start_time(pid: int) -> str | None:
    """The start time of `pid` in clock ticks since boot, or None where /proc cannot tell."""
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def _attempt(path: Path, now: datetime) -> LockProof | _Held:
    """One acquire: create, else reclaim a stale lock and create once more."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    me = LockProof(path=path, pid=pid, start_time=process_start_time(pid), host=_host())
    content = _content(me, now)
    if _create(path, content):
        return me
    read = _read(path)
    if read is not None:
        owner, age = read
        if not _is_stale(owner, age, me.host):
            return _Held(owner)
        if not _reclaim(path, me.host):
            return _Held(owner)
    # Reclaimed, or released between our create and our read: exactly one more try.
    if _create(path, content):
        return me
    read = _read(path)
    return _Held(None if read is None else read[0])


def _reclaim(path: Path, this_host: str) -> bool:
    """Move a stale lock out of the way; False when it turned out live or another reclaims it.

    The rename to a unique name means only one contender removes a given file. That alone is not
    enough: a contender that judged the *old* file stale could rename away the *new* lock a
    faster reclaimer just created. So judging and renaming happen under a non-blocking flock of
    the directory, and the judgement is repeated there. Plain creators need no guard: O_EXCL
    only succeeds once the file is gone.
    """
    with _reclaim_guard(path.parent) as guarded:
        if not guarded:
            return False
        read = _read(path)
        if read is None:
            return True
        owner, age = read
        if not _is_stale(owner, age, this_host):
            return False
        tomb = path.with_name(f"{path.name}.stale.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            path.rename(tomb)
        except FileNotFoundError:
            return True
        tomb.unlink(missing_ok=True)
        return True


@contextlib.contextmanager
def _reclaim_guard(directory: Path) -> Iterator[bool]:
    """Yield True while this process alone may reclaim in `directory`, False if another does."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            # Skip, never wait. A filesystem without flock (ENOLCK, EINVAL) falls back to the
            # rename alone, which is still right unless two reclaimers interleave exactly.
            guarded = err.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)
        else:
            guarded = True
        yield guarded
    finally:
        # Closing the descriptor drops the flock.
        os.close(fd)


def _is_stale(owner: _Owner | None, age_seconds: float, this_host: str) -> bool:
    """Whether a lock file may be reclaimed; every doubt counts as live."""
    if owner is None:
        # Empty or unparseable: its creator may be between create and write, so give it time.
        return age_seconds > EMPTY_GRACE_SECONDS
    if owner.host != this_host:
        # We cannot probe a pid on another machine.
        return False
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # the process exists but belongs to another user: alive
    stat = _proc_stat(owner.pid)
    if stat is None:
        # No /proc (or it just exited): nothing more to go on, so it stays live this time.
        return False
    state, start_time = stat
    if state == "Z":
        # A zombie has exited; only its parent has not reaped it yet.
        return True
    # A different start time means the pid was recycled by an unrelated process.
    return owner.start_time is not None and start_time != owner.start_time


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, starttime) from /proc/<pid>/stat, or None where it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # Field 2 is "(comm)" and comm may hold spaces and ")": split after the LAST ")".
    close = raw.rfind(b")")
    if close < 0:
        return None
    fields = raw[close + 1 :].decode("ascii", "replace").split()
    # fields[0] is field 3 (state); starttime is field 22.
    if len(fields) < 20:
        return None
    return fields[0], fields[19]


def _host() -> str:
    return socket.gethostname()


def _content(proof: LockProof, now: datetime) -> bytes:
    owner = {"pid": proof.pid, "startTime": proof.start_time, "host": proof.host}
    return (json.dumps({**owner, "at": now.isoformat()}) + "\n").encode("utf-8")


def _create(path: Path, content: bytes) -> bool:
    """Create the lock file with our content; False if it already exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return False
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        # Do not leave an empty lock behind, but only remove the file if it is still ours.
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(fd), path.stat()):
                path.unlink()
        os.close(fd)
        raise
    os.close(fd)
    return True


def _read(path: Path) -> tuple[_Owner | None, float] | None:
    """(owner or None if unparseable, age in seconds), or None when there is no lock file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        modified = os.fstat(fd).st_mtime
        # A real lock file is ~150 bytes; anything past 64 KiB is garbage and will not parse.
        raw = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    # Wall clock, not the caller's `now`: the file's mtime comes from the same clock, and `now`
    # may be a fixed value in tests or replays.
    return _parse_owner(raw), time.time() - modified


def _parse_owner(raw: bytes) -> _Owner | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    pid, start_time = value.get("pid"), value.get("startTime")
    host, at = value.get("host"), value.get("at")
    # pid 0 or negative would make os.kill probe a whole process group.
    if type(pid) is not int or not 0 < pid < 2**31:
        return None
    if not (start_time is None or isinstance(start_time, str)):
        return None
    if not isinstance(host, str) or not isinstance(at, str):
        return None
    return _Owner(pid=pid, start_time=start_time, host=host, at=at)
