"""While the edge is busy answering deliveries, the worker's jobs yield to the answers
(app.web.edge_load): the edge counts what is in flight and says busy / quiet once a spell, and
the worker then runs one job at a time, its full concurrency again once the edge is quiet.
Real SQLite, the real edge on uvicorn; no time asserted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from app.store.base import JobRecord
from app.store.factory import make_store
from app.web.app import create_app
from app.web.edge_load import BUSY_AT, EdgeLoad
from app.web.worker import Worker
from app.web.worker_child import edge_state
from tests.web.conftest import (
    AppGitHub,
    app_settings,
    comment_event,
    github_forges,
    github_headers,
    served,
)
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


def test_the_edge_counts_a_delivery_from_its_read_body_to_its_answer(
    fake: AppGitHub, tmp_path: Path
) -> None:
    """Clients still sending their bodies are not in flight (slow ones must not make the edge
    look busy); a delivery being stored is, until it is answered."""
    app = create_app(app_settings(tmp_path), github=github_forges(fake), poll_s=0.05)
    with served(app) as edge, contextlib.ExitStack() as slow:
        service = edge.service
        port = int(edge.url.rsplit(":", 1)[1])
        body = json.dumps({"zen": "Design for failure."}).encode()
        for n in range(BUSY_AT):  # each sends its headers and half its body, then waits
            sock = slow.enter_context(socket.create_connection(("127.0.0.1", port), 30))
            head = {**github_headers("ping", body), "X-GitHub-Delivery": f"slow-{n}"}
            lines = "".join(f"{name}: {value}\r\n" for name, value in head.items())
            sock.sendall(
                b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + lines.encode()
                + b"Content-Length: %d\r\n\r\n" % len(body)
                + body[: len(body) // 2]
            )
        deadline = time.monotonic() + 30
        while service.budget.held < BUSY_AT * len(body):  # the edge is reading all of them
            assert time.monotonic() < deadline, "the slow clients' requests never arrived"
            time.sleep(0.01)
        enqueue = service.store.enqueue_delivery
        seen: list[int] = []

        async def counted(*args: Any, **kwargs: Any) -> int | None:
            seen.append(service.edge_load.in_flight)
            return await enqueue(*args, **kwargs)

        service.store.enqueue_delivery = counted
        card = fake.seed_issue("A card", "")
        comment = fake.add_comment(card, "/pair status", "octocat")
        event = comment_event(fake, card, comment, "/pair status", fake.users["octocat"])
        assert edge.deliver("issue_comment", event).status_code == 202
        assert seen == [1] and service.edge_load.in_flight == 0
        assert not service.edge_load.busy


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
