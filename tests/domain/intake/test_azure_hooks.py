"""The one reading of an Azure DevOps service hook (app.domain.intake.azure_hooks), shared by the
App's `route_azure` and the Azure Pipelines entry, and the entry's read-back check of a comment."""

from __future__ import annotations

from typing import Any

import pytest

from action.azure.hook import confirms
from app.domain.intake.answers import usage_reply
from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.azure_hooks import (
    AZURE_EVENTS,
    FORK_REFUSAL,
    parse_identity_allowlist,
    read_azure_hook,
)
from app.domain.intake.comment_commands import CommandError
from app.domain.intake.intent import Comment, HeadMoved, Ignore, Policy
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
    assert confirms([quoted, real], intent, POLICY) == real  # its id is what gets the like


# -- parity: bots, the identity allowlist, forks ---------------------------------------------

BUILD_SERVICE = {
    "displayName": "Fabrikam-Fiber-Git Build Service (fabrikam)",
    "uniqueName": "Build\\6ce954b1-ce1f-45d1-b94d-e6bf2464ba2c",
    "id": "2B1C4C5B-8E1A-4F3E-9C1D-0A1B2C3D4E5F",
    "descriptor": "svc.MmIxYzRjNWI",
}


def workitem_commented(changed_by: Any, html: str, **resource: Any) -> dict[str, Any]:
    return {
        "id": "n-wi",
        "eventType": "workitem.commented",
        "resource": {
            "id": 7,
            "rev": 3,
            "fields": {
                "System.TeamProject": "Fabrikam",
                "System.ChangedBy": changed_by,
                "System.History": html,
            },
            **resource,
        },
    }


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(pr_comment("/pair approve", author=BUILD_SERVICE), id="pr-build-service"),
        pytest.param(
            workitem_commented(BUILD_SERVICE, "<div>/pair approve</div>"), id="wi-build-service"
        ),
        pytest.param(
            workitem_commented(
                "Project Collection Build Service (fabrikam) <Build\\abc>", "<p>/pair approve</p>"
            ),
            id="wi-collection-build-service-as-text",
        ),
        pytest.param(
            pr_comment("/pair approve", author={**JAMAL, "descriptor": "aadsp.NzA"}),
            id="pr-service-principal",
        ),
    ],
)
def test_a_bots_comment_is_ignored_silently(payload: dict[str, Any]) -> None:
    intent = read_azure_hook(payload, POLICY).intent
    assert isinstance(intent, Ignore) and intent.silent
    assert "not on the allowlist" in intent.reason


def test_an_allowlisted_identity_acts_whatever_its_case() -> None:
    policy = Policy(identity_allowlist=parse_identity_allowlist(BUILD_SERVICE["id"], "X"))
    intent = read_azure_hook(pr_comment("/pair status", author=BUILD_SERVICE), policy).intent
    assert isinstance(intent, Comment) and intent.author.is_bot
    ids = policy.identity_allowlist
    assert decide(intent.author, None, frozenset(), ids).allowed
    assert not needs_permission(intent.author, frozenset(), ids)
    # Off the list, the same bot is refused silently, without a permission lookup.
    refused = decide(intent.author, None, frozenset(), frozenset())
    assert (refused.allowed, refused.silent) == (False, True)
    # A person on the list acts without one too.
    person = Author("jamal@fabrikam.com", "54d1a2b3-0000-4000-8000-00000000abcd")
    listed = frozenset({person.id})
    assert decide(person, None, frozenset(), listed).allowed
    assert not needs_permission(person, frozenset(), listed)
    assert needs_permission(person, frozenset(), frozenset())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", frozenset()),
        (" 54D1A2B3-0000-4000-8000-00000000ABCD ", {"54d1a2b3-0000-4000-8000-00000000abcd"}),
        (
            "54d1a2b3-0000-4000-8000-00000000abcd,\n 2b1c4c5b-8e1a-4f3e-9c1d-0a1b2c3d4e5f,",
            {"54d1a2b3-0000-4000-8000-00000000abcd", "2b1c4c5b-8e1a-4f3e-9c1d-0a1b2c3d4e5f"},
        ),
    ],
)
def test_the_identity_allowlist_reads_guids(text: str, expected: frozenset[str]) -> None:
    assert parse_identity_allowlist(text, "PAIR_ALLOWLIST") == expected


@pytest.mark.parametrize(
    "bad",
    [
        "jamal",  # a display name is no account
        "<jamal@fabrikam.com>",
        "12345",
        "{54d1a2b3-0000-4000-8000-00000000abcd}",
        "x" * 99,
    ],
)
def test_a_bad_allowlist_entry_is_named_with_the_allowed_form(bad: str) -> None:
    with pytest.raises(ValueError, match="PAIR_ALLOWLIST entry") as err:
        parse_identity_allowlist(f"54d1a2b3-0000-4000-8000-00000000abcd, {bad}", "PAIR_ALLOWLIST")
    assert "GUIDs" in str(err.value) and bad[:20] in str(err.value)


FORK = {"repository": {"name": "demo-fork", "project": {"name": "Elsewhere"}}}


