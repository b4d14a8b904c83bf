"""`WalSync`: a commit's callback waits for a sync that began after it; a failed sync fails
every later callback; a replaced WAL is opened again; close drains what was asked for."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest

from app.store.sqlite.walsync import Done, WalSync


def wal_of(tmp_path: Path) -> tuple[Path, Path]:
    database = tmp_path / "s.sqlite3"
    wal = Path(f"{database}-wal")
    wal.write_bytes(b"frames")
    return database, wal


def test_a_callback_waits_for_a_sync_that_began_after_it(tmp_path: Path) -> None:
    database, _ = wal_of(tmp_path)
    events: list[str] = []
    first_started, release_first = threading.Event(), threading.Event()

    def sync(fd: int) -> None:
        n = sum(event.startswith("start") for event in events) + 1
        events.append(f"start {n}")
        if n == 1:
            first_started.set()
            release_first.wait(10)
        events.append(f"end {n}")

    def noted(name: str, future: asyncio.Future[BaseException | None]) -> Done:
        def done(failure: BaseException | None) -> None:
            events.append(name)
            future.set_result(failure)

        return done

    async def go() -> None:
        loop = asyncio.get_running_loop()
        walsync = WalSync(database, sync=sync)
        a: asyncio.Future[BaseException | None]
        b: asyncio.Future[BaseException | None]
        a, b = loop.create_future(), loop.create_future()
        walsync.after(loop, noted("a", a))
        await asyncio.to_thread(first_started.wait, 10)
        walsync.after(loop, noted("b", b))
        release_first.set()
        async with asyncio.timeout(10):
            assert await a is None and await b is None
        await asyncio.to_thread(walsync.close)

    asyncio.run(go())
    assert events.index("a") > events.index("end 1")
    assert events.index("b") > events.index("end 2") > events.index("start 2")


def test_a_failed_sync_fails_its_callbacks_and_every_later_one_without_syncing(
    tmp_path: Path,
) -> None:
    database, _ = wal_of(tmp_path)
    calls: list[int] = []

    def sync(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    async def go() -> list[BaseException | None]:
        loop = asyncio.get_running_loop()
        walsync = WalSync(database, sync=sync)
        got: list[BaseException | None] = []
        for _ in range(2):
            done: asyncio.Future[BaseException | None] = loop.create_future()
            walsync.after(loop, done.set_result)
            async with asyncio.timeout(10):
                got.append(await done)
        await asyncio.to_thread(walsync.close)
        return got

    failures = asyncio.run(go())
    assert [getattr(f, "errno", None) for f in failures] == [errno.EIO, errno.EIO]
    assert len(calls) == 1


def test_a_replaced_wal_is_opened_again(tmp_path: Path) -> None:
    database, wal = wal_of(tmp_path)
    synced: list[int] = []

    expected: list[int] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()
        walsync = WalSync(database, sync=lambda fd: synced.append(os.fstat(fd).st_ino))
        for _ in range(2):
            expected.append(wal.stat().st_ino)
            done: asyncio.Future[BaseException | None] = loop.create_future()
            walsync.after(loop, done.set_result)
            async with asyncio.timeout(10):
                assert await done is None
            replacement = tmp_path / "new-wal"
            replacement.write_bytes(b"other frames")
            replacement.replace(wal)
        await asyncio.to_thread(walsync.close)

    asyncio.run(go())
    assert synced == expected and expected[0] != expected[1]


def test_close_syncs_what_was_asked_for_then_refuses_more(tmp_path: Path) -> None:
    database, _ = wal_of(tmp_path)
    synced: list[int] = []

    async def go() -> list[BaseException | None]:
        loop = asyncio.get_running_loop()
        walsync = WalSync(database, sync=synced.append)
        waiting = [loop.create_future() for _ in range(3)]
        for done in waiting:
            walsync.after(loop, done.set_result)
        await asyncio.to_thread(walsync.close)
        with pytest.raises(RuntimeError, match="closed"):
            walsync.after(loop, lambda failure: None)
        async with asyncio.timeout(10):
            return list(await asyncio.gather(*waiting))

    assert asyncio.run(go()) == [None, None, None]
    assert synced  # at least one sync covered all three


def test_a_missing_wal_fails_the_sync(tmp_path: Path) -> None:
    """SQLite in WAL mode always has one after a commit: its absence means the file was
    deleted under the store, and nothing written since can be answered as on disk."""

    async def go() -> BaseException | None:
        loop = asyncio.get_running_loop()
        walsync = WalSync(tmp_path / "none.sqlite3", sync=lambda fd: None)
        done: asyncio.Future[BaseException | None] = loop.create_future()
        walsync.after(loop, done.set_result)
        async with asyncio.timeout(10):
            failure = await done
        await asyncio.to_thread(walsync.close)
        return failure

    assert isinstance(asyncio.run(go()), FileNotFoundError)
