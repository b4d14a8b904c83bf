"""Two real `pairbot serve` replicas on one PostgreSQL schema (docs/app.md, Replicas on
PostgreSQL): 1,000 signed deliveries with 10% duplicate delivery ids, spread over both, run
each command exactly once; a replica SIGKILLed while it holds a running job loses nothing (the
other replica finishes the job once the dead one's lease has passed).

GitHub is the fake over loopback (tests/support/github_server.py), shared by both replicas, so
its record of reactions and dispatches covers both. One command's acknowledgement is held
unanswered: the replica running that job is the one killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from app.domain.intake.pair_request import PairRequest
from tests.support.fake_github import rsa_key
from tests.support.github_server import WallClock, serve_fake_github
from tests.support.postgres import schema_url
from tests.support.project import PAIRBOT
from tests.web.conftest import SECRET, HoldingGitHub, comment_event, github_headers

pytestmark = pytest.mark.slow

# Long enough that a live replica busy with a burst of deliveries still renews in time.
LEASE_S = 5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], what: str, timeout: float) -> None:
    """Until `check()` is true (a bound against hanging, never a measured time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def replica(
    tmp: Path, name: str, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    root = tmp / name
    root.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(PAIRBOT),
                "--root",
                str(root),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def healthy() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited: {log.read_text()}")
            try:
                return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, f"{name} to answer /healthz", 60)
        yield process, url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(60)


def test_two_replicas_run_each_command_once_and_a_killed_replicas_job_is_finished(
    tmp_path: Path,
) -> None:
    rng = random.Random(16)
    fake = HoldingGitHub(clock=WallClock())
    octocat = fake.users["octocat"]
    cards = [fake.seed_issue(f"Card {n}", "") for n in range(20)]
    verbs = ["implement", "refine", "status", "retry", "approve"]
    deliveries: list[tuple[str, bytes]] = []
    commands: list[int] = []
    for n in range(200):
        card = cards[n % len(cards)]
        body = f"/pair {verbs[n % len(verbs)]}"
        comment = fake.add_comment(card, body, "octocat")
        commands.append(comment)
        payload = comment_event(fake, card, comment, body, octocat)
        deliveries.append((str(uuid.uuid4()), json.dumps(payload).encode()))
    for n in range(700):
        payload = comment_event(fake, rng.choice(cards), 50_000_000 + n, "LGTM, thanks!", octocat)
        deliveries.append((str(uuid.uuid4()), json.dumps(payload).encode()))
    # The held command goes last, alone: its acknowledgement hangs from the moment it is sent
    # until the test kills the replica, and a burst still in flight on a loaded machine could
    # outlast the replica's own request timeout (it would give up on the hung call by itself).
    held_delivery = deliveries.pop(0)
    deliveries += rng.sample(deliveries, 100)
    rng.shuffle(deliveries)
    assert len(deliveries) == 999 and len({d for d, _ in deliveries}) == 899
    fake.held = commands[0]

    with ExitStack() as stack:
        store_url = stack.enter_context(schema_url())
        base_url = stack.enter_context(serve_fake_github(fake, bare_repo=None))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "PAIR_STORE": store_url,
            "PAIR_STORE_LEASE_S": str(LEASE_S),
            "PAIR_EXECUTION": "actions",
            "PAIR_WEBHOOK_SECRET": SECRET,
            "PAIR_APP_ID": str(fake.app_id),
            "PAIR_PRIVATE_KEY": rsa_key()[0],
            "PAIR_APP_SLUG": fake.app_slug,
            "PAIR_GITHUB_API_URL": base_url,
            "PAIR_GITHUB_WRITE_SPACING_S": "0",
            **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")},
        }
        one, one_url = stack.enter_context(replica(tmp_path, "one", env))
        two, two_url = stack.enter_context(replica(tmp_path, "two", env))
        urls = [one_url, two_url]

        async def send_all() -> list[int]:
            gate = asyncio.Semaphore(16)
            limits = httpx.Limits(max_connections=32, keepalive_expiry=1.0)
            async with httpx.AsyncClient(limits=limits, timeout=60) as client:

                async def send(index: int, delivery: str, body: bytes) -> int:
                    async with gate:
                        response = await client.post(
                            f"{urls[index % 2]}/webhooks/github",
                            content=body,
                            headers=github_headers("issue_comment", body, delivery),
                        )
                        return response.status_code

                burst = await asyncio.gather(*(send(rng.randrange(2), d, b) for d, b in deliveries))
                return [*burst, await send(rng.randrange(2), *held_delivery)]

        statuses = asyncio.run(asyncio.wait_for(send_all(), 300))
        assert all(200 <= status < 300 for status in statuses), sorted(set(statuses))
        assert statuses.count(202) == 200  # each command queued once, whichever replica

        def held_job() -> tuple[int, str] | None:
            with psycopg.connect(store_url) as conn:
                row = conn.execute(
                    "SELECT j.id, j.owner FROM jobs AS j WHERE j.dedupe_key LIKE %s "
                    "AND j.state = 'running'",
                    (f"%:{commands[0]}",),
                ).fetchone()
            return (int(row[0]), str(row[1])) if row is not None else None

        wait_for(lambda: fake.holding and held_job() is not None, "the held job to run", 300)
        found = held_job()
        assert found is not None
        job_id, owner = found
        pid = int(owner.split(":")[1])
        victim = one if pid == one.pid else two
        assert pid == victim.pid, (owner, one.pid, two.pid)
        victim.kill()  # SIGKILL: no clean shutdown, the job stays `running` under its lease
        victim.wait(60)

        def settled() -> bool:
            with psycopg.connect(store_url) as conn:
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FROM jobs"
                ).fetchone()
            return row is not None and row[0] == row[1] == 200

        wait_for(settled, "every job done", 300)
        with psycopg.connect(store_url) as conn:
            held = conn.execute(
                "SELECT state, attempts, owner FROM jobs WHERE id = %s", (job_id,)
            ).fetchone()
        assert held is not None and held[0] == "done" and held[1] == 2 and held[2] != owner

    dispatched = [PairRequest.from_payload(p) for p in fake.comment_payloads()]
    per_comment = sorted(int(r.comment.id) for r in dispatched if r.comment is not None)
    assert per_comment == sorted(commands)  # every command exactly once, across both replicas
    reactions = fake.posts("/reactions")
    assert sorted(reactions) == sorted(
        f"/repos/octocat/Hello-World/issues/comments/{c}/reactions" for c in commands
    )  # one acknowledgement each, the held one by the surviving replica
    assert fake.unexpected == []
