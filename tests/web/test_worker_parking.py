"""A job waiting for its turn to write (hosts.pacer) holds no worker slot: with one slot, the
next job starts while the first waits behind another write. Real SQLite, no time asserted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.store.base import JobRecord
from app.store.factory import make_store
from app.web.worker import Worker
from hosts.pacer import Pacer
from tests.support.fake_github import FakeClock
from tests.web.test_worker_loop import _job


def test_a_job_waiting_for_a_write_turn_lets_the_next_job_start(tmp_path: Path) -> None:
    async def run() -> list[str]:
        store = make_store(tmp_path / "pairbot.sqlite3")
        await store.open()
        clock = FakeClock()
        pacer = Pacer(0.0, clock=clock, sleep=clock.sleep)
        events: list[str] = []
        second_started = asyncio.Event()
        release = asyncio.Event()

        async def holder() -> None:  # another write on the wire (a synthesis comment)
            async with pacer.turn("bulk"):
                await release.wait()

        async def handle(job: JobRecord) -> None:
            if job.number == 1:
                events.append("1 waits for its tracking comment's turn")
                async with pacer.turn("bulk"):
                    events.append("1 writes")
            else:
                events.append("2 starts")
                second_started.set()
                async with pacer.turn("ack"):
                    events.append("2 acknowledges")
            await store.finish(job.id, "done", "ok")

        held = asyncio.create_task(holder())
        await asyncio.sleep(0)
        worker = Worker(store, handle, concurrency=1, poll_s=0.05)
        await worker.start()
        for n in (1, 2):
            await store.enqueue_delivery(f"d{n}", "issue_comment", "created", [_job(n)])
        worker.wake()
        await asyncio.wait_for(second_started.wait(), 30)  # while job 1 still waits
        release.set()
        await held
        await worker.stop()
        await store.close()
        return events

    events = asyncio.run(asyncio.wait_for(run(), 60))
    assert events[:2] == ["1 waits for its tracking comment's turn", "2 starts"]
    # The acknowledgement, queued after the bulk write, goes first.
    assert events[2:] == ["2 acknowledges", "1 writes"]
