"""The webhook service under test: the real app, served by real uvicorn on 127.0.0.1.

    served(app)          uvicorn in a thread on a free loopback port; yields a `Served`
    AppGitHub            tests/support/fake_github.py's FakeGitHub plus repository_dispatch
    github_forges(fake)  the production GitHubForges over the fake's MockTransport
    app_settings(...)    AppSettings for a test (real SQLite in tmp_path)
    comment_event(...)   an issue_comment delivery built from the real corpus example

GitHub is faked at the HTTP edge only: the App's own code (GitHubForges, GitHubHost) sends real
requests into the fake's `httpx.MockTransport`, which answers with the corpus shapes and raises
nothing silently (`unexpected` lists any request it could not explain).
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.forge import GitHubForges
from app.web.jobs import Job
from app.web.serve import server_config
from app.web.settings import AppSettings, EdgeLimits
from app.web.signature import sign
from app.web.viewer import VIEWER_KEY, Viewer
from tests.support.fake_github import FakeGitHub, User, _Request, rsa_key

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SECRET = "It's a Secret to Everybody, in tests"  # noqa: S105 - a test fixture
OPERATOR = "the operator's token, in tests only"
REPO_WEB = "https://github.com"


@functools.cache
def _fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def fixture(name: str) -> Any:
    """A fresh copy of one fixture (JSON)."""
    return json.loads(_fixture_text(name))


def corpus_deliveries() -> list[tuple[str, Path]]:
    """(event, file) of every GitHub example delivery."""
    base = FIXTURES / "github-webhooks"
    return [(path.parent.name, path) for path in sorted(base.glob("*/*.json"))]


@dataclass
class AppGitHub(FakeGitHub):
    """FakeGitHub that also takes `POST /repos/{o}/{r}/dispatches`, as GitHub does (204)."""

    dispatches: list[dict[str, Any]] = field(default_factory=list)

    def _route(self, call: _Request) -> httpx.Response:
        if call.method == "POST" and call.path == f"{self._repo_path()}/dispatches":
            body = call.body if isinstance(call.body, dict) else {}
            payload = body.get("client_payload")
            if not isinstance(body.get("event_type"), str) or not isinstance(payload, dict):
                return self._error(422, "Invalid request.")
            if len(payload) > 10:  # GitHub's documented limit on client_payload
                return self._error(422, "client_payload has too many top-level properties")
            self.dispatches.append(body)
            return httpx.Response(204, headers=self._headers())
        return super()._route(call)

    def posts(self, suffix: str) -> list[str]:
        """Paths of the POSTs that ended with `suffix` (e.g. "/reactions")."""
        return [path for method, path, _ in self.log if method == "POST" and path.endswith(suffix)]

    def comment_payloads(self) -> list[dict[str, Any]]:
        return [d["client_payload"] for d in self.dispatches]


@dataclass
class HoldingGitHub(AppGitHub):
    """Leaves the first 👀 on comment `held` unanswered until the test ends (the replica or
    worker process waiting on it is killed, and its job must be run again elsewhere)."""

    held: int = 0
    holding: bool = False
    _never: asyncio.Event | None = field(default=None, repr=False)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        target = f"/issues/comments/{self.held}/reactions"
        if request.method == "POST" and request.url.path.endswith(target) and not self.holding:
            self.holding = True
            self._never = asyncio.Event()
            await self._never.wait()  # the replica waiting here is killed
        return await super().handle(request)


def github_forges(fake: FakeGitHub) -> GitHubForges:
    """The App's production forges, talking to `fake` through its MockTransport."""
    return GitHubForges(
        app_id=fake.app_id,
        private_key=rsa_key()[0],
        base_url=fake.base_url,
        transport=fake.transport,
        clock=fake.clock,
        sleep=fake.clock.sleep,
        host_options={"write_spacing_s": 0.0},
    )


def app_settings(tmp_path: Path, **overrides: Any) -> AppSettings:
    values: dict[str, Any] = {
        "root": tmp_path,
        "store": tmp_path / "pairbot.sqlite3",
        "webhook_secret": SecretStr(SECRET),
        "app_id": FakeGitHub.app_id,
        "private_key": SecretStr(rsa_key()[0]),
        "app_slug": FakeGitHub.app_slug,
        "operator_token": SecretStr(OPERATOR),
    }
    values.update(overrides)
    return AppSettings(**values)


