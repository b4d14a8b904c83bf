"""The worker: it holds new jobs back while the edge is busy (boundedly), and the production
executor hands each kind of job to the cycle's own entry for it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from app.domain.dispatch import PairRequest
from app.engine import cycle
from app.store import NewJob, SqliteStore
from app.store.base import JobRecord
from app.web.jobs import HeadMovedJob, ScopeDecisionJob
from app.web.worker import Worker, cycle_executor


def _job(number: int) -> NewJob:
    return NewJob(
        kind="command",
        source="github",
        repo="octocat/Hello-World",
        installation=42,
        target="card",
        number=number,
        dedupe_key=f"github:octocat/Hello-World:comment:{number}",
        serial_key=f"github:octocat/Hello-World#{number}",
        request={"card": number},
    )


class Edge:
    """The edge's load as the worker sees it."""

    def __init__(self) -> None:
        self.busy = False

    def __call__(self) -> bool:
        return self.busy


async def _run_worker(
    tmp_path: Path, edge: Edge, defer_s: float, scenario: Any
) -> tuple[list[float], int]:
    """Run `scenario(store, worker, started)` against a real store; returns when each job was
    started (seconds after the scenario began) and how often the worker held back."""
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    started: list[float] = []
    began = time.monotonic()

    async def handle(job: JobRecord) -> None:
        started.append(time.monotonic() - began)
        await store.finish(job.id, "done", "ok")

    worker = Worker(store, handle, poll_s=0.05, edge_busy=edge, defer_s=defer_s)
    await worker.start()
    try:
        await scenario(store, worker, started)
    finally:
        await worker.stop()
        await store.close()
    return started, worker.holds


def test_the_worker_starts_jobs_at_once_while_the_edge_is_quiet(tmp_path: Path) -> None:
    async def scenario(store: SqliteStore, worker: Worker, started: list[float]) -> None:
        await store.enqueue_delivery("d-1", "issue_comment", "created", [_job(1)])
        worker.wake()
        for _ in range(200):
            if started:
                return
            await asyncio.sleep(0.01)

    started, holds = asyncio.run(_run_worker(tmp_path, Edge(), 5.0, scenario))
    assert len(started) == 1 and started[0] < 1.0
    assert holds == 0


def test_a_busy_edge_holds_new_jobs_back_until_it_is_quiet(tmp_path: Path) -> None:
    edge = Edge()

    async def scenario(store: SqliteStore, worker: Worker, started: list[float]) -> None:
        edge.busy = True
        await store.enqueue_delivery("d-1", "issue_comment", "created", [_job(1)])
        worker.wake()
        await asyncio.sleep(0.3)
        assert started == []  # held back: the edge is answering deliveries
        edge.busy = False
        worker.edge_idle()  # what the edge calls when its last delivery is answered
        for _ in range(200):
            if started:
                return
            await asyncio.sleep(0.01)

    started, holds = asyncio.run(_run_worker(tmp_path, edge, 30.0, scenario))
    assert len(started) == 1 and 0.3 <= started[0] < 1.5
    assert holds == 1


def test_a_job_waits_for_a_busy_edge_no_longer_than_defer_s(tmp_path: Path) -> None:
    edge = Edge()
    edge.busy = True  # and it stays busy: a burst longer than the bound

    async def scenario(store: SqliteStore, worker: Worker, started: list[float]) -> None:
        await store.enqueue_delivery("d-1", "issue_comment", "created", [_job(1), _job(2)])
        worker.wake()
        for _ in range(500):
            if len(started) == 2:
                return
            await asyncio.sleep(0.01)

    started, _ = asyncio.run(_run_worker(tmp_path, edge, 0.4, scenario))
    assert len(started) == 2
    assert all(0.35 <= at < 2.0 for at in started), started


# -- the production executor ----------------------------------------------------------------------


def test_the_cycle_executor_hands_each_kind_of_job_to_its_own_cycle_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, ...]] = []
    env = object()

    def from_environment(root: Path, environ: Any, deps: Any) -> object:
        assert (root, deps) == (tmp_path, "deps")
        return env

    async def handle_request(env_: object, request: PairRequest) -> None:
        calls.append(("request", env_, request.card, request.verb))

    async def handle_scope_decision(env_: object, pull: int, comment: str | None = None) -> None:
        calls.append(("scope-decision", env_, pull, comment))

    async def handle_head_moved(env_: object, pull: int, head: str) -> None:
        calls.append(("head-moved", env_, pull, head))

    async def tick(env_: object, batch: str | None = None) -> None:
        calls.append(("tick", env_))

    monkeypatch.setattr(cycle.CycleEnv, "from_environment", staticmethod(from_environment))
    monkeypatch.setattr(cycle, "handle_request", handle_request)
    monkeypatch.setattr(cycle, "handle_scope_decision", handle_scope_decision)
    monkeypatch.setattr(cycle, "handle_head_moved", handle_head_moved)
    monkeypatch.setattr(cycle, "tick", tick)
    execute = cycle_executor(tmp_path, {}, lambda: "deps")
    head = "a" * 40

    async def go() -> None:
        await execute(PairRequest(card=3, verb="status"), "octocat/Hello-World", 42)
        await execute(ScopeDecisionJob(pull=7, comment_id="123"), "octocat/Hello-World", 42)
        await execute(HeadMovedJob(pull=7, head_sha=head), "octocat/Hello-World", 42)

    asyncio.run(go())
    assert calls == [
        ("request", env, 3, "status"),
        ("scope-decision", env, 7, "123"),
        ("head-moved", env, 7, head),
    ]
