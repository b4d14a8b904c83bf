"""`PostgresStore`'s job outcomes ride the worker's next claim (one round trip for a job's end
and the claim of the job that takes its slot), or go alone when no claim comes; a clean close
records them before it queues its unfinished jobs again. On a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from app.store.postgres import PostgresStore
from tests.store.test_contract import job
from tests.support.postgres import schema_url

CARD = "github:octocat/Hello-World#1"


@pytest.fixture
def url() -> Iterator[str]:
    with schema_url() as found:
        yield found


def _states(url: str) -> dict[int, str]:
    """Each job's state as the database has it (another connection, nothing of the store's)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT number, state FROM jobs ORDER BY number").fetchall()
    return {int(number): str(state) for number, state in rows}


def test_a_jobs_outcome_rides_the_claim_that_takes_the_next_job_of_its_card(url: str) -> None:
    async def body() -> tuple[list[int], dict[int, str]]:
        store = PostgresStore(url)
        await store.open()
        try:
            await store.enqueue_delivery(
                "d", "e", None, [job(1, serial=CARD), job(2, key="k2", serial=CARD)]
            )
            (first,) = await store.claim(4, 1e12)  # the card's second job waits for the first
            await store.finish(first.id, "done", "ok")
            # At once: the claim carries the outcome, and counts that job as ended.
            claimed = await store.claim(4, 1e12)
            return [j.number for j in claimed], _states(url)
        finally:
            await store.close()

    claimed, states = asyncio.run(asyncio.wait_for(body(), 30))
    assert claimed == [2]
    assert states == {1: "done", 2: "running"}  # written by that one statement


def test_an_outcome_no_claim_follows_is_recorded_alone(url: str) -> None:
    async def body() -> dict[int, str]:
        store = PostgresStore(url)
        await store.open()
        try:
            await store.enqueue_delivery("d", "e", None, [job(1)])
            (first,) = await store.claim(1, 1e12)
            await store.finish(first.id, "failed", "boom")
            for _ in range(200):  # bounded: the outcome's wait is a few milliseconds
                states = await asyncio.to_thread(_states, url)
                if states[1] != "running":
                    return states
                await asyncio.sleep(0.02)
            return await asyncio.to_thread(_states, url)
        finally:
            await store.close()

    assert asyncio.run(asyncio.wait_for(body(), 30)) == {1: "failed"}


def test_a_clean_close_records_the_outcomes_before_it_hands_back_unfinished_jobs(
    url: str,
) -> None:
    async def body() -> None:
        store = PostgresStore(url)
        await store.open()
        await store.enqueue_delivery("d", "e", None, [job(1), job(2)])
        first, _second = await store.claim(2, 1e12)
        await store.finish(first.id, "done", "ok")
        await store.close()  # at once: the outcome has not gone yet

    asyncio.run(asyncio.wait_for(body(), 30))
    assert _states(url) == {1: "done", 2: "queued"}


def test_a_replica_that_lost_its_lease_frees_no_card_with_the_outcome_it_carries(
    url: str,
) -> None:
    """Its claim counts a job as ended only while it owns it: another replica that took the
    job over still runs it, and the card's next job waits for that one."""

    async def body() -> tuple[list[int], dict[int, str]]:
        dead, taker = PostgresStore(url, lease_s=0.2), PostgresStore(url)
        await dead.open()
        await taker.open()
        try:
            await dead.enqueue_delivery(
                "d", "e", None, [job(1, serial=CARD), job(2, key="k2", serial=CARD)]
            )
            (claimed,) = await dead.claim(1, 1e12)
            await dead._stop_renewing()  # paused past its lease, its connections alive
            taken = []
            for _ in range(200):  # bounded: until its lease has passed
                taken = await taker.claim(1, 1e12)
                if taken:
                    break
                await asyncio.sleep(0.05)
            assert [j.number for j in taken] == [1]
            await dead.finish(claimed.id, "done", "late")
            after = await dead.claim(4, 1e12)
            return [j.number for j in after], _states(url)
        finally:
            await dead.close()
            await taker.close()

    claimed, states = asyncio.run(asyncio.wait_for(body(), 60))
    assert claimed == []
    assert states[1] in {"running", "queued"}  # the taker's (its close hands it back)