class StepClock:
    """A clock a test moves (the permission cache's)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class RecordingExecutor:
    """`execution: worker`'s executor in tests: records each job, and checks that no two jobs
    of one card overlap."""

    delay_s: float = 0.0
    calls: list[tuple[Job, str, int | None]] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    max_parallel: int = 0
    _active: dict[str, int] = field(default_factory=dict)

    async def __call__(self, job: Job, repo: str, installation_id: int | None) -> None:
        key = f"{repo}#{getattr(job, 'card', None) or getattr(job, 'pull', None)}"
        if self._active.get(key):
            self.overlaps.append(key)
        self._active[key] = self._active.get(key, 0) + 1
        self.max_parallel = max(self.max_parallel, sum(self._active.values()))
        try:
            await asyncio.sleep(self.delay_s)
            self.calls.append((job, repo, installation_id))
        finally:
            self._active[key] -= 1


@dataclass
class Served:
    """The app on a real loopback socket."""

    url: str
    app: Starlette

    @property
    def service(self) -> Any:
        return self.app.state.service

    def post(
        self,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        timeout: float = 30.0,
    ) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=timeout) as client:
            return client.post(path, content=body, headers=dict(headers))

    def deliver(
        self,
        event: str,
        payload: Any,
        *,
        delivery: str | None = None,
        secret: str = SECRET,
    ) -> httpx.Response:
        """A signed GitHub delivery, as GitHub sends it."""
        body = json.dumps(payload).encode()
        return self.post("/webhooks/github", body, github_headers(event, body, delivery, secret))

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=30.0) as client:
            return client.get(path, headers=dict(headers or {}))

    def page(self, path: str) -> httpx.Response:
        """GET a guarded page as the operator (the bearer token app_settings configures)."""
        return self.get(path, {"Authorization": f"Bearer {OPERATOR}"})

    def run(self, coroutine: Any) -> Any:
        """Run a store call from the test thread (the store is thread-safe)."""
        return asyncio.run(coroutine)

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until no job is queued or running (a deadline, not a measured time)."""
        store = self.service.store
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = self.run(store.counts())
            if counts["queued"] == 0 and counts["running"] == 0 and self.service.worker.busy == 0:
                return
            time.sleep(0.02)
        raise AssertionError(f"the worker did not drain the queue: {counts}")


def github_headers(
    event: str, body: bytes, delivery: str | None = None, secret: str = SECRET
) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(secret.encode(), body),
    }


@contextmanager
def served(app: Starlette, *, limits: EdgeLimits | None = None) -> Iterator[Served]:
    """Serve `app` with uvicorn on 127.0.0.1 (a free port) in a thread, lifespan included.

    With `limits`, uvicorn is configured as `pairbot serve` configures it under those limits
    (app.web.serve.server_config: the guarded protocol, the connection limit)."""
    # IPPROTO_TCP, not 0: asyncio only turns Nagle off (TCP_NODELAY) on sockets whose proto
    # says TCP, and a response written in two parts would otherwise wait for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options: dict[str, Any] = {
        "log_config": None,
        "access_log": False,
        "lifespan": "on",
        "timeout_graceful_shutdown": 5,
    }
    config = (
        uvicorn.Config(app, **options) if limits is None else server_config(app, limits, **options)
    )
    server = uvicorn.Server(config)
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as err:  # surfaced below, in the test's thread
            errors.append(err)

    thread = threading.Thread(target=serve, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        if not server.started:
            raise AssertionError(f"uvicorn did not start: {errors}")
        yield Served(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    if errors:
        raise errors[0]


def comment_event(
    fake: FakeGitHub,
    number: int,
    comment_id: int,
    body: str,
    user: User,
    *,
    on_pull: bool = False,
    action: str = "created",
    via_app: int | None = None,
) -> dict[str, Any]:
    """`issue_comment` from the corpus example, moved to the fake's repository and people."""
    payload: dict[str, Any] = fixture(
        "github-webhooks/issue_comment/created.with-installation.json"
    )
    full = f"{fake.owner}/{fake.repo}"
    payload["action"] = action
    payload["repository"].update(full_name=full, name=fake.repo)
    payload["repository"]["owner"]["login"] = fake.owner
    issue = payload["issue"]
    issue.update(number=number, html_url=f"{REPO_WEB}/{full}/issues/{number}")
    issue.pop("pull_request", None)
    if on_pull:
        issue["pull_request"] = {
            "url": f"{fake.base_url}/repos/{full}/pulls/{number}",
            "html_url": f"{REPO_WEB}/{full}/pull/{number}",
        }
    payload["comment"].update(
        id=comment_id,
        body=body,
        user=fake.user_json(user),
        html_url=f"{REPO_WEB}/{full}/issues/{number}#issuecomment-{comment_id}",
        performed_via_github_app=({"id": via_app, "slug": "x"} if via_app is not None else None),
    )
    payload["sender"] = fake.user_json(user)
    payload["installation"] = {"id": fake.installation_id, "node_id": "MDIz"}
    return payload


@pytest.fixture
def fake() -> AppGitHub:
    return AppGitHub()


class _ViewAs:
    """Stands in for the sign-in layer: every request is looked at by one viewer."""

    def __init__(self, app: ASGIApp, viewer: Viewer) -> None:
        self.app = app
        self.viewer = viewer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[VIEWER_KEY] = self.viewer
        await self.app(scope, receive, send)


def view_as(app: Starlette, viewer: Viewer) -> Starlette:
    """`app`, with every request that passed sign-in seen by `viewer` (innermost, so it
    overrides what the sign-in layer decided; added before the app starts)."""
    app.user_middleware.append(Middleware(_ViewAs, viewer=viewer))
    return app
