"""The webhook edges on real uvicorn: signatures, refusals with no side effect, every corpus
payload, Azure DevOps service-hook auth, the status page and the health check."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import hmac
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.errors import ConfigError
from app.web.app import MAX_BODY, create_app
from app.web.signature import sign, verify_azure, verify_github
from tests.web.conftest import (
    SECRET,
    AppGitHub,
    RecordingExecutor,
    Served,
    app_settings,
    corpus_deliveries,
    fixture,
    github_forges,
    github_headers,
    served,
)

VECTORS: list[dict[str, Any]] = fixture("signature_vectors.json")


def serve_for(fake: AppGitHub, tmp_path: Path, **overrides: Any) -> Any:
    executor = overrides.pop("executor", None)
    app = create_app(
        app_settings(tmp_path, **overrides),
        github=github_forges(fake),
        executor=executor,
        poll_s=0.05,
    )
    return served(app)


def nothing_written(app: Served) -> None:
    store = app.service.store
    assert app.run(store.deliveries()) == []
    assert app.run(store.jobs()) == []
    assert app.run(store.installations()) == []


def errors_in(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# -- signatures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['secret'][:8]}-{v['expect_valid']}")
def test_signature_vectors_verify_as_labelled(vector: dict[str, Any]) -> None:
    body = bytes.fromhex(vector["payload_utf8_hex"])
    assert body == vector["payload"].encode()
    assert (
        verify_github(vector["secret"].encode(), body, vector["signature_256"])
        is vector["expect_valid"]
    )
    if vector["expect_valid"]:
        assert sign(vector["secret"].encode(), body) == vector["signature_256"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['secret'][:8]}-{v['expect_valid']}")
def test_signature_vectors_over_http(
    fake: AppGitHub, tmp_path: Path, vector: dict[str, Any]
) -> None:
    body = bytes.fromhex(vector["payload_utf8_hex"])
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": vector["signature_256"],
    }
    with serve_for(fake, tmp_path, webhook_secret=SecretStr(vector["secret"])) as app:
        response = app.post("/webhooks/github", body, headers)
        if not vector["expect_valid"]:
            assert response.status_code == 401
            nothing_written(app)
        elif body.startswith(b"{"):
            assert response.status_code == 200  # a signed JSON object that is not for pairbot
        else:
            assert response.status_code == 415  # signed, but "Hello, World!" is not JSON
            nothing_written(app)


def test_the_signature_check_is_sha256_only_and_never_without_a_secret() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    sha1 = "sha1=" + hmac.new(b"s", body, hashlib.sha1).hexdigest()
    assert not verify_github(b"s", body, sha1)
    assert not verify_github(b"s", body, None)
    assert not verify_github(b"s", body, "")
    assert not verify_github(b"", body, sign(b"", body))
    assert not verify_github(b"s", body, sign(b"s", body)[:-1] + "\u00e9")
    assert verify_github(b"s", body, sign(b"s", body).upper().replace("SHA256=", "sha256="))


def test_the_app_refuses_to_build_without_a_webhook_secret(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PAIR_WEBHOOK_SECRET"):
        create_app(app_settings(tmp_path, webhook_secret=None))
    with pytest.raises(ConfigError, match="PAIR_WEBHOOK_SECRET"):
        create_app(app_settings(tmp_path, webhook_secret=SecretStr("")))


def _oversized() -> bytes:
    return b'{"pad": "' + b"x" * MAX_BODY + b'"}'


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("unsigned", 401),
        ("wrong-signature", 401),
        ("signed-with-another-secret", 401),
        ("sha1-only", 401),
        ("oversized", 413),
        ("oversized-chunked", 413),
        ("form-encoded", 415),
        ("not-json", 415),
        ("json-but-not-an-object", 400),
        ("no-event-header", 400),
    ],
)
def test_refused_deliveries_have_no_side_effect(
    fake: AppGitHub, tmp_path: Path, name: str, status: int
) -> None:
    payload = fixture("github-webhooks/issue_comment/created.with-installation.json")
    payload["comment"]["body"] = "/pair implement"
    body = json.dumps(payload).encode()
    headers = github_headers("issue_comment", body)
    content: Any = body
    if name == "unsigned":
        del headers["X-Hub-Signature-256"]
    elif name == "wrong-signature":
        headers["X-Hub-Signature-256"] = sign(SECRET.encode(), body + b" ")
    elif name == "signed-with-another-secret":
        headers["X-Hub-Signature-256"] = sign(b"another secret", body)
    elif name == "sha1-only":
        del headers["X-Hub-Signature-256"]
        headers["X-Hub-Signature"] = "sha1=" + hmac.new(SECRET.encode(), body, "sha1").hexdigest()
    elif name == "oversized":
        content = _oversized()
        headers = github_headers("issue_comment", content)
    elif name == "oversized-chunked":
        big = _oversized()
        headers = github_headers("issue_comment", big)
        content = (big[i : i + (1 << 20)] for i in range(0, len(big), 1 << 20))
    elif name == "form-encoded":
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif name == "not-json":
        content = b"payload=%7B%7D"
        headers = github_headers("issue_comment", content)
    elif name == "json-but-not-an-object":
        content = b"[1, 2, 3]"
        headers = github_headers("issue_comment", content)
    elif name == "no-event-header":
        del headers["X-GitHub-Event"]
    with serve_for(fake, tmp_path) as app:
        with httpx.Client(base_url=app.url, timeout=60) as client:
            response = client.post("/webhooks/github", content=content, headers=headers)
        assert response.status_code == status
        assert "Traceback" not in response.text
        nothing_written(app)
    assert fake.log == []


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"zen": NaN, "hook_id": 1}', 200),  # orjson refuses NaN; the json module reads it
        (b'\xef\xbb\xbf{"zen": "a BOM", "hook_id": 1}', 200),  # ditto a byte-order mark
        ('{"zen": "x", "hook_id": 1}'.encode("utf-16"), 200),  # ditto UTF-16
        (b'{"zen": "x", "hook_id": 1', 415),  # and neither reads this
        (b'{"zen": "x"} trailing', 415),
    ],
)
def test_the_json_line_is_where_the_json_module_draws_it(
    fake: AppGitHub, tmp_path: Path, body: bytes, status: int
) -> None:
    """The edge parses with orjson, and what orjson refuses goes to the json module before it
    counts as not JSON: a 415 is answered for exactly what it was answered for before."""
    with serve_for(fake, tmp_path) as app:
        response = app.post("/webhooks/github", body, github_headers("ping", body))
        assert response.status_code == status, response.text
        if status == 415:
            nothing_written(app)


def test_the_webhook_routes_take_post_only(fake: AppGitHub, tmp_path: Path) -> None:
    """The raw ASGI endpoints keep their route's method list (Starlette answers 405)."""
    with serve_for(fake, tmp_path) as app:
        for path in ("/webhooks/github", "/webhooks/azure-devops"):
            response = httpx.get(app.url + path, timeout=30)
            assert (response.status_code, response.headers["allow"]) == (405, "POST")
        nothing_written(app)


