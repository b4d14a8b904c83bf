"""`PostgresStore` only, on a real PostgreSQL: migrations, leases between replicas, errors.

The `Store` contract it shares with SQLite is tests/store/test_contract.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest

from app.errors import OperatorError
from app.store.factory import alone_across_replicas, make_store, redact_url
from app.store.postgres import PostgresStore
from app.store.postgres.schema import MIGRATIONS
from app.store.sqlite import SqliteStore
from tests.store.test_contract import job
from tests.support.postgres import abandon, schema_url


@pytest.fixture
def url() -> Iterator[str]:
    with schema_url() as found:
        yield found


def _db_now(url: str) -> float:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        assert row is not None
        return float(row[0])


def test_replicas_opening_together_migrate_once_and_a_reopen_migrates_nothing(url: str) -> None:
    async def body() -> None:
        stores = [PostgresStore(url) for _ in range(3)]
        await asyncio.gather(*(s.open() for s in stores))
        for store in stores:
            await store.close()
        again = PostgresStore(url)
        await again.open()
        await again.open()  # a second open and close change nothing
        await again.close()
        await again.close()

    asyncio.run(asyncio.wait_for(body(), 60))
    with psycopg.connect(url) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))


def test_a_schema_from_a_newer_pairbot_is_refused(url: str) -> None:
    asyncio.run(PostgresStore(url).open())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (99)")
    with pytest.raises(OperatorError, match="newer than this pairbot knows"):
        asyncio.run(PostgresStore(url).open())


def test_a_server_that_does_not_answer_is_one_line_without_the_password() -> None:
    store = PostgresStore(
        "postgresql://pairbot:hunter2@127.0.0.1:1/db", connect_timeout_s=2, lease_s=5
    )
    assert "hunter2" not in repr(store)
    with pytest.raises(OperatorError) as caught:
        asyncio.run(store.open())
    message = str(caught.value)
    assert message.startswith("PAIR_STORE: cannot connect to PostgreSQL at postgresql://pairbot:")
    assert "hunter2" not in message and "\n" not in message


def test_a_live_replicas_running_job_is_its_own_past_its_first_lease(url: str) -> None:
    """The replica renews its lease: another replica neither recovers nor claims the job."""

    async def body() -> tuple[int, int, int]:
        # A lease of a second, renewed every third: a loaded machine's late renewal still lands.
        live, other = PostgresStore(url, lease_s=1.0), PostgresStore(url)
        await live.open()
        await other.open()
        try:
            await live.enqueue_delivery("d", "e", None, [job(1)])
            (claimed,) = await live.claim(1, 1e12)
            first_lease = _db_now(url) + 1.0
            for _ in range(400):  # bounded: until the first lease would have run out
                if _db_now(url) > first_lease + 0.5:
                    break
                await asyncio.sleep(0.05)
            stolen = await other.recover() + len(await other.claim(5, 1e12))
            await live.finish(claimed.id, "done", "ok")
            await live.job(claimed.id)  # its outcome sent (else its next claim carries it)
            counts = await other.counts()
            return stolen, counts["done"], counts["running"]
        finally:
            await live.close()
            await other.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == (0, 1, 0)


def test_a_replica_that_lost_its_lease_cannot_finish_the_job_another_took(url: str) -> None:
    async def body() -> tuple[str, str, int]:
        dead, taker = PostgresStore(url, lease_s=0.2), PostgresStore(url)
        await dead.open()
        await taker.open()
        try:
            await dead.enqueue_delivery("d", "e", None, [job(1)])
            (claimed,) = await dead.claim(1, 1e12)
            await dead._stop_renewing()  # paused past its lease, but its connections live on
            taken = []
            for _ in range(200):
                taken = await taker.claim(1, 1e12)
                if taken:
                    break
                await asyncio.sleep(0.05)
            await dead.advance(claimed.id, "late")
            await dead.finish(claimed.id, "failed", "late")
            await dead.job(claimed.id)  # its outcome sent: refused, the job is the taker's
            record = await taker.job(claimed.id)
            assert record is not None
            return record.state, record.stage, record.attempts
        finally:
            await abandon(dead)
            await taker.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == ("running", "", 2)


def test_a_replica_stopped_cleanly_hands_its_running_jobs_back_at_once(url: str) -> None:
    async def body() -> list[int]:
        first, second = PostgresStore(url), PostgresStore(url)
        await first.open()
        await second.open()
        try:
            await first.enqueue_delivery("d", "e", None, [job(1), job(2)])
            await first.claim(5, 1e12)
            await first.close()
            return [j.attempts for j in await second.claim(5, 1e12)]
        finally:
            await second.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == [2, 2]


def test_a_lease_must_last() -> None:
    with pytest.raises(ValueError, match="positive"):
        PostgresStore("postgresql://x/y", lease_s=0)
    with pytest.raises(ValueError, match="at least one row"):
        PostgresStore("postgresql://x/y", prune_chunk=0)


def test_the_factory_builds_the_store_pair_store_names(tmp_path: Path) -> None:
    assert isinstance(make_store(tmp_path / "s.sqlite3"), SqliteStore)
    built = make_store(tmp_path / "unused", "postgres://u:pw@db.example/pairbot")
    assert isinstance(built, PostgresStore)
    assert redact_url("postgresql://u:pw@db:5432/x?sslmode=require") == (
        "postgresql://u:***@db:5432/x?sslmode=require"
    )
    assert redact_url("postgresql://db/x") == "postgresql://db/x"
    assert redact_url("postgresql://[::1/x") == "<unparsable URL>"


def test_the_sqlite_path_never_imports_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys, pathlib; import app.web.serve, app.web.app, app.store; "
        "from app.store.factory import make_store; make_store(pathlib.Path('s.sqlite3')); "
        "print(sorted(m for m in sys.modules if m.startswith('psycopg')))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.strip() == "[]"


def test_a_tick_runs_on_one_replica_at_a_time_and_sqlite_ticks_as_is(
    url: str, tmp_path: Path
) -> None:
    async def body() -> tuple[bool, bool, bool, list[str]]:
        one, two = PostgresStore(url), PostgresStore(url)
        await one.open()
        await two.open()
        ran: list[str] = []
        inside, leave = asyncio.Event(), asyncio.Event()

        async def long_tick() -> bool:
            ran.append("one")
            inside.set()
            await leave.wait()
            return True

        async def other_tick() -> bool:
            ran.append("two")
            return True

        try:
            first = asyncio.ensure_future(alone_across_replicas(one, long_tick)())
            await inside.wait()
            skipped = await alone_across_replicas(two, other_tick)()  # one is ticking
            leave.set()
            stepped = await first
            after = await alone_across_replicas(two, other_tick)()  # the lock was released
            return skipped, stepped, after, ran
        finally:
            await one.close()
            await two.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == (False, True, True, ["one", "two"])

    async def tick() -> bool:
        return True

    assert alone_across_replicas(SqliteStore(tmp_path / "s.sqlite3"), tick) is tick


def test_a_full_replicas_announcement_wakes_the_other_replicas_worker(url: str) -> None:
    """Replica A's one slot is busy when a second job is queued there: A announces it, and
    B's worker (whose poll is an hour away) wakes and runs it at once."""
    from app.store.base import JobRecord
    from app.web.worker import Worker

    async def body() -> tuple[list[int], list[int]]:
        a, b = PostgresStore(url), PostgresStore(url)
        await a.open()
        await b.open()
        a_ran: list[int] = []
        b_ran: list[int] = []
        a_busy, release, b_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        listening = asyncio.Event()

        async def a_handle(job_: JobRecord) -> None:
            a_ran.append(job_.number)
            a_busy.set()
            await release.wait()
            await a.finish(job_.id, "done", "ok")

        async def b_handle(job_: JobRecord) -> None:
            b_ran.append(job_.number)
            await b.finish(job_.id, "done", "ok")
            b_done.set()

        listen = b.listen

        async def listen_and_tell(wake: Callable[[], None]) -> None:
            def woken() -> None:
                wake()
                listening.set()  # the first call: LISTEN is in place

            await listen(woken)

        b.listen = listen_and_tell  # type: ignore[method-assign]
        a_worker = Worker(a, a_handle, concurrency=1, poll_s=3600)
        b_worker = Worker(b, b_handle, concurrency=1, poll_s=3600)
        try:
            await a_worker.start()
            await a.enqueue_delivery("d-1", "e", None, [job(1)])
            a_worker.wake()
            await a_busy.wait()
            await b_worker.start()
            await listening.wait()
            await a.enqueue_delivery("d-2", "e", None, [job(2)])
            a_worker.wake()  # full: announces
            await b_done.wait()
            return a_ran, b_ran
        finally:
            release.set()
            await a_worker.stop()
            await b_worker.stop()
            await a.close()
            await b.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == ([1], [2])


