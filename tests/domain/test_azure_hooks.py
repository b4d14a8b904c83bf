"""The one reading of an Azure DevOps service hook (app.domain.azure_hooks), shared by the App's
`route_azure` and the Azure Pipelines entry, and the entry's read-back check of a comment."""

from __future__ import annotations

from typing import Any

import pytest

from action.azure.hook import confirms
from app.domain.azure_hooks import AZURE_EVENTS, read_azure_hook
from app.domain.intake import Comment, HeadMoved, Ignore, Policy
from hosts.models import Author
from hosts.models import Comment as HostComment

POLICY = Policy()
JAMAL = {"displayName": "Jamal", "uniqueName": "jamal@fabrikam.com", "id": "54d1"}


def pr_comment(content: str, **comment: Any) -> dict[str, Any]:
    base = {
        "id": 2,
        "content": content,
        "author": JAMAL,
        "commentType": "text",
        "publishedDate": "2026-05-01T12:00:00Z",
        "_links": {
            "self": {"href": "https://dev.azure.com/f/_apis/git/repositories/r/pullRequests/9"},
            "threads": {"href": "https://dev.azure.com/f/_apis/git/pullRequests/9/threads/31"},
        },
    }
    base.update(comment)
    return {
        "id": "n-pr",
        "eventType": "ms.vss-code.git-pullrequest-comment-event",
        "resource": {
            "comment": base,
            "pullRequest": {
                "pullRequestId": 9,
                "repository": {"name": "demo", "project": {"name": "Fabrikam"}},
            },
        },
    }


def pull_updated(source: str) -> dict[str, Any]:
    return {
        "id": "n-up",
        "eventType": "git.pullrequest.updated",
        "resource": {
            "pullRequestId": 9,
            "sourceRefName": source,
            "lastMergeSourceCommit": {"commitId": "a" * 40},
            "repository": {"name": "demo", "project": {"name": "Fabrikam"}},
        },
    }


def test_a_pr_comment_reads_like_an_issue_comment() -> None:
    hook = read_azure_hook(pr_comment("/pair status"), POLICY)
    assert (hook.event, hook.repo) == ("ms.vss-code.git-pullrequest-comment-event", "Fabrikam/demo")
    assert isinstance(hook.intent, Comment)
    assert (hook.intent.card, hook.intent.comment.id, hook.intent.is_pull) == (9, "31/2", True)
    assert hook.intent.author == Author("jamal@fabrikam.com", "54d1")


@pytest.mark.parametrize(
    ("payload", "reason", "silent"),
    [
        (pr_comment("<!-- pair:reply #9 -->\nhi"), "pairbot's own comment", True),
        (pr_comment("/pair status", commentType="system"), "a system comment", False),
        (
            pr_comment("/pair status", lastContentUpdatedDate="2026-05-01T12:05:00Z"),
            "an edited comment never acts",
            False,
        ),
        (pr_comment("/pair status", _links={}), "without a repository, a pull, a thread", False),
        (pull_updated("refs/heads/topic"), "is not on a pairbot branch", False),
        ({"eventType": "git.pullrequest.updated", "resource": {}}, "without a repository", False),
        ({"eventType": "git.push"}, "git.push is not for pairbot", False),
        ({}, "an event without eventType is not for pairbot", False),
    ],
)
def test_what_is_not_for_pairbot_is_ignored_with_its_reason(
    payload: dict[str, Any], reason: str, silent: bool
) -> None:
    hook = read_azure_hook(payload, POLICY)
    assert isinstance(hook.intent, Ignore)
    assert reason in hook.intent.reason
    assert hook.intent.silent is silent
    assert hook.repo == ""


def test_a_moved_head_on_a_pairbot_branch_is_read() -> None:
    hook = read_azure_hook(pull_updated("refs/heads/pair/card-7"), POLICY)
    assert hook.intent == HeadMoved(pull=9, head_sha="a" * 40)
    assert "git.pullrequest.updated" in AZURE_EVENTS


def test_a_non_positive_pull_number_is_ignored() -> None:
    payload = pull_updated("refs/heads/pair/card-7")
    payload["resource"]["pullRequestId"] = 0
    intent = read_azure_hook(payload, POLICY).intent
    assert isinstance(intent, Ignore) and "positive integer" in intent.reason


# -- the pipeline entry's read-back of a claimed comment -------------------------------------------


def claimed(payload: dict[str, Any]) -> Comment:
    intent = read_azure_hook(payload, POLICY).intent
    assert isinstance(intent, Comment)
    return intent


def test_a_pr_comment_is_confirmed_by_its_id_author_and_command() -> None:
    intent = claimed(pr_comment("/pair status"))
    jamal = Author("jamal@fabrikam.com", "54d1")
    real = HostComment(id="31/2", body="/pair status", author=jamal)
    assert confirms([real], intent, POLICY)
    assert not confirms([HostComment(id="31/3", body="/pair status", author=jamal)], intent, POLICY)
    other = Author("mallory@fabrikam.com", "66")
    assert not confirms([HostComment(id="31/2", body="/pair status", author=other)], intent, POLICY)
    assert not confirms(
        [HostComment(id="31/2", body="/pair abandon", author=jamal)], intent, POLICY
    )


def test_a_work_item_comment_is_confirmed_by_author_and_command_in_its_html() -> None:
    payload = {
        "id": "n-wi",
        "eventType": "workitem.commented",
        "resource": {
            "id": 7,
            "rev": 3,
            "fields": {
                "System.TeamProject": "Fabrikam",
                "System.ChangedBy": "Jamal <JAMAL@fabrikam.com>",
                "System.History": "<div>/pair implement</div>",
            },
        },
    }
    intent = claimed(payload)
    jamal = Author("jamal@fabrikam.com", "54d1")
    quoted = HostComment(id="5", body="<blockquote>/pair implement</blockquote>", author=jamal)
    assert not confirms([quoted], intent, POLICY)
    real = HostComment(id="6", body="<div>/pair implement</div>", author=jamal)
    assert confirms([quoted, real], intent, POLICY)
