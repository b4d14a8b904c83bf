"""Identifiers no host would send, through the real app on uvicorn: each hostile value in a
signed delivery is answered 422 naming the field, logged once, and written nowhere (no
delivery, no job, no installation); and Azure Boards comments on two work items at one
revision are two jobs (issue #27 items 6 and 7)."""

from __future__ import annotations

import copy
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.web.app import create_app
from tests.support.fake_github import User
from tests.web.conftest import (
    AppGitHub,
    RecordingExecutor,
    Served,
    app_settings,
    comment_event,
    fixture,
    github_forges,
    served,
)
from tests.web.test_edge import (
    ADO_PASSWORD,
    ADO_USER,
    RecordingForge,
    azure_settings,
    basic,
    lambda_forges,
    nothing_written,
    serve_for,
)

MAINTAINER = User("maintainer", 4242)
AZURE_HEADERS = {"Content-Type": "application/json", "Authorization": basic(ADO_USER, ADO_PASSWORD)}


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "app.web.app" and r.levelno >= logging.WARNING
    ]


def assert_refused(
    app: Served, response: Any, field: str, caplog: pytest.LogCaptureFixture, what: str
) -> None:
    assert response.status_code == 422, f"{what}: {response.status_code} {response.text}"
    answer = response.json()
    assert answer["status"] == "refused", what
    assert field in answer["reason"] and "got " in answer["reason"], what
    assert "\n" not in answer["reason"] and len(answer["reason"]) < 400, what
    lines = refusals(caplog)
    assert len(lines) == 1 and "outcome=refused" in lines[0] and field in lines[0], (what, lines)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], what
    nothing_written(app)
    caplog.clear()


# -- GitHub ------------------------------------------------------------------------------------

BAD_NUMBERS = [-3, 0, "7", True, 1.5, {"id": 1}]
BAD_FULL_NAMES = [
    "../../etc",
    "a/b/c",
    "",
    "owner",
    "/repo",
    "owner/",
    "owner/..",
    "owner/.",
    "-owner/repo",
    "own\ner/repo",
    "owner/re\x00po",
    "owner/re po",
    "o" * 101 + "/repo",
    "owner/" + "r" * 101,
    7,
]