def test_an_announcement_does_not_wake_the_replica_that_made_it(url: str) -> None:
    async def body() -> tuple[int, int]:
        a, b = PostgresStore(url), PostgresStore(url)
        await a.open()
        await b.open()
        woken = {"a": 0, "b": 0}
        b_woken = asyncio.Event()

        def wake_a() -> None:
            woken["a"] += 1

        def wake_b() -> None:
            woken["b"] += 1
            if woken["b"] > 1:
                b_woken.set()

        try:
            await a.listen(wake_a)
            await b.listen(wake_b)
            for _ in range(400):  # bounded: until both listeners are connected
                if woken["a"] and woken["b"]:
                    break
                await asyncio.sleep(0.02)
            a.announce()
            a.announce()  # within ANNOUNCE_EVERY_S of the first: not sent
            await b_woken.wait()
            if a._announcing is not None:
                await a._announcing
            # A notification to b reached a's listener too, and was recognised as a's own.
            await b.listen(wake_b)  # already listening: nothing new
            return woken["a"], woken["b"]
        finally:
            await a.close()
            await b.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == (1, 2)


def test_the_heartbeat_renews_every_running_job_of_its_replica_and_stops_with_it(
    url: str,
) -> None:
    def leases() -> dict[int, float]:
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT id, lease_until FROM jobs WHERE state = 'running'")
            return {int(row[0]): float(row[1]) for row in rows}

    async def body() -> tuple[int, bool, list[int]]:
        live, other = PostgresStore(url, lease_s=0.9), PostgresStore(url)
        await live.open()
        await other.open()
        try:
            await live.enqueue_delivery("d", "e", None, [job(1), job(2), job(3)])
            claimed = await live.claim(5, 1e12)
            first = leases()
            for _ in range(400):  # bounded: until every lease was renewed
                await asyncio.sleep(0.05)
                now = leases()
                if all(now[i] > first[i] + 0.2 for i in first):
                    break
            renewed = all(leases()[i] > first[i] for i in first)
            await live._abandon()  # the heartbeat stops with the replica
            taken: list[int] = []
            for _ in range(400):  # bounded: the lease is under a second
                taken += [j.id for j in await other.claim(5, 1e12)]
                if len(taken) == len(claimed):
                    break
                await asyncio.sleep(0.05)
            return len(claimed), renewed, sorted(taken)
        finally:
            await live._abandon()
            await other.close()

    count, renewed, taken = asyncio.run(asyncio.wait_for(body(), 60))
    assert (count, renewed) == (3, True)
    assert len(taken) == 3


