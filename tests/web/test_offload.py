"""Nothing a delivery costs to read runs on the event loop: /healthz answers meanwhile.

The hostile comment is 64 KB of nested HTML comments, deep lists and long lines, signed (any
GitHub user can make GitHub deliver one). Its routing — where the comment text is parsed — is
slowed by a seam that waits until the test says go, so the test does not depend on how long
the real parse takes: were it on the event loop, /healthz could not answer until it ended.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
from pathlib import Path
from typing import Any

import httpx

from app.web.app import create_app
from app.web.events import Payload, Policy, Routed, route_github
from app.web.settings import EdgeLimits
from tests.web.conftest import (
    AppGitHub,
    app_settings,
    comment_event,
    github_forges,
    github_headers,
    served,
)

_BOUND_S = 30.0  # a deadline against hanging, never a measured time
_CLIENT_S = 5.0  # how long /healthz may take to answer: generous, so load cannot fail it


def hostile_comment(size: int = 64 * 1024) -> str:
    nested = "<!-" * 3000 + "->" * 3000
    lists = "".join(f"{'  ' * depth}- item\n" for depth in range(400))
    text = nested + "\n" + lists + "\n" + "x" * 4000 + "\n/pair status\n"
    return (text * (size // len(text) + 1))[:size]


class SlowRouter:
    """route_github that waits for `release` first, and notes the threads it ran on."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.threads: list[str] = []
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(
        self, event: str, action: str | None, payload: Payload, policy: Policy, delivery: str
    ) -> Routed:
        with self._lock:
            self.threads.append(threading.current_thread().name)
            self.running += 1
            self.most = max(self.most, self.running)
        self.entered.release()
        try:
            if not self.release.wait(_BOUND_S):
                raise AssertionError("the test never released the router")
            return route_github(event, action, payload, policy, delivery)
        finally:
            with self._lock:
                self.running -= 1


def test_healthz_answers_while_hostile_comments_are_parsed_off_the_loop(tmp_path: Path) -> None:
    fake = AppGitHub()
    card = fake.seed_issue("Card", "")
    user = fake.user("mallory")  # a stranger: any GitHub user can comment
    router = SlowRouter()
    settings = app_settings(tmp_path, limits=EdgeLimits(parse_threads=2))
    app = create_app(settings, github=github_forges(fake), poll_s=0.05, github_router=router)
    with (
        served(app, limits=settings.limits) as server,
        concurrent.futures.ThreadPoolExecutor(3) as pool,
    ):
        deliveries = [
            pool.submit(
                server.deliver,
                "issue_comment",
                comment_event(fake, card, 500 + n, hostile_comment(), user),
            )
            for n in range(3)
        ]
        for _ in range(2):
            assert router.entered.acquire(timeout=_BOUND_S)
        # Two parses hold both parse threads and a third waits for one: the loop is free.
        for _ in range(3):
            health = httpx.get(server.url + "/healthz", timeout=_CLIENT_S)
            assert health.status_code == 200 and health.json()["status"] == "ok"
        assert router.running == 2
        router.release.set()
        answers = [delivery.result(timeout=_BOUND_S) for delivery in deliveries]
        # Queued or ignored, as the intake reads the comment: answered either way, no error.
        assert all(answer.status_code in (200, 202) for answer in answers), answers
        server.wait_idle()
    assert router.most == 2
    assert "uvicorn" not in router.threads  # the server's event loop runs in that thread


def test_a_large_body_is_verified_off_the_loop_and_still_refused_when_wrong(
    tmp_path: Path,
) -> None:
    settings = app_settings(tmp_path)
    app = create_app(settings, github=github_forges(AppGitHub()), poll_s=0.05)
    body = json.dumps({"zen": "x" * 200_000, "hook_id": 1}).encode()
    with served(app, limits=settings.limits) as server:
        signed = server.post("/webhooks/github", body, github_headers("ping", body))
        assert signed.status_code == 200, signed.text
        forged: dict[str, Any] = github_headers("ping", body + b" ")
        wrong = server.post("/webhooks/github", body, forged)
        assert wrong.status_code == 401