def test_a_comment_with_an_invalid_identifier_is_refused_422_and_written_nowhere(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cases: list[tuple[str, Any, str]] = []
    for bad in BAD_NUMBERS:
        cases += [
            ("installation.id", bad, "installation.id"),
            ("issue.number", bad, "issue.number"),
            ("comment.id", bad, "comment.id"),
        ]
    cases += [("repository.full_name", bad, "repository.full_name") for bad in BAD_FULL_NAMES]
    cases.append(("installation", "not an object", "installation.id"))
    with serve_for(fake, tmp_path) as app:
        for path, bad, field in cases:
            payload = comment_event(fake, 5, 77, "/pair status", MAINTAINER)
            node_key, _, leaf = path.rpartition(".")
            if node_key:
                payload[node_key][leaf] = bad
            else:
                payload[leaf] = bad
            response = app.deliver("issue_comment", payload)
            assert_refused(app, response, field, caplog, f"{path}={bad!r}")
        # The same delivery with valid identifiers is queued: the refusals were the values.
        good = app.deliver("issue_comment", comment_event(fake, 5, 77, "/pair status", MAINTAINER))
        assert good.status_code == 202, good.text


def test_a_comment_that_asks_nothing_is_ignored_whatever_its_identifiers(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A comment no reading finds a command in is answered before its identifiers are checked
    (`unaddressed_comment`): 200 "ignored", no refusal line, nothing written — as for any
    comment that asks nothing; the same identifiers on a command are refused above."""
    caplog.set_level(logging.INFO)
    cases: list[tuple[str, Any]] = [("installation.id", bad) for bad in BAD_NUMBERS]
    cases += [("comment.id", bad) for bad in BAD_NUMBERS]
    cases += [("repository.full_name", bad) for bad in BAD_FULL_NAMES]
    with serve_for(fake, tmp_path) as app:
        for path, bad in cases:
            payload = comment_event(fake, 5, 77, "Thanks, looks good.", MAINTAINER)
            node_key, _, leaf = path.rpartition(".")
            payload[node_key][leaf] = bad
            response = app.deliver("issue_comment", payload)
            what = f"{path}={bad!r}"
            assert response.status_code == 200, f"{what}: {response.text}"
            assert response.json() == {
                "status": "ignored",
                "reason": "the comment on issue #5 holds no command for pairbot",
            }, what
            assert refusals(caplog) == [], what
            nothing_written(app)


def synchronize(fake: AppGitHub, number: Any, sha: Any) -> dict[str, Any]:
    payload: dict[str, Any] = copy.deepcopy(
        fixture("github-webhooks/pull_request/synchronize.json")
    )
    full = f"{fake.owner}/{fake.repo}"
    payload["repository"]["full_name"] = full
    payload["pull_request"]["head"]["repo"]["full_name"] = full
    payload["pull_request"]["head"]["ref"] = "pair/card-5"
    payload["pull_request"]["head"]["sha"] = sha
    payload["pull_request"]["number"] = number
    payload["number"] = number
    payload["installation"] = {"id": fake.installation_id}
    return payload


@pytest.mark.parametrize(
    "case",
    [
        pytest.param((-2, "a" * 40, "pull_request.number"), id="negative-pull"),
        pytest.param((0, "a" * 40, "pull_request.number"), id="zero-pull"),
        pytest.param((5, "abc", "pull_request.head.sha"), id="short-sha"),
        pytest.param((5, "A" * 40, "pull_request.head.sha"), id="upper-sha"),
        pytest.param((5, "g" * 40, "pull_request.head.sha"), id="not-hex"),
        pytest.param((5, "a" * 41, "pull_request.head.sha"), id="41-hex"),
        pytest.param((5, "a" * 40 + "\n", "pull_request.head.sha"), id="newline"),
        pytest.param((5, 1234, "pull_request.head.sha"), id="number"),
    ],
)
def test_a_moved_head_with_an_invalid_number_or_commit_is_refused(
    fake: AppGitHub,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    case: tuple[Any, Any, str],
) -> None:
    number, sha, field = case
    caplog.set_level(logging.INFO)
    with serve_for(fake, tmp_path) as app:
        response = app.deliver("pull_request", synchronize(fake, number, sha))
        assert_refused(app, response, field, caplog, f"{number} {sha!r}")


def test_sha1_and_sha256_heads_are_both_taken(fake: AppGitHub, tmp_path: Path) -> None:
    with serve_for(fake, tmp_path) as app:
        for sha in ("a" * 40, "b" * 64):
            response = app.deliver("pull_request", synchronize(fake, 5, sha))
            assert response.status_code == 202, response.text


def test_installation_events_with_invalid_repository_names_are_refused(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with serve_for(fake, tmp_path) as app:
        payload = fixture("github-webhooks/installation/created.json")
        payload["repositories"][0]["full_name"] = "../../etc"
        response = app.deliver("installation", payload)
        assert_refused(app, response, "repositories[0].full_name", caplog, "installation")
        # One of the App's own events (installation_repositories.added), its names invalid.
        payload = fixture("github-webhooks/installation/created.json")
        added = {"action": "added", "installation": payload["installation"]}
        added["repositories_added"] = [{"id": 1, "full_name": "a/b/c"}]
        response = app.deliver("installation_repositories", added)
        assert_refused(
            app, response, "repositories_added[0].full_name", caplog, "installation_repositories"
        )


# -- Azure DevOps -----------------------------------------------------------------------------


def workitem_commented(number: Any, rev: Any, project: Any = "Fabrikam", **ref: Any) -> bytes:
    """`workitem.commented` in Microsoft's documented shape (the resource is the work item)."""
    resource: dict[str, Any] = {
        "id": number,
        "rev": rev,
        "fields": {
            "System.TeamProject": project,
            "System.WorkItemType": "User Story",
            "System.ChangedBy": {
                "displayName": "Jamal Hartnett",
                "uniqueName": "jamal@fabrikam.example",
                "id": "54d1",
            },
            "System.History": "<div>/pair status</div>",
        },
        "url": f"https://dev.azure.com/fabrikam/_apis/wit/workItems/{number}",
    }
    if ref:
        resource["commentVersionRef"] = ref
    notification = {
        "id": str(uuid.uuid4()),
        "eventType": "workitem.commented",
        "publisherId": "tfs",
        "resource": resource,
        "resourceVersion": "1.0",
    }
    return json.dumps(notification).encode()


def azure_app(tmp_path: Path, fake: AppGitHub) -> Any:
    return create_app(
        app_settings(tmp_path, **azure_settings()),
        github=github_forges(fake),
        azure=lambda_forges(RecordingForge(permission="write")),
        executor=RecordingExecutor(),
        poll_s=0.05,
    )


def test_work_item_comments_at_one_revision_on_two_items_are_two_jobs(
    fake: AppGitHub, tmp_path: Path
) -> None:
    with served(azure_app(tmp_path, fake)) as app:
        # Without commentVersionRef (the common shape): #11 and #12, both at revision 7.
        for number in (11, 12):
            answer = app.post(
                "/webhooks/azure-devops", workitem_commented(number, 7), AZURE_HEADERS
            )
            assert (answer.status_code, answer.json()["status"]) == (202, "queued"), answer.text
        # With commentVersionRef: comment 41 on #11 and on #12, and a second version of it.
        for number, version in ((11, 1), (12, 1), (12, 2)):
            body = workitem_commented(number, 8, commentId=41, version=version)
            answer = app.post("/webhooks/azure-devops", body, AZURE_HEADERS)
            assert (answer.status_code, answer.json()["status"]) == (202, "queued"), answer.text
        # The same comment notified again (a new notification id) is the same command: the
        # store keeps one job per key, so this one adds none.
        again = app.post("/webhooks/azure-devops", workitem_commented(12, 7), AZURE_HEADERS)
        assert again.status_code < 300, again.text
        app.wait_idle()
        jobs = app.run(app.service.store.jobs())
    assert sorted((job.number, job.kind) for job in jobs) == [
        (11, "command"),
        (11, "command"),
        (12, "command"),
        (12, "command"),
        (12, "command"),
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(workitem_commented(0, 7), "resource.id", id="work-item-0"),
        pytest.param(workitem_commented(-1, 7), "resource.id", id="work-item-negative"),
        pytest.param(workitem_commented(5, -7), "resource.rev", id="revision-negative"),
        pytest.param(
            workitem_commented(5, 7, commentId=-41), "commentVersionRef.commentId", id="comment"
        ),
        pytest.param(
            workitem_commented(5, 7, commentId=41, version=0),
            "commentVersionRef.version",
            id="version",
        ),
        *(
            pytest.param(workitem_commented(5, 7, project), "System.TeamProject", id=name)
            for name, project in (
                ("project-slash", "Fabrikam/../x"),
                ("project-dotdot", ".."),
                ("project-control", "Fab\x07rikam"),
                ("project-newline", "Fabrikam\n"),
                ("project-underscore", "_Fabrikam"),
                ("project-long", "F" * 65),
                ("project-empty", ""),
            )
        ),
    ],
)
def test_azure_notifications_with_invalid_identifiers_are_refused(
    fake: AppGitHub,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    field: str,
) -> None:
    caplog.set_level(logging.INFO)
    with served(azure_app(tmp_path, fake)) as app:
        response = app.post("/webhooks/azure-devops", body, AZURE_HEADERS)
        assert_refused(app, response, field, caplog, field)


def test_azure_pull_request_updates_with_invalid_names_or_commits_are_refused(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cases = [
        (("repository", "name"), "../etc", "resource.repository.name"),
        (("repository", "name"), "a\\b", "resource.repository.name"),
        (("repository", "project", "name"), "a/b", "resource.repository.project.name"),
        (("pullRequestId",), 0, "resource.pullRequestId"),
        (("lastMergeSourceCommit", "commitId"), "HEAD~1", "lastMergeSourceCommit.commitId"),
    ]
    with served(azure_app(tmp_path, fake)) as app:
        for path, bad, field in cases:
            notification = fixture("azure-devops/git.pullrequest.created.json")
            notification["eventType"] = "git.pullrequest.updated"
            notification["id"] = str(uuid.uuid4())
            node = notification["resource"]
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = bad
            body = json.dumps(notification).encode()
            response = app.post("/webhooks/azure-devops", body, AZURE_HEADERS)
            assert_refused(app, response, field, caplog, f"{path}={bad!r}")