def test_a_database_of_the_first_schema_is_migrated_forward_with_its_jobs(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for statement in MIGRATIONS[0]:
            conn.execute(cast(Any, statement))  # constant DDL, as _migrate runs it
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute(
            "INSERT INTO jobs (delivery_id, kind, source, repo, target, number, dedupe_key, "
            "serial_key, request, created_at, updated_at) VALUES ('d', 'command', 'github', "
            "'o/r', 'card', 1, 'k', 's', '{}', 1, 1)"
        )

    async def body() -> list[int]:
        store = PostgresStore(url)
        await store.open()
        try:
            return [j.number for j in await store.claim(5, 1e12)]
        finally:
            await store.close()

    assert asyncio.run(asyncio.wait_for(body(), 60)) == [1]
    with psycopg.connect(url) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes")}
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    assert "jobs_running_key" in indexes


def test_a_prune_waits_for_an_outcome_already_on_its_way(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's outcome that no claim took is sent alone; a prune that starts while it is being
    written waits for it, rather than finding the job still running (or skipping its row, which
    that write holds): a flake of the contract's prune test under load, made certain here."""
    monkeypatch.setattr("app.store.postgres.store.OUTCOME_WAIT_S", 0.0)
    write = PostgresStore._write_updates
    gates: list[asyncio.Event] = []

    async def held(self: PostgresStore, updates: Any) -> list[None]:
        await gates[0].wait()
        return await write(self, updates)

    monkeypatch.setattr(PostgresStore, "_write_updates", held)

    async def body() -> Any:
        gates.append(asyncio.Event())
        store = PostgresStore(url, clock=lambda: 100.0)
        await store.open()
        try:
            await store.enqueue_delivery("d-1", "e", None, [job(1)])
            (claimed,) = await store.claim(5, 100.0)
            await store.finish(claimed.id, "done", "ok")
            while not store._sending:  # noqa: ASYNC110 - until the outcome is sent alone, held
                await asyncio.sleep(0.001)
            asyncio.get_running_loop().call_later(0.05, gates[0].set)
            return await store.prune_jobs(before=500.0)
        finally:
            gates[0].set()
            await store.close()

    pruned = asyncio.run(asyncio.wait_for(body(), 60))
    assert (pruned.jobs, pruned.commands) == (1, 0)