def test_a_command_on_a_forks_pull_request_is_answered_with_the_refusal() -> None:
    payload = pr_comment("/pair implement")
    payload["resource"]["pullRequest"]["forkSource"] = FORK
    intent = read_azure_hook(payload, POLICY).intent
    assert isinstance(intent, Comment)
    assert isinstance(intent.command, CommandError)
    assert intent.command.message == FORK_REFUSAL
    assert "/pair implement" in usage_reply(intent.command)
    # A scope decision there is ignored, and so is a moved head.
    decision = pr_comment('```json\n{"schemaVersion": 1}\n```')
    decision["resource"]["pullRequest"]["forkSource"] = FORK
    moved = pull_updated("refs/heads/pair/card-7")
    moved["resource"]["forkSource"] = FORK
    for ignored in (
        read_azure_hook(decision, POLICY).intent,
        read_azure_hook(moved, POLICY).intent,
    ):
        assert isinstance(ignored, Ignore) and "fork" in ignored.reason
    # A comment without a command stays what it was.
    chatter = pr_comment("looks good")
    chatter["resource"]["pullRequest"]["forkSource"] = FORK
    assert isinstance(read_azure_hook(chatter, POLICY).intent, Ignore)
    # A null forkSource is the repository's own branch.
    own = pull_updated("refs/heads/pair/card-7")
    own["resource"]["forkSource"] = None
    assert isinstance(read_azure_hook(own, POLICY).intent, HeadMoved)


def test_a_work_item_notification_that_names_its_comment_gives_its_id() -> None:
    payload = workitem_commented(
        JAMAL, "<div>/pair status</div>", commentVersionRef={"commentId": 41}
    )
    intent = read_azure_hook(payload, POLICY).intent
    assert isinstance(intent, Comment) and intent.comment.id == "41"
    older = read_azure_hook(workitem_commented(JAMAL, "<div>/pair status</div>"), POLICY).intent
    assert isinstance(older, Comment) and older.comment.id == ""


# -- which comment a work-item notification is: work item, comment id, version ----------------


def documented_commented(number: int, rev: int, **resource: Any) -> dict[str, Any]:
    """`workitem.commented` as Microsoft's service-hook events page shows it (the resource is
    the work item: `id`, `rev`, `fields` with `System.History`), moved to `number` and `rev`."""
    return {
        "subscriptionId": "00000000-0000-0000-0000-000000000000",
        "notificationId": 4,
        "id": f"fb2617ed-60df-4518-81fa-749faa6c5c{number:02d}",
        "eventType": "workitem.commented",
        "publisherId": "tfs",
        "resource": {
            "id": number,
            "rev": rev,
            "fields": {
                "System.AreaPath": "FabrikamCloud",
                "System.TeamProject": "FabrikamCloud",
                "System.WorkItemType": "Bug",
                "System.ChangedBy": "Jamal Hartnett <jamal@fabrikam.com>",
                "System.History": "<div>/pair status</div>",
            },
            "url": f"http://fabrikam-fiber-inc.visualstudio.com/DefaultCollection/_apis/wit/workItems/{number}",
            **resource,
        },
        "resourceVersion": "1.0",
    }


def test_work_item_comments_are_keyed_by_item_and_revision_without_a_comment_ref() -> None:
    eleven = read_azure_hook(documented_commented(11, 7), POLICY)
    twelve = read_azure_hook(documented_commented(12, 7), POLICY)
    assert (eleven.dedupe_id, twelve.dedupe_id) == ("wi11:rev7", "wi12:rev7")
    assert eleven.repo == twelve.repo == "FabrikamCloud"


def test_work_item_comments_are_keyed_by_item_comment_and_version_with_a_comment_ref() -> None:
    ref = {
        "commentId": 41,
        "version": 2,
        "url": "https://dev.azure.com/f/_apis/wit/workItems/12/comments/41/versions/2",
    }
    hook = read_azure_hook(documented_commented(12, 7, commentVersionRef=ref), POLICY)
    assert hook.dedupe_id == "wi12:c41:v2"
    assert isinstance(hook.intent, Comment) and hook.intent.comment.id == "41"
    # The same comment id on another work item is another comment.
    other = read_azure_hook(documented_commented(11, 7, commentVersionRef=ref), POLICY)
    assert other.dedupe_id == "wi11:c41:v2"
    unversioned = {"commentId": 41}
    assert (
        read_azure_hook(
            documented_commented(12, 7, commentVersionRef=unversioned), POLICY
        ).dedupe_id
        == "wi12:c41"
    )


def test_an_update_shaped_work_item_resource_is_read_by_its_work_item_id() -> None:
    # workitem.updated's resource shape: `id` is the update's, the item is `workItemId`, its
    # fields are under `revision` and a changed field holds `newValue`.
    payload = {
        "id": "n-upd",
        "eventType": "workitem.commented",
        "resource": {
            "id": 3,
            "workItemId": 12,
            "rev": 7,
            "fields": {"System.History": {"newValue": "<div>/pair status</div>"}},
            "revision": {
                "id": 12,
                "rev": 7,
                "fields": {
                    "System.TeamProject": "Fabrikam",
                    "System.ChangedBy": "Jamal <jamal@fabrikam.com>",
                },
            },
        },
    }
    hook = read_azure_hook(payload, POLICY)
    assert hook.dedupe_id == "wi12:rev7" and hook.repo == "Fabrikam"
    assert isinstance(hook.intent, Comment) and hook.intent.card == 12


def test_a_work_item_comment_without_a_revision_is_keyed_by_its_notification() -> None:
    payload = documented_commented(12, 7)
    del payload["resource"]["rev"]
    assert read_azure_hook(payload, POLICY, "n/../9").dedupe_id == "wi12:nn-..-9"


def test_pull_request_comments_are_keyed_by_pull_thread_and_comment() -> None:
    assert read_azure_hook(pr_comment("/pair status"), POLICY).dedupe_id == "pr9:31/2"
