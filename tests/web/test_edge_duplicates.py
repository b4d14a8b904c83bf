"""The edge's cheapest answers: a known delivery id before its body is read, an event pairbot
never acts on before its body is parsed; and what the raw webhook path does that Starlette's
stack did for it before (a bare 500), and the collector settings `pairbot serve` starts with.

On real uvicorn over loopback, with the real SQLite store behind a call counter
(tests/web/test_edge_floor.py), so "nothing was read", "nothing was written" are observed.
"""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.store.sqlite import SqliteStore
from app.web.app import create_app
from app.web.events import Policy, Routed, route_github
from app.web.serve import GC_YOUNG_THRESHOLD, settle_gc
from app.web.settings import EdgeLimits
from app.web.signature import sign
from tests.web.conftest import (
    SECRET,
    AppGitHub,
    app_settings,
    github_forges,
    github_headers,
    served,
)
from tests.web.test_edge_floor import CountingStore, chatter, command, edge_calls


class Edge:
    """The app, served, with its store counted, the bodies it read counted and the routings
    it ran recorded."""

    def __init__(self, fake: AppGitHub, tmp_path: Path, *, fail: bool = False) -> None:
        settings = app_settings(tmp_path, limits=EdgeLimits())
        self.store = CountingStore(SqliteStore(settings.store))
        self.bodies_read = 0
        self.routed: list[str] = []
        self.fail = fail

        async def after_body() -> None:
            self.bodies_read += 1

        def router(
            event: str, action: str | None, payload: Any, policy: Policy, delivery: str
        ) -> Routed:
            self.routed.append(event)
            if self.fail:
                raise RuntimeError("a bug in the routing")
            return route_github(event, action, payload, policy, delivery)

        self.app = create_app(
            settings,
            store=self.store,  # type: ignore[arg-type]
            github=github_forges(fake),
            after_body=after_body,
            github_router=router,
            poll_s=0.05,
        )


@pytest.fixture
def edge(fake: AppGitHub, tmp_path: Path) -> Edge:
    return Edge(fake, tmp_path)


