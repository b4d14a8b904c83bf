"""A real App process SIGKILLed between reading a delivery's body and queueing its work loses
nothing: GitHub's redelivery to the restarted process runs the command, once."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.web.conftest import AppGitHub, comment_event, github_headers

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Until `check()` is true (a deadline against hanging, never a measured time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def app_process(
    tmp_path: Path, *, pause: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # listening before the child starts: nothing sent early is refused
    port = sock.getsockname()[1]
    argv = [
        sys.executable,
        "-m",
        "tests.web.crash_server",
        "--fd",
        str(sock.fileno()),
        "--store",
        str(tmp_path / "pairbot.sqlite3"),
        "--record",
        str(tmp_path / "executed.jsonl"),
    ]
    if pause is not None:
        argv += ["--pause", str(pause)]
    log = (tmp_path / "server.log").open("ab")
    process = subprocess.Popen(
        argv, cwd=ROOT, pass_fds=[sock.fileno()], stdout=log, stderr=log, env=dict(os.environ)
    )
    sock.close()  # the child has its own copy
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the App exited: {(tmp_path / 'server.log').read_text()}")
            try:
                return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, "the App to answer /healthz")
        yield process, url
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=60)
        log.close()


def rows(store: Path, table: str) -> int:
    conn = sqlite3.connect(store)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608
    finally:
        conn.close()


def test_a_process_killed_between_reading_and_queueing_loses_nothing(tmp_path: Path) -> None:
    fake = AppGitHub()  # the same ids the server's fake gives: issue 1, comment 1000001
    card = fake.seed_issue("Crash-safe card", "")
    comment = fake.add_comment(card, "/pair implement", "octocat")
    body = json.dumps(
        comment_event(fake, card, comment, "/pair implement", fake.users["octocat"])
    ).encode()
    headers = github_headers("issue_comment", body, "crash-delivery-1")
    record = tmp_path / "executed.jsonl"
    paused = tmp_path / "paused"
    store = tmp_path / "pairbot.sqlite3"

    with app_process(tmp_path, pause=paused) as (process, url):
        outcome: list[object] = []

        def deliver() -> None:
            try:
                outcome.append(
                    httpx.post(f"{url}/webhooks/github", content=body, headers=headers, timeout=60)
                )
            except httpx.HTTPError as err:
                outcome.append(err)

        sender = threading.Thread(target=deliver)
        sender.start()
        wait_for(paused.exists, "the handler to read the body")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        sender.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.HTTPError)  # GitHub saw a failure
    assert rows(store, "deliveries") == 0 and rows(store, "jobs") == 0
    assert not record.exists()

    with app_process(tmp_path) as (_, url):
        redelivered = httpx.post(
            f"{url}/webhooks/github", content=body, headers=headers, timeout=60
        )
        assert (redelivered.status_code, redelivered.json()["status"]) == (202, "queued")
        wait_for(lambda: record.exists() and record.read_text().count("\n") >= 1, "the job to run")
        again = httpx.post(f"{url}/webhooks/github", content=body, headers=headers, timeout=60)
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")

    # A third process on the same store still recognises the delivery.
    with app_process(tmp_path) as (_, url):
        late = httpx.post(f"{url}/webhooks/github", content=body, headers=headers, timeout=60)
        assert late.json()["status"] == "duplicate"

    executed = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(executed) == 1
    assert (
        executed[0]["job"]["card"] == card and executed[0]["job"]["command"]["verb"] == "implement"
    )
    assert executed[0]["job"]["delivery"] == "crash-delivery-1"
    assert rows(store, "deliveries") == 1 and rows(store, "jobs") == 1
