"""The edge answers while a job's HTTP call to GitHub is stalled.

The App runs against the benchmark's answering forge on loopback; the forge holds the job's 👀
request open (no answer) until the test lets it go. Meanwhile another delivery is sent: the
edge must answer it. Every wait is bounded by a timeout; no time is asserted.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from app.web.app import create_app
from app.web.forge import GitHubForges
from benchmarks.answering_forge import COMMENTER, ForgeApp, Receive, Scope, Send, new_forge
from benchmarks.command_servers import APP_ID, new_key
from tests.web.conftest import app_settings, comment_event, served

HELD_S = 30.0


class HoldingForge(ForgeApp):
    """Holds every reaction request until `release` is set (at most HELD_S)."""

    def __init__(self, pem: str) -> None:
        super().__init__(new_forge("http://127.0.0.1", pem), latency_s=0.0)
        self.arrived = threading.Event()
        self.release = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/reactions"):
            self.arrived.set()
            await asyncio.to_thread(self.release.wait, HELD_S)
        await super().__call__(scope, receive, send)


def test_the_edge_answers_while_a_jobs_call_is_stalled(tmp_path: Path) -> None:
    pem = new_key()
    forge = HoldingForge(pem)
    fake = forge.fake
    user = fake.users[COMMENTER]
    stalled = fake.add_comment(1, "/pair status", COMMENTER)
    later = fake.add_comment(2, "/pair status", COMMENTER)
    with served(forge) as github:  # type: ignore[arg-type]  # a raw ASGI app
        fake.base_url = github.url
        forges = GitHubForges(app_id=APP_ID, private_key=pem, base_url=github.url, host_options={})
        settings = app_settings(
            tmp_path, app_id=APP_ID, app_slug="pairbot", github_api_url=github.url
        )
        app = create_app(settings, github=forges)
        try:
            with served(app) as pairbot:
                first = comment_event(fake, 1, stalled, "/pair status", user)
                assert pairbot.deliver("issue_comment", first).status_code == 202
                assert forge.arrived.wait(HELD_S), "the job never sent its 👀"
                # The job's 👀 is on the wire, unanswered. The edge still answers deliveries.
                other = comment_event(fake, 2, later, "/pair status", user)
                assert pairbot.deliver("issue_comment", other).status_code == 202
                assert pairbot.get("/healthz").status_code == 200
                assert not forge.release.is_set()  # answered while the call was still held
                forge.release.set()
                pairbot.wait_idle()
        finally:
            forge.release.set()
