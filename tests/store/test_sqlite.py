"""`SqliteStore` only: WAL, migrations, the claim's plan, group commit, chunked prunes.

The `Store` contract both stores keep is tests/store/test_contract.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.errors import OperatorError
from app.store import CommandRecord, NewJob, PrunedJobs, SqliteStore
from app.store.sqlite.queue import CLAIM
from app.store.sqlite.schema import MIGRATIONS

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


def run(store: SqliteStore, body: Callable[[SqliteStore], Awaitable[T]]) -> T:
    async def go() -> T:
        await store.open()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(go())


def test_open_sets_wal_busy_timeout_and_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store.sqlite3"
    run(SqliteStore(path, busy_timeout_ms=1234), lambda s: s.counts())
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"deliveries", "jobs", "commands", "installations"} <= tables
    finally:
        conn.close()
    # Opening again migrates nothing and keeps the data.
    assert run(SqliteStore(path), lambda s: s.counts()) == {
        "queued": 0,
        "running": 0,
        "done": 0,
        "failed": 0,
    }


def test_a_store_from_a_newer_pairbot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    run(SqliteStore(path), lambda s: s.counts())
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(OperatorError, match="newer than this pairbot knows"):
        run(SqliteStore(path), lambda s: s.counts())


def test_a_version_1_store_is_migrated_and_its_queue_still_runs(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(f"BEGIN;\n{MIGRATIONS[0]}\nPRAGMA user_version = 1;\nCOMMIT;")
    conn.execute(
        "INSERT INTO jobs (delivery_id, kind, source, repo, installation, target, number, "
        "dedupe_key, serial_key, request, created_at, updated_at) VALUES "
        "('d-0', 'command', 'github', 'octocat/Hello-World', 42, 'card', 5, 'k5', 's5', "
        "'{\"card\": 5}', 1, 1)"
    )
    conn.commit()
    conn.close()

    async def body(store: SqliteStore) -> list[int]:
        claimed = await store.claim(10, 1e12)
        return [j.number for j in claimed]

    assert run(SqliteStore(path), body) == [5]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"jobs_open", "jobs_open_order"} <= indexes and "jobs_queue" not in indexes
    finally:
        conn.close()


def test_a_claim_walks_the_open_jobs_index_and_never_sorts_the_whole_queue(
    tmp_path: Path,
) -> None:
    """The claim reads open jobs oldest first and stops at its limit; a plan that groups or
    sorts every queued job made each claim cost as much as the queue was long."""
    path = tmp_path / "s.sqlite3"
    run(SqliteStore(path), lambda s: s.counts())
    conn = sqlite3.connect(path)
    try:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {CLAIM}", (0.0, 4))]
    finally:
        conn.close()
    assert plan[0] == "SEARCH j USING INDEX jobs_open_order (state=?)", plan
    assert not any("TEMP B-TREE" in step or "SCAN" in step for step in plan), plan
    assert all("jobs_open" in step for step in plan if step.startswith("SEARCH")), plan


def _rows(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608 - a table name of this test
    finally:
        conn.close()


def test_old_finished_jobs_are_pruned_with_their_commands_and_open_or_recent_jobs_stay(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    clock = Clock(100.0)
    record = CommandRecord("status", {}, "1", "octocat", "c", "https://x/c")

    async def body(store: SqliteStore) -> tuple[PrunedJobs, dict[int, str]]:
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

    pruned, left = run(SqliteStore(path, clock=clock), body)
    assert pruned == PrunedJobs(jobs=3, commands=3)
    assert left == {2: "running", 3: "running", 4: "done", 10: "done"}  # 2 was claimed again
    assert _rows(path, "commands") == 4  # the pruned jobs' command records went with them


def test_a_prune_deletes_a_backlog_larger_than_a_chunk_in_several_transactions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    clock = Clock(100.0)
    record = CommandRecord("status", {}, "1", "octocat", "c", "https://x/c")
    transactions: list[str] = []

    async def body(store: SqliteStore) -> tuple[int, PrunedJobs]:
        for n in range(11):
            await store.enqueue_delivery(f"d-{n}", "e", None, [job(n, command=record)])
        # An open old job in the middle of the walk does not stop it.
        for claimed in await store.claim(20, clock()):
            if claimed.number != 5:
                await store.finish(claimed.id, "done", "ok")
        clock.now = 1_000.0
        await store.enqueue_delivery("young", "e", None, [job(99)])
        store._connection().set_trace_callback(transactions.append)
        deliveries = await store.prune_deliveries(before=500.0)
        jobs = await store.prune_jobs(before=500.0)
        return deliveries, jobs

    deliveries, jobs = run(SqliteStore(path, clock=clock, prune_chunk=3), body)
    assert (deliveries, jobs) == (11, PrunedJobs(jobs=10, commands=10))
    # 11 deliveries in chunks of 3: 4 transactions; 12 jobs walked 3 at a time: 4.
    assert transactions.count("BEGIN IMMEDIATE") == 8
    assert (_rows(path, "deliveries"), _rows(path, "jobs"), _rows(path, "commands")) == (1, 2, 1)


def test_in_a_group_commit_a_failing_delivery_fails_alone(tmp_path: Path) -> None:
    """The batch is written without a SAVEPOINT each; one failure rolls it back and it is
    written again one SAVEPOINT each, so only the failing delivery is lost."""
    path = tmp_path / "s.sqlite3"
    bad = job(2, request={"not json": object()})

    statements: list[str] = []

    async def body(store: SqliteStore) -> list[Any]:
        store._connection().set_trace_callback(statements.append)
        return await asyncio.gather(
            store.enqueue_delivery("d-1", "e", None, [job(1)]),
            store.enqueue_delivery("d-2", "e", None, [bad]),
            store.enqueue_delivery("d-3", "e", None, [job(3)]),
            store.enqueue_delivery("d-1", "e", None, [job(1)]),  # a duplicate in the batch
            store.enqueue_delivery("d-4", "e", None, [job(1, key=None)]),  # d-1's comment
            return_exceptions=True,
        )

    results = run(SqliteStore(path), body)
    assert (results[0], results[2], results[3]) == (1, 1, None)  # None: seen before
    assert results[4] == 0 and isinstance(results[1], TypeError)  # recorded, its job exists
    assert _rows(path, "deliveries") == 3 and _rows(path, "jobs") == 2
    # One batch: rolled back once, then written again with a SAVEPOINT each.
    assert statements.count("ROLLBACK") == 1 and statements.count("SAVEPOINT delivery") == 5


def test_a_group_commit_without_a_failure_writes_no_savepoint(tmp_path: Path) -> None:
    statements: list[str] = []

    async def body(store: SqliteStore) -> list[int | None]:
        store._connection().set_trace_callback(statements.append)
        return list(
            await asyncio.gather(
                *(store.enqueue_delivery(f"d-{n}", "e", None, [job(n)]) for n in range(8))
            )
        )

    assert run(SqliteStore(tmp_path / "s.sqlite3"), body) == [1] * 8
    assert statements.count("COMMIT") >= 1
    assert not any("SAVEPOINT" in statement for statement in statements)


def test_a_cancelled_enqueue_is_still_committed_with_its_batch(tmp_path: Path) -> None:
    """Its client went away; the delivery is recorded (its work is queued), so the
    redelivery is recognised, and the other deliveries of its commit are unaffected."""

    async def body(store: SqliteStore) -> tuple[bool, int | None, int | None]:
        gone = asyncio.ensure_future(store.enqueue_delivery("d-1", "e", None, [job(1)]))
        other = asyncio.ensure_future(store.enqueue_delivery("d-2", "e", None, [job(2)]))
        await asyncio.sleep(0)  # both are waiting for the commit
        gone.cancel()
        fresh = await other
        await asyncio.sleep(0.05)
        again = await store.enqueue_delivery("d-1", "e", None, [job(1)])
        return gone.cancelled(), fresh, again

    assert run(SqliteStore(tmp_path / "s.sqlite3"), body) == (True, 1, None)


def test_the_bookkeeping_of_jobs_running_side_by_side_shares_one_transaction(
    tmp_path: Path,
) -> None:
    """The worker's jobs reach their stage and their outcome in the same turn of the loop:
    one write transaction each time, not one per job."""
    statements: list[str] = []

    async def body(store: SqliteStore) -> list[tuple[str, str]]:
        await asyncio.gather(
            *(store.enqueue_delivery(f"d-{n}", "e", None, [job(n)]) for n in range(4))
        )
        claimed = await store.claim(4, 2_000.0)
        store._connection().set_trace_callback(statements.append)
        await asyncio.gather(*(store.advance(j.id, "dispatching") for j in claimed))
        await asyncio.gather(*(store.finish(j.id, "done", "ok") for j in claimed))
        found = [await store.job(j.id) for j in claimed]
        return [(j.state, j.stage) for j in found if j is not None]

    assert run(SqliteStore(tmp_path / "s.sqlite3"), body) == [("done", "dispatching")] * 4
    assert statements.count("BEGIN IMMEDIATE") == 2 and statements.count("COMMIT") == 2


def test_in_a_shared_bookkeeping_transaction_a_failing_update_fails_alone(
    tmp_path: Path,
) -> None:
    async def body(store: SqliteStore) -> list[Any]:
        await asyncio.gather(
            *(store.enqueue_delivery(f"d-{n}", "e", None, [job(n)]) for n in range(3))
        )
        one, two, three = await store.claim(3, 2_000.0)
        results = await asyncio.gather(
            store.finish(one.id, "done", "ok"),
            store.finish(two.id, "bogus", "no such state"),  # type: ignore[arg-type]
            store.finish(three.id, "failed", "its own failure"),
            return_exceptions=True,
        )
        states = [(await store.job(j.id)) for j in (one, two, three)]
        return [*results[:1], type(results[1]), *results[2:], *(s.state for s in states if s)]

    assert run(SqliteStore(tmp_path / "s.sqlite3"), body) == [
        None,
        sqlite3.IntegrityError,
        None,
        "done",
        "running",
        "failed",
    ]


def test_the_wal_is_checkpointed_by_the_durable_commits_thread_not_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own checkpoint would run inside whichever statement crosses its threshold —
    often a worker's, on the event loop's thread, which then stops for the fsyncs."""
    monkeypatch.setattr("app.store.sqlite.connection.CHECKPOINT_EVERY", 2)
    loop_thread = threading.get_ident()
    checkpoints: list[bool] = []

    def trace(statement: str) -> None:
        if statement.startswith("PRAGMA wal_checkpoint"):
            checkpoints.append(threading.get_ident() == loop_thread)

    async def body(store: SqliteStore) -> int:
        conn = store._connection()
        conn.set_trace_callback(trace)
        for n in range(4):
            await store.enqueue_delivery(f"d-{n}", "e", None, [job(n)])
        return int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    autocheckpoint = run(SqliteStore(tmp_path / "s.sqlite3"), body)
    assert checkpoints == [False, False]  # every 2nd durable commit, never on the loop
    assert autocheckpoint >= 10_000  # SQLite's own only as a backstop


