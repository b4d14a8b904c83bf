"""Run the App (`pairbot serve`, `PAIR_EXECUTION=worker`) as a subprocess against a fake GitHub.

    with app_world(tmp_path) as world:
        delivery, payload, answer = world.comment("/pair implement")   # signed, delivered
        world.settle(1)                                     # one job in the store, finished
        assert world.fake.pulls ...                             # the fake lives in this process

The fake GitHub is the one the Action's end-to-end tests use (tests/support/github_server.py): REST
and git smart HTTP over a real bare repository, on loopback, keeping wall-clock time so that the
App's own JWTs verify against the App's public key. The App is the installed console script,
configured the way an operator configures it (docs/app.md, "Settings" and "Worker mode"): its
root is a clone of the fake's repository whose `origin` is the fake's git URL. That clone is
fetchable without a prompt through a `store` credential helper holding a machine user's token
(the fake's PAT) in a file outside the checkout — the operator's side of "each checkout must be
fetchable"; pairbot's own pushes use the installation tokens it mints, never stored anywhere.

The App's stdout and stderr go to a file (`log`), read after it stopped: a pipe nobody drains
would stall a chatty worker.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.web.signature import sign
from tests.e2e.action_harness import MAINTAINER, pair_markers, project_files, seed_bare
from tests.support.card_project import card_journal, cycle_events
from tests.support.fake_github import FakeGitHub, rsa_key
from tests.support.git import git
from tests.support.github_server import WallClock, serve_fake_github
from tests.support.project import PAIRBOT, agent_dir

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "github-webhooks"
    / "issue_comment"
    / "created.with-installation.json"
)
SECRET = "e2e-webhook-secret-" + "0" * 32  # a test's webhook secret
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class AppWorld:
    """A served fake GitHub with one card, and the App serving webhooks for its repository."""

    tmp: Path
    fake: FakeGitHub
    bare: Path
    base_url: str
    root: Path
    store: Path
    scratch: Path
    url: str
    log: Path
    card: int

    # ------------------------------------------------------------ deliveries

    def comment_payload(self, body: str, login: str, number: int) -> dict[str, Any]:
        """An `issue_comment.created` delivery of a comment the fake now holds."""
        comment_id = self.fake.add_comment(number, body, login)
        user = self.fake.users[login]
        payload: dict[str, Any] = copy.deepcopy(json.loads(FIXTURE.read_text()))
        payload["issue"]["number"] = number
        payload["issue"].pop("pull_request", None)
        if number in self.fake.pulls:  # GitHub marks a pull request's issue this way
            api = f"{self.base_url}/repos/{self.fake.owner}/{self.fake.repo}"
            payload["issue"]["pull_request"] = {"url": f"{api}/pulls/{number}"}
        payload["comment"].update(id=comment_id, body=body)
        payload["comment"].pop("performed_via_github_app", None)
        for who in (payload["comment"]["user"], payload["sender"]):
            who.update(login=login, id=user.id, type=user.type)
        payload["repository"]["full_name"] = f"{self.fake.owner}/{self.fake.repo}"
        payload["installation"]["id"] = self.fake.installation_id
        return payload

    def post(self, payload: dict[str, Any], delivery: str) -> httpx.Response:
        """POST a delivery signed as GitHub signs it."""
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/044aadd",
            "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
        }
        return httpx.post(f"{self.url}/webhooks/github", content=body, headers=headers, timeout=30)

    def comment(
        self, body: str, *, login: str = MAINTAINER, number: int | None = None
    ) -> tuple[str, dict[str, Any], httpx.Response]:
        """Comment `body` on the card (or `number`) and deliver it; the delivery id, the
        payload (to redeliver) and the App's answer."""
        payload = self.comment_payload(body, login, number or self.card)
        delivery = str(uuid.uuid4())
        return delivery, payload, self.post(payload, delivery)

    # ------------------------------------------------------------ observing

    def jobs(self) -> list[dict[str, Any]]:
        """The App's job table, read from its SQLite store (WAL: a reader never blocks it)."""
        if not self.store.exists():
            return []
        with closing(sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        return [dict(row) for row in rows]

    def settle(self, count: int, timeout: float = 240.0) -> list[dict[str, Any]]:
        """Wait until the store holds `count` jobs and all of them are finished."""
        deadline = time.monotonic() + timeout
        jobs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if len(jobs) == count and all(j["state"] in ("done", "failed") for j in jobs):
                return jobs
            time.sleep(0.2)
        raise AssertionError(f"the App did not settle at {count} jobs: {jobs}\n{self.log_text()}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def journal(self) -> list[dict[str, Any]]:
        return card_journal(self.root, self.card)

    def cycle_events(self, event: str) -> list[dict[str, Any]]:
        return cycle_events(self.journal(), event)

    def markers(self) -> dict[str, int]:
        return pair_markers(self.fake)

    def bare_git(self, *args: str) -> str:
        return git(self.bare, *args)


def operator_checkout(fake: FakeGitHub, base_url: str, dest: Path, home: Path) -> Path:
    """The worker's checkout as an operator makes one: `git clone` of the repository's URL,
    fetchable without a prompt through a credential helper (a machine user's token in a file
    outside the work tree), so `.git/config` holds no secret."""
    server = base_url.removesuffix("/api/v3")
    credentials = home / "git-credentials"
    host = server.removeprefix("http://")
    credentials.write_text(f"http://x-access-token:{fake.pat}@{host}\n")
    credentials.chmod(0o600)
    helper = f"store --file={credentials}"
    remote = f"{server}/{fake.owner}/{fake.repo}"
    git(dest.parent, "-c", f"credential.helper={helper}", "clone", "-q", remote, str(dest))
    git(dest, "config", "--local", "credential.helper", helper)
    return dest


def app_env(
    fake: FakeGitHub, home: Path, *, base_url: str, store: Path, scratch: Path
) -> dict[str, str]:
    """The App's environment: the operator's PAIR_* settings and nothing of the test runner's
    (no inherited GIT_*, no global git config, a HOME of its own)."""
    return {
        "PATH": f"{PAIRBOT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "PAIR_EXECUTION": "worker",
        "PAIR_WEBHOOK_SECRET": SECRET,
        "PAIR_APP_ID": str(fake.app_id),
        "PAIR_PRIVATE_KEY": rsa_key()[0],
        "PAIR_GITHUB_API_URL": base_url,
        "PAIR_STORE": str(store),
        "PAIR_GITHUB_WRITE_SPACING_S": "0",
        # The scripted agent keeps its script, counters and call log here (its worktree is
        # reset between steps).
        "PAIR_TEST_AGENT_DIR": str(scratch),
        **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")},
    }


@contextmanager
def app_world(
    tmp: Path,
    *,
    files: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    pat: str | None = None,
) -> Iterator[AppWorld]:
    """A fake GitHub with one card on a bare repository, and `pairbot serve` in worker mode
    (`files`: the project's files instead of the scripted agent's; `extra_env`: on top;
    `pat`: the operator's token instead of the fake's fixed one)."""
    bare = seed_bare(tmp, project_files() if files is None else files)
    fake = FakeGitHub(clock=WallClock()) if pat is None else FakeGitHub(clock=WallClock(), pat=pat)
    fake.user(MAINTAINER)
    card = fake.seed_issue("Add the widget", "AC-1: it works\n", author=MAINTAINER)
    scratch = agent_dir(tmp / "agent")
    store = tmp / "app" / "pairbot.sqlite3"
    log = tmp / "app.log"
    with serve_fake_github(fake, bare_repo=bare) as base_url:
        home = tmp / "home"
        home.mkdir()
        root = operator_checkout(fake, base_url, tmp / "checkout", home)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **app_env(fake, home, base_url=base_url, store=store, scratch=scratch),
            **(extra_env or {}),
        }
        with log.open("wb") as out:
            argv = [str(PAIRBOT), "--root", str(root), "serve", "--host", "127.0.0.1"]
            process = subprocess.Popen(
                [*argv, "--port", str(port)],
                cwd=root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        world = AppWorld(
            tmp=tmp,
            fake=fake,
            bare=bare,
            base_url=base_url,
            root=root,
            store=store,
            scratch=scratch,
            url=url,
            log=log,
            card=card,
        )
        try:
            _wait_healthy(world, process)
            yield world
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(_STOP_TIMEOUT_S)
                raise AssertionError(f"the App did not stop\n{world.log_text()}") from None


def _wait_healthy(world: AppWorld, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{world.url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the App did not start\n{world.log_text()}")
