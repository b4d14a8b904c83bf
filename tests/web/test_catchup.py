"""The catch-up of lost deliveries, end to end: the real App on uvicorn, and GitHub's hook
deliveries endpoints faked on another loopback server (`HookDeliveriesFake`: the documented
item shape, cursor pages in a Link header, an App JWT required, a redelivery sent to the App
with the delivery's own guid, as GitHub does).

A delivery the App refused with 503, and one it never saw (its port closed), are redelivered
and become jobs; one that later succeeded, one of an event the App does not act on, one the
App refused for its bytes (422) and one older than GitHub keeps are not; GitHub answering 5xx
is logged and the next pass catches up, nothing lost."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.web.app import create_app
from app.web.catchup import CatchUp
from hosts.github.deliveries import AppHookDeliveries
from tests.support.fake_github import rsa_key
from tests.web.conftest import (
    AppGitHub,
    Served,
    app_settings,
    comment_event,
    github_forges,
    github_headers,
    served,
)

PAGE = 2  # the fake's page: every listing here spans pages
DEADLINE_S = 30.0


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HookDeliveriesFake:
    """GitHub's `/app/hook/deliveries` for one App, and the deliveries it sends."""

    app_id: int
    public_key: Any
    app_url: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    payloads: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    redeliveries: list[int] = field(default_factory=list)  # ids GitHub was asked for
    listings: int = 0
    fail_listings: int = 0  # answer this many listings 503
    fail_redeliveries: int = 0  # answer this many redeliveries 502
    refused_bearers: int = 0
    # GitHub sends an accepted redelivery afterwards: a few catch-up passes (0.2 s apart) list
    # the deliveries before the new attempt is there.
    send_after_s: float = 0.6

    def record(
        self, guid: str, event: str, action: str | None, status: int, *, ago_s: float = 60.0
    ) -> int:
        ident = 1000 + len(self.attempts)
        self.attempts.append(
            {
                "id": ident,
                "guid": guid,
                "delivered_at": iso(time.time() - ago_s),
                "redelivery": any(a["guid"] == guid for a in self.attempts),
                "duration": 0.1,
                "status": "OK" if 200 <= status < 300 else f"Invalid HTTP Response: {status}",
                "status_code": status,
                "event": event,
                "action": action,
                "installation_id": 7,
                "repository_id": 9,
                "throttled_at": None,
            }
        )
        return ident

    async def send(self, guid: str) -> None:
        """Deliver `guid` to the App, signed, and record the attempt with the App's answer (0:
        no answer), as GitHub does."""
        event, body = self.payloads[guid]
        payload = json.loads(body)
        status = 0
        if self.app_url is not None:
            try:
                async with httpx.AsyncClient(timeout=10.0) as client:
                    answer = await client.post(
                        f"{self.app_url}/webhooks/github",
                        content=body,
                        headers=github_headers(event, body, guid),
                    )
                status = answer.status_code
            except httpx.TransportError:
                status = 0
        self.record(guid, event, payload.get("action"), status, ago_s=0)

    def _authorized(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            claims = jwt.decode(token, self.public_key, algorithms=["RS256"])
        except jwt.PyJWTError:
            claims = {}
        if scheme != "Bearer" or claims.get("iss") != str(self.app_id):
            self.refused_bearers += 1
            return False
        return True

    async def list_deliveries(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse({"message": "A JSON web token could not be decoded"}, 401)
        self.listings += 1
        if self.fail_listings > 0:
            self.fail_listings -= 1
            return JSONResponse({"message": "Service Unavailable"}, 503)
        newest = sorted(self.attempts, key=lambda a: a["id"], reverse=True)
        cursor = request.query_params.get("cursor", "v1_0")
        start = int(cursor.removeprefix("v1_"))
        page = newest[start : start + PAGE]
        headers = {}
        if start + PAGE < len(newest):
            url = f"{request.base_url}app/hook/deliveries?per_page={PAGE}&cursor=v1_{start + PAGE}"
            headers["Link"] = f'<{url}>; rel="next"'
        return JSONResponse(page, headers=headers)

    async def redeliver(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse({"message": "A JSON web token could not be decoded"}, 401)
        ident = int(request.path_params["delivery_id"])
        found = next((a for a in self.attempts if a["id"] == ident), None)
        if found is None:
            return JSONResponse({"message": "Not Found"}, 404)
        self.redeliveries.append(ident)
        if self.fail_redeliveries > 0:
            self.fail_redeliveries -= 1
            return JSONResponse({"message": "Server Error"}, 502)
        # GitHub answers 202 and sends the delivery again afterwards, with its own guid.
        return JSONResponse({}, 202, background=BackgroundTask(self.send_later, found["guid"]))

    async def send_later(self, guid: str) -> None:
        await asyncio.sleep(self.send_after_s)
        await self.send(guid)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/app/hook/deliveries", self.list_deliveries, methods=["GET"]),
                Route(
                    "/app/hook/deliveries/{delivery_id}/attempts",
                    self.redeliver,
                    methods=["POST"],
                ),
            ]
        )


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"not within {DEADLINE_S:.0f}s: {what}")


def command(fake: AppGitHub) -> bytes:
    """A `/pair implement` comment by a maintainer on a card of the fake's, as GitHub sends it."""
    text = "/pair implement until: merged merge: never"
    card = fake.seed_issue("Add login", "As a user…")
    comment = fake.add_comment(card, text, "octocat")
    payload = comment_event(fake, card, comment, text, fake.users["octocat"])
    return json.dumps(payload).encode()