def signed(payload: Any, *, delivery: str, secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    return body, github_headers("issue_comment", body, delivery, secret)


def test_a_known_delivery_id_is_answered_duplicate_before_its_body_is_read(
    fake: AppGitHub, edge: Edge
) -> None:
    delivery = str(uuid.uuid4())
    with served(edge.app) as app:
        assert app.deliver("issue_comment", command(fake), delivery=delivery).status_code == 202
        app.wait_idle()
        assert (edge.bodies_read, edge_calls(edge.store)) == (1, 1)
        # Another command under the same id, even signed with a wrong secret: the answer is
        # "duplicate", and nothing of it is read, verified, routed or written.
        for secret in (SECRET, "not the secret"):
            body, headers = signed(command(fake), delivery=delivery, secret=secret)
            again = app.post("/webhooks/github", body, headers)
            assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
        assert (edge.bodies_read, edge_calls(edge.store), edge.routed) == (1, 1, ["issue_comment"])
        app.wait_idle()
        assert len(app.run(edge.store.inner.jobs())) == 1
    assert len(fake.dispatches) == 1


def test_an_unknown_delivery_id_goes_to_the_signature_check(fake: AppGitHub, edge: Edge) -> None:
    """A forged header earns nothing: a new id is read and verified (401 when wrong), and a
    refused delivery's id is not remembered, so the real one is processed after it."""
    delivery = str(uuid.uuid4())
    payload = command(fake)
    with served(edge.app) as app:
        body, headers = signed(payload, delivery=delivery, secret="not the secret")  # noqa: S106 - a wrong one
        refused = app.post("/webhooks/github", body, headers)
        assert (refused.status_code, refused.json()["reason"]) == (
            401,
            "wrong X-Hub-Signature-256",
        )
        assert (edge.bodies_read, edge_calls(edge.store), edge.routed) == (1, 0, [])
        assert app.deliver("issue_comment", payload, delivery=delivery).status_code == 202
        app.wait_idle()
        assert edge_calls(edge.store) == 1
    assert len(fake.dispatches) == 1


def test_a_known_id_without_a_well_formed_signature_is_still_refused(
    fake: AppGitHub, edge: Edge
) -> None:
    delivery = str(uuid.uuid4())
    with served(edge.app) as app:
        assert app.deliver("issue_comment", chatter(fake), delivery=delivery).status_code == 200
        body, headers = signed(chatter(fake), delivery=delivery)
        for signature in (None, "sha256=not-hex"):
            if signature is None:
                del headers["X-Hub-Signature-256"]
            else:
                headers["X-Hub-Signature-256"] = signature
            assert app.post("/webhooks/github", body, headers).status_code == 401
        assert edge.bodies_read == 1


def test_the_connection_stays_usable_after_a_body_left_unread(fake: AppGitHub, edge: Edge) -> None:
    """A duplicate's body (a large one too) is never read by the app: the server drops it and
    the next request on the same kept-alive connection is read from where it begins."""
    delivery = str(uuid.uuid4())
    with served(edge.app) as app:
        assert app.deliver("issue_comment", chatter(fake), delivery=delivery).status_code == 200
        payload = chatter(fake)
        payload["comment"]["body"] = "x" * 60_000  # several TCP segments
        big, big_headers = signed(payload, delivery=delivery)
        with httpx.Client(base_url=app.url, timeout=30) as client:
            for _ in range(3):
                answer = client.post("/webhooks/github", content=big, headers=big_headers)
                assert answer.json() == {"status": "duplicate"}
                body, headers = signed(command(fake), delivery=str(uuid.uuid4()))
                assert client.post("/webhooks/github", content=body, headers=headers).json() == {
                    "status": "queued",
                    "jobs": 1,
                }
        app.wait_idle()
    assert len(fake.dispatches) == 3


def test_an_event_pairbot_never_acts_on_is_not_parsed(edge: Edge) -> None:
    """Verified first (a wrong signature is still a 401), then answered from its header."""
    with served(edge.app) as app:
        body = b"not even JSON: nobody reads it"
        headers = github_headers("push", body)
        answer = app.post("/webhooks/github", body, headers)
        assert (answer.status_code, answer.json()) == (
            200,
            {"status": "ignored", "reason": "push is not for pairbot"},
        )
        headers["X-Hub-Signature-256"] = sign(b"another secret", body)
        headers["X-GitHub-Delivery"] = str(uuid.uuid4())
        assert app.post("/webhooks/github", body, headers).status_code == 401
        headers = github_headers("workflow_run", body)
        headers["Content-Type"] = "text/plain"
        assert app.post("/webhooks/github", body, headers).status_code == 415
        assert (edge.routed, edge_calls(edge.store)) == ([], 0)
        ping = b'{"zen": "Design for failure.", "hook_id": 7}'
        answer = app.post("/webhooks/github", ping, github_headers("ping", ping))
        assert answer.json() == {"status": "ignored", "reason": "ping for hook 7"}
        assert edge.routed == ["ping"]


def test_an_unexpected_failure_is_a_bare_500_logged_for_the_operator(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    edge = Edge(fake, tmp_path, fail=True)
    with served(edge.app) as app:
        answer = app.deliver("issue_comment", chatter(fake))
        assert (answer.status_code, answer.text) == (500, "Internal Server Error")
        assert "Traceback" not in answer.text
        assert app.get("/healthz").status_code == 200  # the server goes on
    [failure] = [r for r in caplog.records if r.getMessage().startswith("the webhook edge failed")]
    assert failure.exc_info is not None
    assert failure.getMessage() == "the webhook edge failed on POST /webhooks/github"


def test_webhook_answers_carry_none_of_the_pages_headers(fake: AppGitHub, edge: Edge) -> None:
    """The sign-in middleware (sessions, security headers) is not in a webhook's path."""
    with served(edge.app) as app:
        answer = app.deliver("issue_comment", chatter(fake))
        assert answer.status_code == 200
        assert "set-cookie" not in answer.headers
        assert "content-security-policy" not in answer.headers
        assert "content-security-policy" in app.get("/signin").headers


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_serving_starts_with_the_heap_frozen_and_young_collections_spaced_out() -> None:
    _young, middle, old = gc.get_threshold()
    settle_gc()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, middle, old)