def test_a_delivery_waits_for_another_processs_write_lock_off_the_event_loop(
    tmp_path: Path,
) -> None:
    """The worker's process holds the write lock: the delivery's transaction waits for it in
    a worker thread (the loop goes on serving) and is answered once its durable commit is
    done."""
    path = tmp_path / "s.sqlite3"

    async def body(store: SqliteStore) -> tuple[bool, int | None, int]:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(store.enqueue_delivery("d-1", "e", None, [job(1)]))
        for _ in range(20):  # the loop turns while the delivery waits for the lock
            await asyncio.sleep(0.001)
        waiting = not pending.done()
        other.execute("COMMIT")
        other.close()
        async with asyncio.timeout(10):
            answered = await pending
        return waiting, answered, _rows(path, "jobs")

    assert run(SqliteStore(path), body) == (True, 1, 1)


def test_a_write_lock_held_past_the_busy_timeout_fails_the_delivery_and_records_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"

    async def body(store: SqliteStore) -> tuple[str, int | None]:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as refused:
            await store.enqueue_delivery("d-1", "e", None, [job(1)])
        other.execute("ROLLBACK")
        other.close()
        return str(refused.value), await store.enqueue_delivery("d-1", "e", None, [job(1)])

    # a redelivery after the failure is new: nothing of the first attempt was kept
    assert run(SqliteStore(path, busy_timeout_ms=50), body) == ("database is locked", 1)


def test_close_writes_the_bookkeeping_already_handed_over(tmp_path: Path) -> None:
    """A job cancelled while its outcome waits for the shared transaction (the worker's drain
    ran out): the outcome is still written before the store closes."""
    path = tmp_path / "s.sqlite3"

    async def body(store: SqliteStore) -> int:
        await store.enqueue_delivery("d-1", "e", None, [job(1)])
        (claimed,) = await store.claim(1, 2_000.0)
        pending = asyncio.ensure_future(store.finish(claimed.id, "done", "ok"))
        await asyncio.sleep(0)  # handed over, not yet written
        pending.cancel()
        return claimed.id

    job_id = run(SqliteStore(path), body)
    conn = sqlite3.connect(path)
    try:
        state = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
    finally:
        conn.close()
    assert state == "done"