def test_a_client_gone_before_its_body_ended_gets_no_answer_and_writes_nothing(
    tmp_path: Path,
) -> None:
    payload = fixture("github-webhooks/issue_comment/created.with-installation.json")
    payload["comment"]["body"] = "/pair implement"
    body = json.dumps(payload).encode()
    headers = [
        (name.lower().encode(), value.encode())
        for name, value in github_headers("issue_comment", body).items()
    ]
    app = create_app(app_settings(tmp_path), github=github_forges(AppGitHub()), poll_s=0.05)
    messages = [
        {"type": "http.request", "body": body[:100], "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Any] = []

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    async def go() -> tuple[Any, Any]:
        async with app.router.lifespan_context(app):
            scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "POST",
                "scheme": "http",
                "path": "/webhooks/github",
                "raw_path": b"/webhooks/github",
                "query_string": b"",
                "root_path": "",
                "headers": headers,
                "client": ("127.0.0.1", 50000),
                "server": ("127.0.0.1", 8080),
            }
            await app(scope, receive, send)
            store = app.state.service.store
            return await store.deliveries(), await store.jobs()

    assert asyncio.run(go()) == ([], [])
    assert sent == []


def test_every_corpus_delivery_is_answered_2xx_without_an_error_log(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    deliveries = corpus_deliveries()
    assert len(deliveries) >= 11
    with serve_for(fake, tmp_path) as app:
        for event, path in deliveries:
            body = path.read_bytes()  # the file's exact bytes, signed as GitHub signs them
            response = app.post("/webhooks/github", body, github_headers(event, body))
            assert response.is_success, (path, response.status_code, response.text)
        app.wait_idle()
        installations = app.run(app.service.store.installations())
        recorded = app.run(app.service.store.deliveries(100))
    assert errors_in(caplog) == []
    # Only what keeps state is written: a delivery that queues nothing is answered unrecorded.
    assert [d.event for d in recorded] == ["installation"]
    # installation.created keeps the installation table
    assert [(i.id, i.account, i.repos) for i in installations] == [
        (957387, "Codertocat", ("Codertocat/Hello-World",))
    ]
    # Nothing in the corpus addresses pairbot, so nothing reached GitHub.
    assert fake.log == []


def test_installation_events_keep_the_installation_table(fake: AppGitHub, tmp_path: Path) -> None:
    created = fixture("github-webhooks/installation/created.json")
    ident = created["installation"]["id"]
    added = {
        "action": "added",
        "installation": created["installation"],
        "repositories_added": [{"id": 1, "full_name": "Codertocat/Other", "name": "Other"}],
        "repositories_removed": [],
        "repository_selection": "selected",
        "sender": created["sender"],
    }
    suspended = copy.deepcopy(created) | {"action": "suspend"}
    deleted = copy.deepcopy(created) | {"action": "deleted"}
    with serve_for(fake, tmp_path) as app:
        seen = []
        for event, payload in (
            ("installation", created),
            ("installation_repositories", added),
            ("installation", suspended),
        ):
            assert app.deliver(event, payload).is_success
            seen.append(
                [(i.id, i.repos, i.suspended) for i in app.run(app.service.store.installations())]
            )
        page = app.page("/jobs").text
        assert app.deliver("installation", deleted).is_success
        assert app.run(app.service.store.installations()) == []
    assert seen == [
        [(ident, ("Codertocat/Hello-World",), False)],
        [(ident, ("Codertocat/Hello-World", "Codertocat/Other"), False)],
        [(ident, ("Codertocat/Hello-World", "Codertocat/Other"), True)],
    ]
    assert "Codertocat/Other" in page and "suspended" in page


# -- the status page and health -------------------------------------------------------------------


def test_the_status_page_shows_what_happened_escaped_and_without_secrets(
    fake: AppGitHub, tmp_path: Path
) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair implement", "octocat")
    from tests.web.conftest import comment_event

    created = fixture("github-webhooks/installation/created.json")
    created["installation"]["account"]["login"] = "<script>alert(1)</script>"
    with serve_for(fake, tmp_path) as app:
        app.deliver(
            "issue_comment",
            comment_event(fake, card, comment, "/pair implement", fake.users["octocat"]),
        )
        app.deliver("installation", created)
        app.wait_idle()
        page = app.page("/jobs")
        cards = app.page("/")
        health = app.get("/healthz")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "unsafe-inline" not in page.headers["content-security-policy"]
    # The card's run-state is on its repository's pair-state branch: the overview lists it
    # from the queue, with no status guessed from the command's "done".
    assert "octocat/Hello-World" in cards.text and "unknown" in cards.text
    text = page.text
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "octocat/Hello-World" in text and "implement" in text
    assert "dispatched to GitHub Actions" in text
    assert "issue_comment.created" in text
    assert SECRET not in text and "PRIVATE KEY" not in text
    assert (health.status_code, health.json()) == (200, {"status": "ok", "worker": "running"})


def test_the_status_page_lists_local_batches_with_their_next_step(
    fake: AppGitHub, tmp_path: Path
) -> None:
    from app.cli.demo import prepare
    from app.web.pages.read import read_local

    project = tmp_path / "project"
    prepare(project)
    (project / ".pair" / "batches" / "broken").mkdir()
    (project / ".pair" / "batches" / "broken" / "batch.yaml").write_text("phases: 7\n")
    app = create_app(
        app_settings(tmp_path),
        github=github_forges(fake),
        local=lambda: read_local(project, None),
    )
    with served(app) as running:
        text = running.page("/batches").text
    assert "hello" in text and "propose" in text  # the demo batch and its next transition
    assert "broken" in text and "error" in text


def test_the_status_page_lists_the_batches_of_every_worker_checkout(
    fake: AppGitHub, tmp_path: Path
) -> None:
    from app.cli.demo import prepare
    from app.web.dashboard import worker_batches
    from app.web.pages.read import read_local

    root = tmp_path / "root"
    root.mkdir()
    checkouts = tmp_path / "checkouts"
    prepare(checkouts / "octo" / "svc")
    (checkouts / "octo" / "empty").mkdir(parents=True)  # a checkout with no batch shows none
    (checkouts / "stray-file").write_text("not a directory\n")
    app = create_app(
        app_settings(tmp_path),
        github=github_forges(fake),
        local=lambda: read_local(root, checkouts),
    )
    with served(app) as running:
        text = running.page("/batches").text
    assert "octo/svc" in text and "hello" in text and "propose" in text
    assert "octo/empty" not in text
    assert worker_batches(root, tmp_path / "gone") == []  # a vanished directory shows nothing


# -- Azure DevOps ---------------------------------------------------------------------------------

ADO_USER, ADO_PASSWORD = "pairbot-hooks", "correct horse battery staple"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def azure_settings() -> dict[str, Any]:
    return {"ado_username": ADO_USER, "ado_password": SecretStr(ADO_PASSWORD)}


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        basic(ADO_USER, "wrong"),
        basic("someone", ADO_PASSWORD),
        "Basic !!!not-base64",
        "Bearer " + ADO_PASSWORD,
    ],
)
def test_azure_devops_without_valid_credentials_is_401_never_410(
    fake: AppGitHub, tmp_path: Path, authorization: str | None
) -> None:
    body = (
        Path(__file__).resolve().parents[1]
        / "fixtures"
        / "azure-devops"
        / "git.pullrequest.created.json"
    ).read_bytes()
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if authorization is not None:
        headers["Authorization"] = authorization
    with serve_for(fake, tmp_path, **azure_settings()) as app:
        response = app.post("/webhooks/azure-devops", body, headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Basic")
        nothing_written(app)


def test_azure_devops_accepts_nothing_when_no_credentials_are_configured(
    fake: AppGitHub, tmp_path: Path
) -> None:
    body = b'{"id": "x", "eventType": "git.push"}'
    with serve_for(fake, tmp_path) as app:
        response = app.post(
            "/webhooks/azure-devops",
            body,
            {"Content-Type": "application/json", "Authorization": basic("", "")},
        )
        assert response.status_code == 401
        nothing_written(app)


def test_azure_devops_samples_are_answered_and_deduplicated_on_their_id(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    folder = Path(__file__).resolve().parents[1] / "fixtures" / "azure-devops"
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Authorization": basic(ADO_USER, ADO_PASSWORD),
    }
    with serve_for(fake, tmp_path, **azure_settings()) as app:
        for path in sorted(folder.glob("*.json")):
            body = path.read_bytes()
            first = app.post("/webhooks/azure-devops", body, headers)
            again = app.post("/webhooks/azure-devops", body, headers)
            assert first.status_code == 200, first.text
            assert (again.status_code, again.json()["status"]) == (200, "duplicate")
        recorded = app.run(app.service.store.deliveries())
    # Neither sample queues a job: both are answered, and their redeliveries refused, unwritten.
    assert recorded == []
    assert errors_in(caplog) == []


def azure_pr_comment(content: str, *, comment_id: int = 2, edited: bool = False) -> dict[str, Any]:
    """A `ms.vss-code.git-pullrequest-comment-event`, built from the documented shape around the
    corpus pull request (the corpus has no sample of this event)."""
    sample = fixture("azure-devops/git.pullrequest.created.json")
    pull = sample["resource"]
    pull["sourceRefName"] = "refs/heads/pair/card-7"
    base = pull["url"]
    published = "2014-06-17T16:55:46.589889Z"
    return {
        "subscriptionId": "00000000-0000-0000-0000-000000000000",
        "notificationId": 3,
        "id": str(uuid.uuid4()),
        "eventType": "ms.vss-code.git-pullrequest-comment-event",
        "publisherId": "tfs",
        "message": {"text": "Jamal Hartnett has commented on a pull request"},
        "resource": {
            "comment": {
                "id": comment_id,
                "parentCommentId": 0,
                "author": pull["createdBy"],
                "content": content,
                "publishedDate": published,
                "lastUpdatedDate": published,
                "lastContentUpdatedDate": "2014-06-18T10:00:00Z" if edited else published,
                "commentType": "text",
                "_links": {
                    "self": {"href": f"{base}/threads/21/comments/{comment_id}"},
                    "threads": {"href": f"{base}/threads/21"},
                },
            },
            "pullRequest": pull,
        },
        "resourceVersion": "2.0",
        "createdDate": published,
    }


def test_azure_devops_pr_comment_commands_run_in_the_worker(
    fake: AppGitHub, tmp_path: Path
) -> None:
    executor = RecordingExecutor()
    forge = RecordingForge(permission="write")
    app = create_app(
        app_settings(tmp_path, **azure_settings()),
        github=github_forges(fake),
        azure=lambda_forges(forge),
        executor=executor,
        poll_s=0.05,
    )
    headers = {"Content-Type": "application/json", "Authorization": basic(ADO_USER, ADO_PASSWORD)}
    command = azure_pr_comment("/pair approve")
    edited = azure_pr_comment("/pair abandon", comment_id=3, edited=True)
    with served(app) as running:
        assert (
            running.post(
                "/webhooks/azure-devops", json.dumps(command).encode(), headers
            ).status_code
            == 202
        )
        ignored = running.post("/webhooks/azure-devops", json.dumps(edited).encode(), headers)
        assert "edited" in ignored.json()["reason"]
        running.wait_idle()
    [(job, repo, installation)] = executor.calls
    assert (repo, installation) == ("Fabrikam/Fabrikam", None)
    assert getattr(job, "verb", None) == "approve"
    assert forge.permissions == ["fabrikamfiber4@hotmail.com"]
    # 👀 is not an Azure DevOps reaction: the comment is liked instead.
    assert forge.reactions == [("pull", 1, "21/2", "+1")]
    # A pull request's command: the like is the whole acknowledgement (the card's tracking
    # comment lives on the card, which the cycle finds behind the pull request).
    assert forge.comments == []


class RecordingForge:
    """A Forge for the Azure DevOps edge tests (its HTTP edge is docs/hosts.md's concern)."""

    def __init__(self, permission: str) -> None:
        self.level = permission
        self.permissions: list[str] = []
        self.reactions: list[tuple[str, int, str | None, str]] = []
        self.comments: list[tuple[str, str]] = []

    async def permission(self, user: str) -> Any:
        self.permissions.append(user)
        return self.level

    async def react(self, target: Any, comment_id: str | None, reaction: str) -> None:
        from hosts.errors import Unsupported

        if reaction != "+1":
            raise Unsupported("react", "PR comments can only be liked")
        self.reactions.append((target.kind, target.number, comment_id, reaction))

    async def upsert_comment(self, target: Any, marker: str, body: str) -> Any:
        self.comments.append((marker, body))

    async def dispatch(self, client_payload: Any) -> None:
        raise AssertionError("Azure DevOps jobs are never dispatched to GitHub Actions")


def lambda_forges(forge: RecordingForge) -> Any:
    class Forges:
        def __call__(self, repo: str, installation: int | None) -> RecordingForge:
            return forge

        async def aclose(self) -> None:
            return None

    return Forges()


def test_azure_secret_header_is_an_alternative_to_basic_auth() -> None:
    headers = {"x-pair-secret": "s3cret"}
    assert verify_azure(
        headers, username=None, password=None, secret_header=("X-Pair-Secret", "s3cret")
    )
    assert not verify_azure(
        {"x-pair-secret": "nope"},
        username=None,
        password=None,
        secret_header=("X-Pair-Secret", "s3cret"),
    )
    assert not verify_azure({}, username=None, password=None, secret_header=None)


def test_azure_devops_work_item_commands_are_liked_when_the_notification_names_the_comment(
    fake: AppGitHub, tmp_path: Path
) -> None:
    executor = RecordingExecutor()
    forge = RecordingForge(permission="write")
    app = create_app(
        app_settings(tmp_path, **azure_settings()),
        github=github_forges(fake),
        azure=lambda_forges(forge),
        executor=executor,
        poll_s=0.05,
    )
    headers = {"Content-Type": "application/json", "Authorization": basic(ADO_USER, ADO_PASSWORD)}
    author = {"displayName": "Jamal Hartnett", "uniqueName": "jamal@fabrikam.example", "id": "54d1"}
    notification = {
        "id": str(uuid.uuid4()),
        "eventType": "workitem.commented",
        "resource": {
            "id": 5,
            "rev": 4,
            "fields": {
                "System.TeamProject": "Fabrikam",
                "System.ChangedBy": author,
                "System.History": "<div>/pair status</div>",
            },
            "commentVersionRef": {"commentId": 41, "version": 1},
        },
    }
    with served(app) as running:
        answer = running.post("/webhooks/azure-devops", json.dumps(notification).encode(), headers)
        assert answer.status_code == 202
        running.wait_idle()
    assert forge.permissions == ["jamal@fabrikam.example"]
    # 👀 is refused (Unsupported); the like is what Azure Boards' comment reactions offer.
    assert forge.reactions == [("card", 5, "41", "+1")]
