"""`action.early`: a comment's permission and 👀 before the lock, from the payload alone.

The requests go to an `httpx.MockTransport` that records them; the last test runs the real
entry (`python -m action`'s `main`) in a subprocess and stops it at its first request, to list
the modules loaded by then.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from action.context import ActionContext
from action.early import Receipt, acknowledge, permission_level
from action.event import Comment, classify, policy_of

WEBHOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "github-webhooks"
REPO_ROOT = Path(__file__).resolve().parents[2]
API = "https://api.github.com"
PERMISSION = "/repos/octo-org/octo-repo/collaborators/{login}/permission"


def comment_payload(body: str, *, login: str = "octocat", uid: int = 583231) -> dict[str, Any]:
    payload = copy.deepcopy(json.loads((WEBHOOKS / "issue_comment/created.json").read_text()))
    payload["comment"]["body"] = body
    payload["comment"]["user"].update(login=login, id=uid, type="User")
    return payload


def run_env(tmp_path: Path, payload: dict[str, Any], **extra: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload), encoding="utf-8")
    return {
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_API_URL": API,
        "GITHUB_RUN_ID": "77",
        "GITHUB_WORKSPACE": str(tmp_path),
        "INPUT_GITHUB_TOKEN": "ghs_faketoken0123456789",
        **extra,
    }


class GitHub:
    """Answers the two early requests; records every request."""

    def __init__(self, *, permission: str = "write", status: dict[str, int] | None = None):
        self.permission = permission
        self.status = status or {}
        self.requests: list[tuple[str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        assert request.headers["authorization"] == "Bearer ghs_faketoken0123456789"
        if request.method == "GET":
            status = self.status.get("permission", 200)
            return httpx.Response(status, json={"permission": "x", "role_name": self.permission})
        assert json.loads(request.content) == {"content": "eyes"}
        return httpx.Response(self.status.get("reaction", 201), json={"id": 1})


def early(
    tmp_path: Path, body: str, github: GitHub, **env: str
) -> tuple[Receipt, list[str], Comment]:
    ctx = ActionContext.from_env(run_env(tmp_path, comment_payload(body), **env))
    intent = classify(ctx.event_name, ctx.read_event(), policy_of(ctx))
    assert isinstance(intent, Comment)
    said: list[str] = []
    receipt = acknowledge(ctx, intent, said.append, transport=httpx.MockTransport(github))
    return receipt, said, intent


def test_a_command_by_a_writer_is_authorized_then_acknowledged(tmp_path: Path) -> None:
    github = GitHub(permission="write")
    receipt, said, intent = early(tmp_path, "/pair implement", github)
    assert github.requests == [
        ("GET", PERMISSION.format(login="octocat")),
        ("POST", f"/repos/octo-org/octo-repo/issues/comments/{intent.comment.id}/reactions"),
    ]
    assert receipt == Receipt(permission="write", owed=False)
    assert said == []


def test_an_allowlisted_author_is_acknowledged_without_a_permission_lookup(
    tmp_path: Path,
) -> None:
    github = GitHub(permission="none")
    receipt, _, _ = early(tmp_path, "/pair implement", github, INPUT_ALLOWLIST="583231")
    assert [method for method, _ in github.requests] == ["POST"]
    assert receipt == Receipt(permission=None, owed=False)


@pytest.mark.parametrize(
    ("body", "permission"),
    [
        pytest.param("/pair implement", "read", id="author-may-not-act"),
        pytest.param("/pair implement", "triage", id="triage-is-not-write"),
        pytest.param("/pair help", "write", id="help-is-answered-not-run"),
        pytest.param("/pair frobnicate", "admin", id="usage-is-answered-not-run"),
    ],
)
def test_a_comment_answered_instead_of_run_gets_no_reaction(
    tmp_path: Path, body: str, permission: str
) -> None:
    github = GitHub(permission=permission)
    receipt, said, _ = early(tmp_path, body, github)
    assert [method for method, _ in github.requests] == ["GET"]
    # The full run answers it (refusal, help, usage) with the permission read here.
    assert receipt == Receipt(permission=permission, owed=False)
    assert said == []


def test_an_unknown_user_has_no_permission(tmp_path: Path) -> None:
    github = GitHub(status={"permission": 404})
    receipt, _, _ = early(tmp_path, "/pair implement", github)
    assert [method for method, _ in github.requests] == ["GET"]
    assert receipt == Receipt(permission="none", owed=False)


def test_a_failed_permission_lookup_leaves_everything_to_the_run(tmp_path: Path) -> None:
    github = GitHub(status={"permission": 502})
    receipt, said, _ = early(tmp_path, "/pair implement", github)
    assert [method for method, _ in github.requests] == ["GET"]
    assert receipt == Receipt(permission=None, owed=True)
    assert said == ["pairbot: could not read octocat's permission yet (HTTP 502)"]


@pytest.mark.parametrize("status", [401, 403, 502])
def test_a_refused_reaction_is_owed_not_failed(tmp_path: Path, status: int) -> None:
    github = GitHub(status={"reaction": status})
    receipt, said, intent = early(tmp_path, "/pair implement", github)
    assert receipt == Receipt(permission="write", owed=True)
    assert said == [
        f"pairbot: could not acknowledge comment {intent.comment.id} yet (HTTP {status}); "
        "the 👀 follows once the command is recorded"
    ]


def test_a_reaction_already_there_or_a_comment_gone_is_not_owed(tmp_path: Path) -> None:
    receipt, said, _ = early(tmp_path, "/pair implement", GitHub(status={"reaction": 200}))
    assert receipt.owed is False and said == []
    receipt, said, intent = early(tmp_path, "/pair implement", GitHub(status={"reaction": 404}))
    assert receipt.owed is False
    assert said == [f"pairbot: comment {intent.comment.id} is gone; its 👀 is dropped"]


def test_a_network_failure_is_logged_and_owed(tmp_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    ctx = ActionContext.from_env(run_env(tmp_path, comment_payload("/pair implement")))
    intent = classify(ctx.event_name, ctx.read_event(), policy_of(ctx))
    assert isinstance(intent, Comment)
    said: list[str] = []
    receipt = acknowledge(ctx, intent, said.append, transport=httpx.MockTransport(refuse))
    assert receipt == Receipt()
    assert said == ["pairbot: could not read octocat's permission yet (connection refused)"]


def test_without_a_token_nothing_is_sent(tmp_path: Path) -> None:
    github = GitHub()
    receipt, _, _ = early(tmp_path, "/pair implement", github, INPUT_GITHUB_TOKEN="")
    assert github.requests == [] and receipt == Receipt()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, {"permission": "write", "role_name": "maintain"}, "maintain"),
        (200, {"permission": "admin", "role_name": "custom-role"}, "admin"),
        (200, {"permission": "superuser"}, "none"),
        (200, ["not", "an", "object"], None),
        (404, None, "none"),
        (401, {"message": "Bad credentials"}, None),
        (500, None, None),
    ],
)
def test_permission_level_reads_github_as_the_host_adapter_does(
    status: int, body: Any, expected: str | None
) -> None:
    assert permission_level(status, body) == expected


# The real entry, stopped at its first request: what it loaded by then. `-I` as action.yml runs
# it; the project is put on the path by hand.
PROBE = """
import json, os, sys
sys.path.insert(0, {root!r})
import httpx

def first_request(self, request, **kwargs):
    loaded = [m for m in sys.modules if m.split(".")[0] in ("pydantic", "githubkit", "asyncio")]
    print(json.dumps({{"request": [request.method, request.url.path], "heavy": sorted(loaded)}}))
    sys.stdout.flush()
    os._exit(0)

httpx.Client.send = first_request
from action.__main__ import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    ("allowlist", "first"),
    [
        pytest.param("", ["GET", PERMISSION.format(login="octocat")], id="permission-first"),
        pytest.param("583231", ["POST", None], id="allowlisted-reaction-first"),
    ],
)
def test_the_first_request_is_sent_before_pydantic_githubkit_or_asyncio_load(
    tmp_path: Path, allowlist: str, first: list[str | None]
) -> None:
    env = run_env(tmp_path, comment_payload("/pair implement"), INPUT_ALLOWLIST=allowlist)
    env["PATH"] = os.environ.get("PATH", "")
    done = subprocess.run(
        [sys.executable, "-I", "-c", PROBE.format(root=str(REPO_ROOT))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    seen = json.loads(lines[0])
    assert seen["heavy"] == []
    method, path = seen["request"]
    assert method == first[0]
    assert path == first[1] or (first[1] is None and path.endswith("/reactions"))
