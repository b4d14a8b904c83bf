"""`pairbot serve` runs the worker in a process of its own (app.web.worker_process): the real
console script on loopback, GitHub the fake over loopback (tests/support/github_server.py).

It starts and stops with the server, runs a delivered command, is restarted when killed (the
job it held runs again, on the new one), leaves no orphan when the server is killed, and a
PAIR_WORKER_PROCESS it does not know is refused at start.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.errors import ConfigError
from app.store.sqlite.store import SqliteStore
from app.web.forge import LocalForges
from app.web.service import Service
from app.web.settings import AppSettings
from app.web.worker_process import WorkerProcess, WorkerRecipe
from tests.support.fake_github import rsa_key
from tests.support.github_server import WallClock, serve_fake_github
from tests.support.project import PAIRBOT, cli
from tests.web.conftest import SECRET, AppGitHub, HoldingGitHub, comment_event, github_headers

START_S = 60.0  # bounds, never measured times: a loaded machine starts Python slowly


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], what: str, timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    """`pid` runs (a zombie, exited but not reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    store: Path
    log: Path

    def health(self) -> tuple[int, dict[str, Any]]:
        try:
            answer = httpx.get(f"{self.url}/healthz", timeout=5)
        except httpx.HTTPError:
            return 0, {}
        return answer.status_code, answer.json()

    def worker_pid(self) -> int:
        status, body = self.health()
        assert status == 200, body
        return int(body["process"])

    def jobs(self) -> list[tuple[str, int]]:
        """(state, attempts) of every job, read beside the server."""
        conn = sqlite3.connect(self.store, timeout=5)
        try:
            return [(r[0], r[1]) for r in conn.execute("SELECT state, attempts FROM jobs")]
        finally:
            conn.close()


@contextmanager
def app_served(tmp: Path, fake: AppGitHub) -> Iterator[Served]:
    """`pairbot serve` on the fake, healthy: on SQLite, PAIR_WORKER_PROCESS unset (its default,
    the worker in its own process)."""
    with ExitStack() as stack:
        base_url = stack.enter_context(serve_fake_github(fake, bare_repo=None))
        root = tmp / "root"
        root.mkdir()
        port = free_port()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp),
            "LANG": "C.UTF-8",
            "PAIR_EXECUTION": "actions",
            "PAIR_WEBHOOK_SECRET": SECRET,
            "PAIR_APP_ID": str(fake.app_id),
            "PAIR_PRIVATE_KEY": rsa_key()[0],
            "PAIR_APP_SLUG": fake.app_slug,
            "PAIR_GITHUB_API_URL": base_url,
            "PAIR_GITHUB_WRITE_SPACING_S": "0",
            "PAIR_CATCHUP_S": "0",
            **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")},
        }
        log = tmp / "serve.log"
        with log.open("wb") as out:
            argv = [str(PAIRBOT), "--root", str(root), "serve", "--port", str(port)]
            process = subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=out)
        served = Served(
            process, f"http://127.0.0.1:{port}", root / ".pair/app/pairbot.sqlite3", log
        )
        try:

            def healthy() -> bool:
                assert process.poll() is None, log.read_text()
                return served.health()[0] == 200

            wait_for(healthy, "the App and its worker's process to be healthy")
            yield served
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(START_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(START_S)


def send_command(fake: AppGitHub, served: Served, text: str = "/pair status") -> int:
    """A signed `issue_comment` with `text` on a fresh card; the comment's id."""
    card = fake.seed_issue("A card", "")
    comment = fake.add_comment(card, text, "octocat")
    body = json.dumps(comment_event(fake, card, comment, text, fake.users["octocat"])).encode()
    answer = httpx.post(
        f"{served.url}/webhooks/github",
        content=body,
        headers=github_headers("issue_comment", body),
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    return comment


def reacted(fake: AppGitHub, comment: int) -> bool:
    return any(path.endswith(f"/comments/{comment}/reactions") for path in fake.posts("/reactions"))


def test_serve_runs_commands_in_the_workers_own_process_and_stops_it(tmp_path: Path) -> None:
    fake = AppGitHub(clock=WallClock())
    with app_served(tmp_path, fake) as served:
        worker = served.worker_pid()
        assert worker != served.process.pid and parent_of(worker) == served.process.pid
        comment = send_command(fake, served)
        wait_for(lambda: reacted(fake, comment), "the 👀 on the command")
        wait_for(lambda: served.jobs() == [("done", 1)], "the job to be done")
        assert fake.dispatches  # the command's repository_dispatch, sent by the worker
        served.process.send_signal(signal.SIGINT)
        served.process.wait(START_S)
        wait_for(lambda: not alive(worker), "the worker's process to end with the server")
    text = served.log.read_text()
    assert f"the worker runs in process {worker}" in text
    assert "pairbot runs jobs in the worker's own process" in text
    assert "Traceback" not in text and fake.unexpected == []


def test_a_killed_worker_is_seen_restarted_and_its_job_run_again(tmp_path: Path) -> None:
    fake = HoldingGitHub(clock=WallClock())
    card = fake.seed_issue("A held card", "")
    fake.held = fake.add_comment(card, "/pair status", "octocat")
    with app_served(tmp_path, fake) as served:
        first = served.worker_pid()
        text = "/pair status"
        body = json.dumps(comment_event(fake, card, fake.held, text, fake.users["octocat"]))
        answer = httpx.post(
            f"{served.url}/webhooks/github",
            content=body.encode(),
            headers=github_headers("issue_comment", body.encode()),
            timeout=30,
        )
        assert answer.status_code == 202
        # The worker's process holds the job: its 👀 hangs at the fake until it is killed.
        wait_for(lambda: fake.holding and served.jobs() == [("running", 1)], "the held job")
        os.kill(first, signal.SIGKILL)
        # Seen at once (the socket's end-of-file), and a new process started in its place.
        wait_for(lambda: served.health()[1].get("restarts") == 1, "the worker's restart")
        wait_for(lambda: served.health()[0] == 200, "the new worker's process to run")
        assert served.health()[1]["process"] != first
        # The new process queued the dead one's job again and ran it: a second attempt.
        wait_for(lambda: served.jobs() == [("done", 2)], "the held job to run again")
        wait_for(lambda: reacted(fake, fake.held), "the 👀, from the new worker")
    text = served.log.read_text()
    assert f"the worker's process {first} exited (killed by SIGKILL)" in text
    assert "queued again 1 job(s) a previous process left running" in text


def test_no_orphan_is_left_when_the_server_is_killed(tmp_path: Path) -> None:
    fake = AppGitHub(clock=WallClock())
    with app_served(tmp_path, fake) as served:
        worker = served.worker_pid()
        served.process.kill()  # SIGKILL: nothing of the server runs to stop its child
        served.process.wait(START_S)
        wait_for(lambda: not alive(worker), "the worker's process to follow its parent")


def test_an_unknown_worker_process_setting_is_refused_at_start(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PAIR_WEBHOOK_SECRET": SECRET,
        "PAIR_WORKER_PROCESS": "thread",
    }
    result = cli(
        "--root", str(tmp_path), "serve", "--port", str(free_port()), cwd=tmp_path, env=env
    )
    assert result.returncode == 2, result.stderr
    assert "PAIR_WORKER_PROCESS='thread' is not allowed; allowed: own" in result.stderr
    assert "inline" in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(ConfigError, match=r"allowed: own .*inline"):
        AppSettings.from_env({"PAIR_WORKER_PROCESS": "Own"})
    # Unset: its own process on SQLite, inline on PostgreSQL (docs/app.md says why).
    assert AppSettings.from_env({}).own_worker_process
    postgres = {"PAIR_STORE": "postgresql://pairbot@db.internal:5432/pairbot"}
    assert not AppSettings.from_env(postgres).own_worker_process
    assert AppSettings.from_env({**postgres, "PAIR_WORKER_PROCESS": "own"}).own_worker_process
    assert not AppSettings.from_env({"PAIR_WORKER_PROCESS": "inline"}).own_worker_process


@pytest.mark.parametrize(
    ("state", "status", "verdict"),
    [
        pytest.param("starting", 503, "unhealthy", id="starting"),
        pytest.param("running", 200, "ok", id="running"),
        pytest.param("restarting", 503, "unhealthy", id="restarting"),
        pytest.param("stopped", 503, "unhealthy", id="stopped"),
    ],
)
def test_healthz_says_what_the_workers_process_is_doing(
    tmp_path: Path, state: str, status: int, verdict: str
) -> None:
    settings = AppSettings(
        root=tmp_path, store=tmp_path / "store.sqlite3", webhook_secret=SecretStr(SECRET)
    )
    process = WorkerProcess(WorkerRecipe(settings))
    service = Service(
        settings,
        store=SqliteStore(tmp_path / "store.sqlite3"),
        github=LocalForges.for_root(tmp_path, settings.hosts),
        azure=None,
        executor=None,
        clock=time.monotonic,
        after_body=None,
        poll_s=1.0,
        tick=None,
        github_router=lambda *_: pytest.fail("no delivery is routed here"),
        worker_process=process,
    )
    process.state = state  # type: ignore[assignment]  # each state the process goes through
    answer = asyncio.run(service.healthz(None))  # type: ignore[arg-type]  # reads nothing of it
    assert answer.status_code == status
    body = json.loads(bytes(answer.body))
    assert body == {"status": verdict, "worker": state, "process": None, "restarts": 0}
