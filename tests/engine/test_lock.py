"""The step lock against real processes: live owners skip, dead or recycled owners are reclaimed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.engine.lock import (
    EMPTY_GRACE_SECONDS,
    LockProof,
    acquire,
    held,
    process_start_time,
    release,
    try_acquire,
)
from app.errors import BatchLockedError

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HOST = socket.gethostname()

needs_proc = pytest.mark.skipif(
    process_start_time(os.getpid()) is None, reason="needs /proc/<pid>/stat"
)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not us, to own a lock."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    return proc.pid


def _write_lock(
    path: Path, pid: int, start_time: str | None, *, host: str = HOST, age: float = 0.0
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {"pid": pid, "startTime": start_time, "host": host, "at": "2026-04-30T08:00:00"}
    path.write_text(json.dumps(content))
    _age(path, age)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _owner(path: Path) -> dict[str, object]:
    value = json.loads(path.read_text())
    assert isinstance(value, dict)
    return value


def _assert_ours(path: Path, proof: LockProof) -> None:
    assert _owner(path) == {
        "pid": os.getpid(),
        "startTime": process_start_time(os.getpid()),
        "host": HOST,
        "at": NOW.isoformat(),
    }
    assert proof == LockProof(
        path=path, pid=os.getpid(), start_time=process_start_time(os.getpid()), host=HOST
    )


def test_acquire_writes_owner_and_release_removes(tmp_path: Path) -> None:
    path = tmp_path / "batches" / "b1" / "run" / "step.lock"

    proof = try_acquire(path, now=NOW)

    assert proof is not None
    _assert_ours(path, proof)
    release(proof)
    assert not path.exists()
    # Free again.
    again = acquire(path, now=NOW)
    release(again)
    assert not path.exists()


def test_second_acquire_in_the_holding_process_skips(tmp_path: Path) -> None:
    path = tmp_path / "step.lock"
    proof = acquire(path, now=NOW)

    assert try_acquire(path, now=NOW) is None
    with pytest.raises(BatchLockedError, match=f"pid {os.getpid()} "):
        acquire(path, now=NOW)

    release(proof)


def test_held_releases_on_exit_and_on_error(tmp_path: Path) -> None:
    path = tmp_path / "step.lock"

    with held(path, now=NOW) as proof:
        _assert_ours(path, proof)
    assert not path.exists()

    with pytest.raises(RuntimeError), held(path, now=NOW):
        raise RuntimeError("step failed")
    assert not path.exists()


@needs_proc
def test_live_owner_skips(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    path = tmp_path / "step.lock"
    _write_lock(path, sleeper.pid, process_start_time(sleeper.pid), age=3600)
    before = path.read_bytes()

    assert try_acquire(path, now=NOW) is None
    with pytest.raises(BatchLockedError) as caught:
        acquire(path, now=NOW)

    message = str(caught.value)
    assert f"pid {sleeper.pid} " in message
    assert f"host {HOST} " in message
    assert "since 2026-04-30T08:00:00" in message
    assert "another pairbot step is running" in message
    assert caught.value.exit_code == 3
    assert path.read_bytes() == before
    with pytest.raises(BatchLockedError), held(path, now=NOW):
        pytest.fail("must not run while the lock is held")


@pytest.mark.parametrize(
    "start_time",
    [
        pytest.param("matching", id="same-start-time"),
        pytest.param(None, id="start-time-unknown"),
    ],
)
def test_live_pid_is_live_unless_start_time_differs(
    tmp_path: Path, sleeper: subprocess.Popen[bytes], start_time: str | None
) -> None:
    path = tmp_path / "step.lock"
    recorded = process_start_time(sleeper.pid) if start_time == "matching" else None
    _write_lock(path, sleeper.pid, recorded)

    assert try_acquire(path, now=NOW) is None


@needs_proc
def test_recycled_pid_is_reclaimed(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    # Same live pid, but the recorded start time belongs to an earlier process with that pid.
    path = tmp_path / "step.lock"
    real = process_start_time(sleeper.pid)
    assert real is not None
    _write_lock(path, sleeper.pid, str(int(real) - 1))

    proof = try_acquire(path, now=NOW)

    assert proof is not None
    _assert_ours(path, proof)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.lock"]
    release(proof)


@pytest.mark.parametrize(
    "start_time",
    [pytest.param("12345", id="with-start-time"), pytest.param(None, id="without-start-time")],
)
def test_dead_owner_is_reclaimed(tmp_path: Path, dead_pid: int, start_time: str | None) -> None:
    path = tmp_path / "step.lock"
    _write_lock(path, dead_pid, start_time)

    proof = try_acquire(path, now=NOW)

    assert proof is not None
    _assert_ours(path, proof)
    # The stale file was renamed aside and deleted: no step.lock.stale.* litter.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.lock"]
    release(proof)


@needs_proc
def test_zombie_owner_is_reclaimed(tmp_path: Path) -> None:
    # A child that exited but was not reaped yet still answers os.kill(pid, 0).
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        start_time = process_start_time(proc.pid)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{proc.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
            assert time.monotonic() < deadline, "child never exited"
            time.sleep(0.01)
        path = tmp_path / "step.lock"
        _write_lock(path, proc.pid, start_time)

        proof = try_acquire(path, now=NOW)

        assert proof is not None
        _assert_ours(path, proof)
        release(proof)
    finally:
        proc.kill()
        proc.wait()


def test_dead_owner_on_another_host_is_not_reclaimed(tmp_path: Path, dead_pid: int) -> None:
    path = tmp_path / "step.lock"
    _write_lock(path, dead_pid, "1", host=HOST + "-elsewhere", age=3600)

    assert try_acquire(path, now=NOW) is None
    with pytest.raises(BatchLockedError, match=f"on host {HOST}-elsewhere "):
        acquire(path, now=NOW)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b'{"pid": 12', id="truncated"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"pid": 0, "startTime": null, "host": "h", "at": "t"}', id="pid-zero"),
        pytest.param(b'{"pid": true, "startTime": null, "host": "h", "at": "t"}', id="pid-bool"),
        pytest.param(b'{"pid": 5, "host": "h"}', id="fields-missing"),
    ],
)
@pytest.mark.parametrize(
    ("age", "reclaimed"),
    [
        pytest.param(EMPTY_GRACE_SECONDS + 5, True, id="old"),
        pytest.param(0.0, False, id="fresh"),
    ],
)
def test_unwritten_lock_is_reclaimed_only_when_old(
    tmp_path: Path, content: bytes, age: float, reclaimed: bool
) -> None:
    path = tmp_path / "step.lock"
    path.write_bytes(content)
    _age(path, age)

    proof = try_acquire(path, now=NOW)

    if reclaimed:
        assert proof is not None
        _assert_ours(path, proof)
        release(proof)
    else:
        assert proof is None
        assert path.read_bytes() == content
        with pytest.raises(BatchLockedError, match="not written yet"):
            acquire(path, now=NOW)


def test_release_leaves_another_owners_lock(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = tmp_path / "step.lock"
    proof = acquire(path, now=NOW)
    # Our lock was (wrongly) taken over; release must not delete the new owner's file.
    _write_lock(path, sleeper.pid, process_start_time(sleeper.pid))
    before = path.read_bytes()

    release(proof)

    assert path.read_bytes() == before


def test_release_leaves_a_lock_with_our_pid_but_another_start_time(tmp_path: Path) -> None:
    path = tmp_path / "step.lock"
    proof = acquire(path, now=NOW)
    _write_lock(path, os.getpid(), "not-our-start-time")

    release(proof)

    assert path.exists()


def test_release_of_missing_lock_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "step.lock"
    proof = acquire(path, now=NOW)
    path.unlink()

    release(proof)

    assert not path.exists()


@pytest.mark.parametrize("contenders", [pytest.param(2, id="two"), pytest.param(8, id="eight")])
def test_racing_reclaimers_exactly_one_wins(tmp_path: Path, dead_pid: int, contenders: int) -> None:
    for attempt in range(25):
        path = tmp_path / str(attempt) / "step.lock"
        _write_lock(path, dead_pid, None)

        results = _race(path, contenders)

        winners = [proof for proof in results if proof is not None]
        assert len(results) == contenders
        assert len(winners) == 1, f"attempt {attempt}: {len(winners)} winners"
        assert _owner(path)["pid"] == os.getpid()
        assert sorted(p.name for p in path.parent.iterdir()) == ["step.lock"]


def _race(path: Path, contenders: int) -> list[LockProof | None]:
    """Release `contenders` threads into try_acquire at once; what each got back."""
    barrier = threading.Barrier(contenders)
    results: list[LockProof | None] = []
    errors: list[BaseException] = []

    def contend() -> None:
        try:
            barrier.wait(timeout=10)
            results.append(try_acquire(path, now=NOW))
        except BaseException as err:  # a thread cannot fail the test; re-raised below
            errors.append(err)

    threads = [threading.Thread(target=contend) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if errors:
        raise errors[0]
    return results


@needs_proc
def test_start_time_parse_survives_parens_and_spaces_in_comm(tmp_path: Path) -> None:
    # The kernel takes comm from the executable's file name, so run Python under a hostile name.
    weird = tmp_path / "a) b (c) d"
    weird.symlink_to(sys.executable)
    proc = subprocess.Popen([str(weird), "-c", "import time; time.sleep(30)"])
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_bytes()
        assert b"(a) b (c) d) " in stat
        expected = stat.split(b"(a) b (c) d) ", 1)[1].split()[19].decode()

        assert process_start_time(proc.pid) == expected

        path = tmp_path / "step.lock"
        _write_lock(path, proc.pid, expected)
        # A misparsed start time would look like pid reuse and steal the live lock.
        assert try_acquire(path, now=NOW) is None
    finally:
        proc.kill()
        proc.wait()


def test_start_time_of_missing_process_is_none(dead_pid: int) -> None:
    assert process_start_time(dead_pid) is None
