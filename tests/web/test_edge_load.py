"""While the edge is busy answering deliveries, the worker's jobs yield to the answers
(app.web.edge_load): the edge counts what is in flight and says busy / quiet once a spell, and
the worker then runs one job at a time, its full concurrency again once the edge is quiet.
Real SQLite, real ASGI endpoints; no time asserted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.store.base import JobRecord
from app.store.factory import make_store
from app.web.asgi import Answer, Endpoint
from app.web.edge_load import BUSY_AT, EdgeLoad
from app.web.worker import Worker
from app.web.worker_child import edge_state
from tests.web.test_worker_loop import _job


def test_busy_is_told_once_a_spell_from_busy_at_in_flight_until_none_is() -> None:
    told: list[bool] = []
    load = EdgeLoad(told.append)
    for _ in range(BUSY_AT - 1):
        load.begin()
    load.end()
    load.begin()  # back to BUSY_AT - 1: an ordinary overlap, nothing said
    assert told == [] and load.in_flight == BUSY_AT - 1
    load.begin()
    assert told == [True] and load.busy
    for _ in range(10):  # a burst: deliveries come and go, still one spell
        load.begin()
        load.end()
    for _ in range(BUSY_AT - 1):
        load.end()
    assert told == [True]  # one still in flight: still busy
    load.end()
    assert told == [True, False] and not load.busy and load.in_flight == 0


def test_busy_at_must_count_at_least_one_delivery() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EdgeLoad(lambda _: None, busy_at=0)


def test_an_endpoint_counts_a_request_until_it_is_answered_whatever_ends_it() -> None:
    async def run() -> tuple[list[int], list[bool], int]:
        told: list[bool] = []
        load = EdgeLoad(told.append, busy_at=2)
        seen: list[int] = []
        release = asyncio.Event()

        async def handle(scope: dict[str, object], _receive: object) -> Answer | None:
            seen.append(load.in_flight)
            if scope["path"] == "/fails":
                raise RuntimeError("a bug")
            if scope["path"] == "/held":
                await release.wait()
            return Answer(202, b"{}")

        endpoint = Endpoint(handle, load)  # type: ignore[arg-type]  # the scope's keys it reads
        sent: list[object] = []

        async def send(message: object) -> None:
            sent.append(message)

        async def call(path: str) -> None:
            await endpoint({"path": path}, None, send)  # type: ignore[arg-type]

        held = asyncio.create_task(call("/held"))
        await asyncio.sleep(0)
        await call("/fails")  # answered 500, and no longer in flight
        cancelled = asyncio.create_task(call("/held"))
        await asyncio.sleep(0)
        assert told == [True]  # two in flight
        cancelled.cancel()  # its client left
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        release.set()
        await held
        return seen, told, load.in_flight

    seen, told, in_flight = asyncio.run(asyncio.wait_for(run(), 30))
    assert seen == [1, 2, 2]
    assert told == [True, False] and in_flight == 0


@pytest.mark.parametrize(
    ("data", "busy"),
    [
        (b"w", None),
        (b"wwbw", True),
        (b"bwq", False),
        (b"qwwb", True),
        (b"", None),
    ],
)
def test_the_worker_process_reads_the_last_state_the_edge_sent(
    data: bytes, busy: bool | None
) -> None:
    assert edge_state(data) is busy


def test_while_the_edge_is_busy_the_worker_runs_one_job_at_a_time(tmp_path: Path) -> None:
    async def run() -> tuple[list[int], list[int], int]:
        store = make_store(tmp_path / "pairbot.sqlite3")
        await store.open()
        release = asyncio.Event()
        started: list[int] = []
        first_started, all_started = asyncio.Event(), asyncio.Event()

        async def handle(job: JobRecord) -> None:
            started.append(job.number)
            first_started.set()
            if len(started) == 4:
                all_started.set()
            await release.wait()
            await store.finish(job.id, "done", "ok")

        # A poll far beyond the test's bound: only a wake (or the quiet edge) claims.
        worker = Worker(store, handle, concurrency=4, poll_s=3600.0)
        await worker.start()
        worker.yield_to_edge(True)
        for n in range(1, 5):
            await store.enqueue_delivery(f"d{n}", "issue_comment", "created", [_job(n)])
            worker.wake()
        await first_started.wait()
        for _ in range(50):  # the claims the later wakes asked for (statements on this loop)
            await asyncio.sleep(0)
        while_busy = list(started)
        worker.yield_to_edge(False)  # quiet: the slots come back, claimed at once
        await all_started.wait()
        release.set()
        most = worker.max_parallel
        await worker.stop()
        await store.close()
        return while_busy, started, most

    while_busy, started, most = asyncio.run(asyncio.wait_for(run(), 60))
    assert while_busy == [1]
    assert sorted(started) == [1, 2, 3, 4] and most == 4
