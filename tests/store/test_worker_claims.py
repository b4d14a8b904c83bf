"""How often the worker asks the store for jobs (app/web/worker.py), on an in-memory store:
a job's end claims again only when jobs may be waiting, and a full worker announces."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from app.store.base import JobRecord
from app.web.worker import Worker


def record(job_id: int) -> JobRecord:
    return JobRecord(
        id=job_id,
        delivery_id=f"d-{job_id}",
        kind="command",
        source="github",
        repo="octocat/Hello-World",
        installation=1,
        target="card",
        number=job_id,
        request={},
        state="running",
        stage="",
        attempts=1,
        not_before=0.0,
        result="",
        created_at=0.0,
        updated_at=0.0,
    )


@dataclass
class QueueStore:
    """Just enough of a store for the worker: a list of runnable ids, claims counted."""

    queued: list[int] = field(default_factory=list)
    claims: int = 0
    announced: int = 0
    listening: bool = False

    async def recover(self) -> int:
        return 0

    async def claim(self, limit: int, now: float) -> list[JobRecord]:
        self.claims += 1
        taken, self.queued = self.queued[:limit], self.queued[limit:]
        return [record(job_id) for job_id in taken]

    async def prune_deliveries(self, before: float) -> int:
        return 0

    async def prune_jobs(self, before: float) -> object:
        from app.store.base import PrunedJobs

        return PrunedJobs()

    def announce(self) -> None:
        self.announced += 1


async def settle() -> None:
    for _ in range(20):  # a few turns of the loop: no clock involved
        await asyncio.sleep(0)


def test_a_quiet_jobs_end_claims_nothing_more_and_a_busy_ones_does() -> None:
    async def body() -> tuple[int, int, list[int]]:
        store = QueueStore()
        ran: list[int] = []
        gate = asyncio.Event()

        async def handle(job: JobRecord) -> None:
            ran.append(job.id)
            if job.id == 2:
                await gate.wait()

        worker = Worker(store, handle, concurrency=4, poll_s=3600)  # type: ignore[arg-type]
        await worker.start()
        await settle()
        start_claims = store.claims  # the first look at start
        store.queued.append(1)
        worker.wake()
        await settle()
        quiet = store.claims - start_claims  # one claim for job 1; its end claims nothing
        # Job 2 runs (held); job 3 is queued meanwhile and claimed by the wake; a claim made
        # while a job runs keeps looking after each end (the running job may hold back more).
        store.queued.append(2)
        worker.wake()
        await settle()
        before = store.claims
        store.queued.append(3)
        worker.wake()
        await settle()
        gate.set()
        await settle()
        busy = store.claims - before
        await worker.stop()
        return quiet, busy, ran

    quiet, busy, ran = asyncio.run(asyncio.wait_for(body(), 30))
    assert quiet == 1
    assert busy >= 2  # the wake's claim, and another after job 2's end
    assert ran == [1, 2, 3]


def test_a_full_worker_announces_a_queued_job_to_the_other_replicas() -> None:
    async def body() -> tuple[int, int]:
        store = QueueStore()
        gate = asyncio.Event()

        async def handle(job: JobRecord) -> None:
            await gate.wait()

        worker = Worker(store, handle, concurrency=1, poll_s=3600)  # type: ignore[arg-type]
        await worker.start()
        store.queued.append(1)
        worker.wake()  # a free slot: nothing to announce
        await settle()
        quiet = store.announced
        store.queued.append(2)
        worker.wake()  # the one slot is taken: announced
        full = store.announced
        gate.set()
        await worker.stop()
        return quiet, full

    assert asyncio.run(asyncio.wait_for(body(), 30)) == (0, 1)