@contextmanager
def app_with_catchup(
    fake: AppGitHub, hooks: HookDeliveriesFake, tmp_path: Path
) -> Iterator[tuple[Served, Served]]:
    with served(hooks.app()) as github:
        source = AppHookDeliveries(fake.app_id, rsa_key()[0], base_url=github.url)
        app = create_app(
            app_settings(tmp_path, catchup_s=0.2),
            github=github_forges(fake),
            hook_deliveries=source,
            poll_s=0.05,
        )
        with served(app) as running:
            hooks.app_url = running.url
            yield running, github


def catchup_of(app: Served) -> CatchUp:
    catchup = app.service.catchup
    assert isinstance(catchup, CatchUp)
    return catchup


def jobs_by_delivery(app: Served) -> list[str]:
    return sorted(job.delivery_id for job in app.run(app.service.store.jobs()))


def test_lost_commands_are_redelivered_and_nothing_else_is(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    hooks = HookDeliveriesFake(fake.app_id, rsa_key()[1])
    for guid in ("refused", "never-seen", "saved", "fine", "stored"):
        hooks.payloads[guid] = ("issue_comment", command(fake))
    hooks.record("old", "issue_comment", "created", 503, ago_s=4 * 86_400)
    refused = hooks.record("refused", "issue_comment", "created", 503, ago_s=600)
    hooks.record("saved", "issue_comment", "created", 503, ago_s=500)
    hooks.record("saved", "issue_comment", "created", 202, ago_s=400)
    hooks.record("fine", "issue_comment", "created", 202, ago_s=300)
    hooks.record("not-ours", "issues", "opened", 503, ago_s=200)
    hooks.record("bytes", "issue_comment", "created", 422, ago_s=100)
    asyncio.run(hooks.send("never-seen"))  # the App is not running yet: no answer (0)
    never_seen = hooks.attempts[-1]["id"]
    assert hooks.attempts[-1]["status_code"] == 0
    with app_with_catchup(fake, hooks, tmp_path) as (app, _github):
        # Stored by the App, but GitHub gave up waiting for its answer (status 0): redelivered,
        # and the App's store answers "duplicate".
        app.deliver("issue_comment", json.loads(hooks.payloads["stored"][1]), delivery="stored")
        stored = hooks.record("stored", "issue_comment", "created", 0, ago_s=50)
        wait_for(
            lambda: jobs_by_delivery(app) == ["never-seen", "refused", "stored"],
            "jobs for the refused and the never-seen delivery",
        )
        passes = catchup_of(app).passes
        wait_for(lambda: catchup_of(app).passes >= passes + 3, "three more passes")
        app.wait_idle()
        assert jobs_by_delivery(app) == ["never-seen", "refused", "stored"]
    # Each lost delivery asked for exactly once: the redelivery succeeded, so later passes
    # leave it; "stored" came back as a duplicate (200), one job still.
    assert sorted(hooks.redeliveries) == sorted([refused, never_seen, stored])
    answers = {a["guid"]: a["status_code"] for a in hooks.attempts if a["redelivery"]}
    assert (answers["refused"], answers["never-seen"], answers["stored"]) == (202, 202, 200)
    assert hooks.listings >= 4 and hooks.refused_bearers == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_github_answering_5xx_is_logged_and_the_next_pass_catches_up(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # Three listings in a row answered 503: one pass's bounded retries all fail.
    hooks = HookDeliveriesFake(fake.app_id, rsa_key()[1], fail_listings=3, fail_redeliveries=1)
    hooks.payloads["refused"] = ("issue_comment", command(fake))
    for n in range(5):  # a few pages of deliveries that went well
        hooks.record(f"ok-{n}", "issue_comment", "created", 202, ago_s=900 - n)
    refused = hooks.record("refused", "issue_comment", "created", 503, ago_s=60)
    with app_with_catchup(fake, hooks, tmp_path) as (app, _github):
        wait_for(lambda: jobs_by_delivery(app) == ["refused"], "the refused command's job")
        app.wait_idle()
    # A pass lost to 503s, one redelivery refused (502), then asked again and taken.
    assert hooks.redeliveries == [refused, refused]
    failed = [r.getMessage() for r in caplog.records if "catch-up" in r.getMessage()]
    assert sum("catch-up of lost deliveries failed" in line for line in failed) == 1, failed
    assert sum("did not redeliver refused" in line for line in failed) == 1, failed
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_pass_another_replica_holds_is_skipped() -> None:
    class HeldElsewhere:
        async def run_alone(self, name: str, body: Any) -> None:
            assert name == "catchup"  # not the ticker's lock

    class NoCalls:
        async def page(self, cursor: str | None = None, per_page: int = 100) -> Any:
            raise AssertionError("listed while another replica holds the catch-up")

        async def redeliver(self, delivery_id: int) -> None:
            raise AssertionError("redelivered while another replica holds the catch-up")

        async def aclose(self) -> None:
            return None

    async def scenario() -> int:
        catchup = CatchUp(NoCalls(), store=HeldElsewhere(), interval_s=0.01, start_delay_s=0)  # type: ignore[arg-type]
        await catchup.start()
        async with asyncio.timeout(DEADLINE_S):
            while catchup.passes < 3:  # noqa: ASYNC110 - the loop's own counter, polled
                await asyncio.sleep(0.01)
        await catchup.stop()
        return catchup.passes

    assert asyncio.run(scenario()) >= 3
