"""The worker's optional own loop (`Worker(own_loop=True)`): jobs run on another thread, the
store stays on the loop that opened it, and every job is recorded there. Real SQLite."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from app.store.base import JobRecord, NewJob
from app.store.factory import make_store
from app.web.worker import Worker


def _job(n: int) -> NewJob:
    return NewJob(
        kind="command",
        source="github",
        repo="octocat/Hello-World",
        installation=1,
        target="card",
        number=n,
        dedupe_key=f"comment:{n}",
        serial_key=f"card:{n}",
        request={},
    )


def test_jobs_on_the_workers_own_loop_are_recorded_on_the_stores(tmp_path: Path) -> None:
    async def run() -> tuple[set[int], int, dict[str, int]]:
        store = make_store(tmp_path / "pairbot.sqlite3")
        await store.open()
        threads: set[int] = set()
        finished = asyncio.Event()
        home = asyncio.get_running_loop()
        worker: Worker

        async def handle(job: JobRecord) -> None:
            threads.add(threading.get_ident())
            await worker.jobs_store.finish(job.id, "done", "ran")  # sent to the store's loop
            if job.number == 3:
                worker.at_home(finished.set)  # the event belongs to the home loop

        worker = Worker(store, handle, own_loop=True, poll_s=0.05)
        await worker.start()
        for n in (1, 2, 3):
            await store.enqueue_delivery(f"d{n}", "issue_comment", "created", [_job(n)])
            worker.wake()  # from the edge's loop
        await asyncio.wait_for(finished.wait(), 30)
        stopped = asyncio.Event()
        worker.on_stop = lambda: _set_soon(home, stopped)
        await worker.stop()
        await asyncio.wait_for(stopped.wait(), 30)
        counts = await store.counts()
        await store.close()
        return threads, threading.get_ident(), counts

    threads, edge, counts = asyncio.run(asyncio.wait_for(run(), 60))
    assert threads and edge not in threads  # the jobs ran on the worker's own thread
    assert counts["done"] == 3 and counts["queued"] == counts["running"] == 0


async def _set_soon(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    """`on_stop` runs on the worker's loop; the test's event is on the home loop."""
    assert asyncio.get_running_loop() is not loop
    loop.call_soon_threadsafe(event.set)
