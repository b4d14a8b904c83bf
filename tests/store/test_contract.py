"""The `Store` contract, on SQLite and on a real PostgreSQL (tests/store/conftest.py).

What the edge and the worker rely on whichever store PAIR_STORE names: a delivery is seen
once, its jobs queued once, a card runs one job at a time in order, a dead process's jobs run
again, installations follow their events, and old records are pruned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from app.store import CommandRecord, InstallationChange, NewJob, PrunedJobs, Store
from tests.store.conftest import StoreFactory
from tests.support.postgres import abandon

T = TypeVar("T")


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def job(number: int, *, key: str | None = None, serial: str | None = None, **extra: Any) -> NewJob:
    fields: dict[str, Any] = {
        "kind": "command",
        "source": "github",
        "repo": "octocat/Hello-World",
        "installation": 42,
        "target": "card",
        "number": number,
        "dedupe_key": key or f"github:octocat/Hello-World:comment:{number}",
        "serial_key": serial or f"github:octocat/Hello-World#{number}",
        "request": {"card": number},
    }
    fields.update(extra)
    return NewJob(**fields)


def run(store: Store, body: Callable[[Any], Awaitable[T]]) -> T:
    async def go() -> T:
        await store.open()
        try:
            return await asyncio.wait_for(body(store), 60)
        finally:
            await store.close()

    return asyncio.run(go())


def test_a_delivery_is_seen_once_across_restarts_and_its_jobs_queued_once(
    make_store: StoreFactory,
) -> None:
    record = CommandRecord("implement", {"until": "merged"}, "1", "octocat", "77", "https://x/77")

    async def first(store: Store) -> tuple[int | None, int | None]:
        fresh = await store.enqueue_delivery(
            "d-1", "issue_comment", "created", [job(1, command=record)]
        )
        again = await store.enqueue_delivery("d-1", "issue_comment", "created", [job(1)])
        return fresh, again

    assert run(make_store(), first) == (1, None)  # None: the delivery was seen before

    async def later(store: Store) -> tuple[int | None, int, str | None, dict[str, Any]]:
        again = await store.enqueue_delivery("d-1", "issue_comment", "created", [job(1)])
        jobs = await store.jobs()
        return again, len(jobs), jobs[0].verb, dict(jobs[0].request)

    assert run(make_store(), later) == (None, 1, "implement", {"card": 1})


def test_a_failed_transaction_records_neither_the_delivery_nor_a_job(
    make_store: StoreFactory,
) -> None:
    bad = job(2, request={"not json": object()})

    async def body(store: Store) -> tuple[int, int, int | None]:
        with pytest.raises(TypeError):
            await store.enqueue_delivery("d-2", "issue_comment", "created", [job(1), bad])
        counts = await store.counts()
        deliveries = await store.deliveries()
        # Nothing was recorded, so the redelivery is processed.
        fresh = await store.enqueue_delivery("d-2", "issue_comment", "created", [job(1)])
        return counts["queued"], len(deliveries), fresh

    assert run(make_store(), body) == (0, 0, 1)


def test_two_deliveries_of_one_comment_queue_one_job(make_store: StoreFactory) -> None:
    async def body(store: Store) -> tuple[int | None, int | None, list[str], int]:
        one = await store.enqueue_delivery("d-1", "issue_comment", "created", [job(5)])
        two = await store.enqueue_delivery("d-2", "issue_comment", "created", [job(5)])
        statuses = [d.status for d in sorted(await store.deliveries(), key=lambda d: d.id)]
        return one, two, statuses, len(await store.jobs())

    one, two, statuses, count = run(make_store(), body)
    assert (one, two, count) == (1, 0, 1)  # the second was recorded; its job existed
    assert statuses[0].startswith("queued") and statuses[1].startswith("already-queued")


def test_racing_stores_record_a_delivery_id_exactly_once(make_store: StoreFactory) -> None:
    """Four stores on one database, as four replicas (or processes) would be."""

    async def body() -> list[int | None]:
        stores = [make_store() for _ in range(4)]
        for store in stores:
            await store.open()
        try:
            results: list[int | None] = []
            for round_ in range(25):
                results += await asyncio.gather(
                    *(
                        s.enqueue_delivery(f"d-{round_}", "issue_comment", "created", [job(round_)])
                        for s in stores
                    )
                )
            return results
        finally:
            for store in stores:
                await store.close()

    results = asyncio.run(asyncio.wait_for(body(), 60))
    assert (results.count(1), results.count(None)) == (25, 75)
    assert run(make_store(), lambda s: s.counts())["queued"] == 25


def test_racing_claims_take_each_job_exactly_once_and_one_per_card(
    make_store: StoreFactory,
) -> None:
    """Four stores claim from one queue at once: 40 jobs on 20 cards, each job taken once,
    never two of one card at a time."""

    async def body() -> list[tuple[int, int]]:
        stores = [make_store() for _ in range(4)]
        for store in stores:
            await store.open()
        try:
            await stores[0].enqueue_delivery(
                "d", "e", None, [job(n, serial=f"card-{n % 20}") for n in range(40)]
            )
            taken: list[tuple[int, int]] = []
            while len(taken) < 40:
                rounds = await asyncio.gather(*(s.claim(3, 1e12) for s in stores))
                claimed = [j for round_ in rounds for j in round_]
                cards = [j.number % 20 for j in claimed]
                assert len(cards) == len(set(cards)), cards
                taken += [(j.id, j.number) for j in claimed]
                for index, round_ in enumerate(rounds):
                    for claimed_job in round_:
                        await stores[index].finish(claimed_job.id, "done", "ok")
            return taken
        finally:
            for store in stores:
                await store.close()

    taken = asyncio.run(asyncio.wait_for(body(), 60))
    assert len(taken) == 40 and len({job_id for job_id, _ in taken}) == 40
    # A card's jobs ran in queue order.
    for card in range(20):
        assert [n for _, n in taken if n % 20 == card] == [card, card + 20]


def test_claim_runs_one_job_per_serial_key_in_order_and_honours_retry_times(
    make_store: StoreFactory,
) -> None:
    clock = Clock()

    async def body(store: Store) -> None:
        await store.enqueue_delivery("d-1", "e", None, [job(1), job(2)])
        await store.enqueue_delivery(
            "d-2", "e", None, [job(11, key="k11", serial="github:octocat/Hello-World#1")]
        )
        first = await store.claim(10, clock())
        assert [j.number for j in first] == [1, 2]
        assert all(j.state == "running" and j.attempts == 1 for j in first)
        # Card 1 is running: its next job waits; nothing else is due.
        assert await store.claim(10, clock()) == []
        await store.retry_later(first[0].id, clock() + 30, "rate limited")
        await store.finish(first[1].id, "done", "dispatched")
        # Card 1's first job waits for its retry time, and the job behind it waits too.
        assert await store.claim(10, clock()) == []
        retried = await store.claim(10, clock() + 31)
        assert [(j.number, j.attempts, j.result) for j in retried] == [(1, 2, "rate limited")]
        await store.advance(retried[0].id, "acknowledged")
        await store.finish(retried[0].id, "done", "ok")
        behind = await store.claim(10, clock() + 31)
        assert [j.number for j in behind] == [11]
        done = await store.job(retried[0].id)
        assert done is not None and (done.state, done.stage) == ("done", "acknowledged")
        assert await store.job(10_000) is None

    run(make_store(clock=clock), body)


def test_claim_respects_the_limit(make_store: StoreFactory) -> None:
    async def body(store: Store) -> tuple[int, int, int]:
        await store.enqueue_delivery("d", "e", None, [job(n) for n in range(1, 8)])
        first = await store.claim(3, 1e12)
        second = await store.claim(0, 1e12)
        third = await store.claim(10, 1e12)
        return len(first), len(second), len(third)

    assert run(make_store(), body) == (3, 0, 4)


def test_jobs_left_running_by_a_dead_process_are_queued_again(make_store: StoreFactory) -> None:
    """SQLite queues them again at the next start; PostgreSQL once the dead replica's lease
    has passed (a live replica's jobs are its own)."""

    async def crash() -> int:
        store = make_store(lease_s=0.5)
        await store.open()
        await store.enqueue_delivery("d", "e", None, [job(1), job(2)])
        claimed = len(await store.claim(10, 1e12))
        await abandon(store)
        return claimed

    assert asyncio.run(crash()) == 2

    async def restart(store: Store) -> tuple[int, list[int]]:
        recovered = 0
        for _ in range(200):  # bounded: the lease is half a second
            recovered += await store.recover()
            if recovered >= 2:
                break
            await asyncio.sleep(0.05)
        again = await store.claim(10, 1e12)
        return recovered, [j.attempts for j in again]

    assert run(make_store(), restart) == (2, [2, 2])


def test_installations_follow_their_events(make_store: StoreFactory) -> None:
    async def body(store: Store) -> list[Any]:
        seen = []
        changes = [
            InstallationChange(1, "octocat", repos=("octocat/a", "octocat/b"), suspended=False),
            InstallationChange(1, added=("octocat/c",), removed=("octocat/a",)),
            InstallationChange(1, suspended=True),
            InstallationChange(2, "hubot", repos=()),
            InstallationChange(2, deleted=True),
        ]
        for number, change in enumerate(changes):
            assert (
                await store.enqueue_delivery(
                    f"i-{number}", "installation", None, [], installation=change
                )
                == 0  # recorded (not None), no job
            )
            seen.append(
                [(i.id, i.account, i.repos, i.suspended) for i in await store.installations()]
            )
        return seen

    seen = run(make_store(), body)
    assert seen[0] == [(1, "octocat", ("octocat/a", "octocat/b"), False)]
    assert seen[1] == [(1, "octocat", ("octocat/b", "octocat/c"), False)]
    assert seen[2] == [(1, "octocat", ("octocat/b", "octocat/c"), True)]
    assert seen[3][1] == (2, "hubot", (), False)
    assert seen[4] == seen[2]


def test_the_last_installation_of_a_repository_ignores_case(make_store: StoreFactory) -> None:
    async def body(store: Store) -> tuple[int | None, int | None]:
        await store.enqueue_delivery("d-1", "e", None, [job(1, installation=7)])
        await store.enqueue_delivery("d-2", "e", None, [job(2, installation=9)])
        return (
            await store.last_installation("OCTOCAT/hello-world"),
            await store.last_installation("octocat/other"),
        )

    assert run(make_store(), body) == (9, None)


def test_old_deliveries_are_pruned_and_then_no_longer_recognised(
    make_store: StoreFactory,
) -> None:
    clock = Clock(100.0)

    async def body(store: Store) -> tuple[int, int | None, int, list[str]]:
        await store.enqueue_delivery("old", "ping", None, [], status="ping")
        clock.now = 500.0
        await store.enqueue_delivery("new", "ping", None, [])
        shown = [d.status for d in await store.deliveries()]
        pruned = await store.prune_deliveries(before=200.0)
        again = await store.enqueue_delivery("old", "ping", None, [])
        return pruned, again, len(await store.deliveries()), shown

    assert run(make_store(clock=clock), body) == (1, 0, 2, ["ignored", "ignored: ping"])


def test_using_a_store_that_is_not_open_is_a_clear_error(make_store: StoreFactory) -> None:
    with pytest.raises(RuntimeError, match="open"):
        asyncio.run(make_store().counts())


def test_old_finished_jobs_are_pruned_with_their_commands_and_open_or_recent_jobs_stay(
    make_store: StoreFactory,
) -> None:
    clock = Clock(100.0)
    record = CommandRecord("status", {}, "1", "octocat", "c", "https://x/c")

    async def body(store: Store) -> tuple[PrunedJobs, dict[int, str]]:
        # At t=100: six jobs, each on its own card (so all can be claimed at once).
        await store.enqueue_delivery("old", "e", None, [job(n, command=record) for n in range(6)])
        old = {j.number: j.id for j in await store.claim(10, clock())}
        await store.finish(old[0], "done", "ok")
        await store.finish(old[1], "failed", "boom")
        await store.retry_later(old[2], 0.0, "later")  # queued again: open, however old
        # old[3] stays running; old[4] is finished only at t=500, old[5] is finished at t=100.
        await store.finish(old[5], "done", "ok")
        clock.now = 500.0
        await store.finish(old[4], "done", "ok")
        await store.enqueue_delivery("new", "e", None, [job(10, command=record)])
        new = await store.claim(10, clock())
        await store.finish(next(j.id for j in new if j.number == 10), "done", "ok")
        pruned = await store.prune_jobs(before=200.0)
        return pruned, {j.number: j.state for j in await store.jobs()}

    pruned, left = run(make_store(clock=clock), body)
    assert pruned == PrunedJobs(jobs=3, commands=3)
    assert left == {2: "running", 3: "running", 4: "done", 10: "done"}  # 2 was claimed again


def test_a_pruned_jobs_comment_can_be_queued_again_and_a_kept_ones_cannot(
    make_store: StoreFactory,
) -> None:
    """The dedupe key holds exactly as long as its job is kept (see JOB_RETENTION_S)."""
    clock = Clock(100.0)

    async def body(store: Store) -> list[str]:
        await store.enqueue_delivery("d-1", "e", None, [job(1)])
        await store.finish((await store.claim(1, clock()))[0].id, "done", "ok")
        clock.now = 150.0
        await store.prune_jobs(before=120.0)  # finished at t=100: kept no longer
        await store.enqueue_delivery("d-2", "e", None, [job(1)])
        await store.prune_jobs(before=120.0)  # queued at t=150: kept
        await store.enqueue_delivery("d-3", "e", None, [job(1)])
        return [d.status for d in sorted(await store.deliveries(), key=lambda d: d.id)]

    statuses = run(make_store(clock=clock), body)
    assert [s.split(":")[0] for s in statuses] == ["queued", "queued", "already-queued"]


def test_a_prune_deletes_a_backlog_larger_than_a_chunk(make_store: StoreFactory) -> None:
    clock = Clock(100.0)
    record = CommandRecord("status", {}, "1", "octocat", "c", "https://x/c")

    async def body(store: Store) -> tuple[int, PrunedJobs, dict[str, int]]:
        for n in range(11):
            await store.enqueue_delivery(f"d-{n}", "e", None, [job(n, command=record)])
        # An open old job in the middle of the walk does not stop it.
        for claimed in await store.claim(20, clock()):
            if claimed.number != 5:
                await store.finish(claimed.id, "done", "ok")
        clock.now = 1_000.0
        await store.enqueue_delivery("young", "e", None, [job(99)])
        deliveries = await store.prune_deliveries(before=500.0)
        jobs = await store.prune_jobs(before=500.0)
        return deliveries, jobs, await store.counts()

    deliveries, jobs, counts = run(make_store(clock=clock, prune_chunk=3), body)
    assert (deliveries, jobs) == (11, PrunedJobs(jobs=10, commands=10))
    assert counts == {"queued": 1, "running": 1, "done": 0, "failed": 0}


def test_a_prune_chunk_must_hold_a_row(make_store: StoreFactory) -> None:
    with pytest.raises(ValueError, match="at least one row"):
        make_store(prune_chunk=0)


def test_a_delivery_of_several_jobs_queues_each_with_its_command(
    make_store: StoreFactory,
) -> None:
    implement = CommandRecord("implement", {}, "1", "octocat", "71")
    status = CommandRecord("status", {}, "1", "octocat", "72")

    async def body(
        store: Store,
    ) -> tuple[int | None, list[tuple[int, str | None]], int, int | None]:
        fresh = await store.enqueue_delivery(
            "d-1",
            "issue_comment",
            "created",
            [job(1, command=implement), job(2), job(3, command=status)],
        )
        queued = sorted((j.number, j.verb) for j in await store.jobs())
        (delivery,) = await store.deliveries()
        again = await store.enqueue_delivery("d-1", "issue_comment", "created", [job(4)])
        return fresh, queued, delivery.jobs, again

    assert run(make_store(), body) == (
        3,
        [(1, "implement"), (2, None), (3, "status")],
        3,
        None,
    )


def test_one_comment_twice_in_a_delivery_queues_one_job(make_store: StoreFactory) -> None:
    async def body(store: Store) -> tuple[int | None, int, int]:
        fresh = await store.enqueue_delivery(
            "d-1", "issue_comment", "created", [job(1), job(1, request={"card": 2})]
        )
        (delivery,) = await store.deliveries()
        return fresh, len(await store.jobs()), delivery.jobs

    assert run(make_store(), body) == (1, 1, 1)


def test_a_job_the_database_refuses_records_neither_the_delivery_nor_its_other_jobs(
    make_store: StoreFactory,
) -> None:
    async def body(store: Store) -> tuple[int, int, int | None]:
        with pytest.raises(Exception, match=r"(?i)check"):
            await store.enqueue_delivery(
                "d-1", "issue_comment", "created", [job(1), job(2, kind="not-a-kind")]
            )
        counts = await store.counts()
        deliveries = await store.deliveries()
        fresh = await store.enqueue_delivery("d-1", "issue_comment", "created", [job(1)])
        return sum(counts.values()), len(deliveries), fresh

    assert run(make_store(), body) == (0, 0, 1)


def test_deliveries_written_together_each_keep_their_own_outcome(
    make_store: StoreFactory,
) -> None:
    """Deliveries arriving at once share a commit (group commit) yet each gets its own
    answer: a repeated id is seen once, one comment is queued once, and a delivery the
    database refuses fails alone."""
    command = CommandRecord("status", {}, "1", "octocat", "9")

    async def body(store: Store) -> tuple[list[Any], list[tuple[int, str | None]], list[str]]:
        calls = [
            store.enqueue_delivery(f"d-{n}", "issue_comment", "created", [job(n)])
            for n in range(1, 9)
        ]
        calls += [
            store.enqueue_delivery("d-1", "issue_comment", "created", [job(1)]),  # repeated id
            store.enqueue_delivery("d-20", "issue_comment", "created", [job(20, command=command)]),
            store.enqueue_delivery("d-21", "issue_comment", "created", [job(20, command=command)]),
            store.enqueue_delivery(
                "d-30", "issue_comment", "created", [job(30, kind="not-a-kind")]
            ),
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        answers = ["error" if isinstance(o, BaseException) else o for o in outcomes]
        queued = sorted((j.number, j.verb) for j in await store.jobs())
        statuses = sorted(
            f"{d.id} {d.status.split(':')[0]} {d.jobs}"
            for d in await store.deliveries()
            if d.id in {"d-20", "d-21", "d-30"}
        )
        return answers, queued, statuses

    answers, queued, statuses = run(make_store(), body)
    # None: the id was seen; d-20 and d-21 race for comment 20, one queues it (1), one not (0).
    assert answers[:9] == [1] * 8 + [None] and answers[11] == "error"
    assert sorted(answers[9:11]) == [0, 1]
    assert queued == [(n, None) for n in range(1, 9)] + [(20, "status")]
    # Which of the two deliveries of comment 20 came first is the race's; one queued it.
    assert sorted(s.split(" ", 1)[1] for s in statuses) == ["already-queued 0", "queued 1"]


def test_a_command_read_by_the_worker_is_kept_once_and_pruned_with_its_job(
    make_store: StoreFactory,
) -> None:
    """A GitHub comment is queued unread (no command); the worker's reading adds its record."""
    clock = Clock(100.0)
    status = CommandRecord("status", {}, "1", "octocat", "c", "https://x/c")
    retry = CommandRecord("retry", {}, "1", "octocat", "c", "https://x/c")

    async def body(store: Store) -> tuple[list[str | None], PrunedJobs, int, list[int]]:
        await store.enqueue_delivery("d-1", "issue_comment", "created", [job(1)])
        [claimed] = await store.claim(1, clock())
        verbs = [claimed.verb]
        await store.record_command(claimed.id, status)
        verbs.append((await store.job(claimed.id) or claimed).verb)
        await store.record_command(claimed.id, retry)  # read again: kept as first read
        verbs.append((await store.jobs())[0].verb)
        # No such job yet: nothing is kept, so the job that later gets this id has no verb.
        await store.record_command(claimed.id + 1, status)
        await store.enqueue_delivery("d-2", "issue_comment", "created", [job(2)])
        later = (await store.jobs())[0]
        verbs.append(later.verb)
        await store.finish(claimed.id, "done", "ok")
        clock.now = 500.0
        pruned = await store.prune_jobs(before=200.0)
        left = [j.id - claimed.id for j in await store.jobs()]
        return verbs, pruned, later.id - claimed.id, left

    verbs, pruned, later, left = run(make_store(clock=clock), body)
    assert verbs == [None, "status", "status", None]
    assert later == 1  # the later job did get the id recorded for (ids are sequential)
    assert (pruned, left) == (PrunedJobs(jobs=1, commands=1), [1])  # only it, queued, is left


def test_a_command_kept_with_its_stage_is_written_in_the_same_step(
    make_store: StoreFactory,
) -> None:
    """`advance(..., command)`: the stage and the command, as the worker dispatches a comment
    it read; again (a retried dispatch) changes neither."""
    clock = Clock(100.0)
    status = CommandRecord("status", {}, "1", "octocat", "c", "https://x/c")
    retry = CommandRecord("retry", {}, "1", "octocat", "c", "https://x/c")

    async def body(store: Store) -> list[tuple[str, str | None]]:
        await store.enqueue_delivery("d-1", "issue_comment", "created", [job(1), job(2)])
        first, second = sorted(await store.claim(2, clock()), key=lambda j: j.number)
        await store.advance(first.id, "dispatching", status)
        await store.advance(second.id, "dispatching")
        await store.advance(first.id, "dispatching", retry)
        return [(j.stage, j.verb) for j in sorted(await store.jobs(), key=lambda j: j.number)]

    assert run(make_store(clock=clock), body) == [("dispatching", "status"), ("dispatching", None)]
