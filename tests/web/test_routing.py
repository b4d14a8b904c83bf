"""The pure parts of the App: routing, job payloads, failure policy and reply text."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.intake.answers import usage_reply
from app.domain.intake.comment_commands import CommandError
from app.domain.intake.intent import Ignore
from app.domain.intake.pair_request import PairRequest, PayloadError
from app.errors import BatchLockedError, ConfigError
from app.web.events import (
    GITHUB_ROUTES,
    Policy,
    Routed,
    html_to_text,
    route_azure,
    route_github,
    serial_key,
)
from app.web.handling import on_failure, tracking_body
from app.web.jobs import (
    CommandJob,
    HeadMovedJob,
    ScopeDecisionJob,
    UnreadComment,
    job_from_payload,
    read_comment,
)
from hosts.errors import HostUnavailable, NotFound, RateLimited
from hosts.git import GitError
from tests.web.conftest import fixture

POLICY = Policy(trigger="pair", app_slug="pairbot", app_id=123456, allowlist=frozenset({42}))


def comment(body: str, **user: Any) -> dict[str, Any]:
    payload: dict[str, Any] = fixture(
        "github-webhooks/issue_comment/created.with-installation.json"
    )
    payload["comment"]["body"] = body
    payload["comment"]["user"].update(user)
    return payload


def worker_reading(routed: Routed) -> CommandJob | Ignore:
    """What the worker reads in the one job the edge queued for a comment (app.web.handling)."""
    [job] = routed.jobs
    unread = UnreadComment.from_json(job.request)
    assert unread is not None and unread.comment == routed.unread
    read = read_comment(unread, delivery="d")
    return read if isinstance(read, Ignore) else read[0]


def test_app_slug_addressing_reaches_the_same_grammar() -> None:
    routed = route_github("issue_comment", "created", comment("@pairbot[bot] status"), POLICY, "d")
    [job] = routed.jobs
    command = worker_reading(routed)
    assert isinstance(command, CommandJob)
    request = command.request
    assert request is not None and request.verb == "status"
    assert job.dedupe_key == "github:Codertocat/Hello-World:comment:492700400"
    assert job.serial_key == "github:Codertocat/Hello-World#1"
    assert job.installation == 1


def test_only_the_first_command_of_a_comment_counts() -> None:
    body = "/pair frobnicate\n/pair implement"
    command = worker_reading(route_github("issue_comment", "created", comment(body), POLICY, "d"))
    assert isinstance(command, CommandJob)
    assert command.request is None and command.problem is not None
    assert "frobnicate" in command.problem.message


def test_commands_in_code_quotes_and_hidden_text_never_run() -> None:
    # The edge's screen sees the trigger and queues the comment; the worker reads no command.
    for body in ("```\n/pair implement\n```", "> /pair implement", "<!-- /pair implement -->"):
        routed = route_github("issue_comment", "created", comment(body), POLICY, "d")
        reading = worker_reading(routed)
        assert isinstance(reading, Ignore), body
        assert reading.reason == "the comment on issue #1 holds no command for pairbot"


def test_a_comment_that_addresses_no_one_is_ignored_at_the_edge_and_written_nowhere() -> None:
    routed = route_github("issue_comment", "created", comment("Thanks, pair later?"), POLICY, "d")
    assert routed.jobs == () and routed.unread is None and not routed.silent
    assert routed.reason == "the comment on issue #1 holds no command for pairbot"


def test_own_comments_are_recognised_by_app_id_or_login() -> None:
    by_app = comment("/pair implement")
    by_app["comment"]["performed_via_github_app"] = {"id": 123456}
    by_login = comment("/pair implement", login="PairBot[bot]", type="Bot", id=99)
    for payload in (by_app, by_login):
        assert route_github("issue_comment", "created", payload, POLICY, "d").silent


def test_a_bots_scope_decision_is_ignored_even_when_the_bot_is_allowlisted() -> None:
    body = '```json\n{"schemaVersion": 1, "decisions": []}\n```'
    payload = comment(body, login="helper[bot]", type="Bot", id=42)
    payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    routed = route_github("issue_comment", "created", payload, POLICY, "d")
    assert routed.silent and "only a person decides scope" in routed.reason
    command = comment("/pair retry", login="helper[bot]", type="Bot", id=42)
    assert len(route_github("issue_comment", "created", command, POLICY, "d").jobs) == 1


def test_deleted_comments_and_other_events_are_not_for_pairbot() -> None:
    deleted = route_github("issue_comment", "deleted", comment("/pair retry"), POLICY, "d")
    assert deleted.reason == "issue_comment.deleted: only a newly created comment acts"
    assert (
        route_github("issues", "opened", {}, POLICY, "d").reason
        == "issues.opened is not for pairbot"
    )
    assert route_github("ping", None, {"hook_id": 7}, POLICY, "d").reason == "ping for hook 7"
    malformed = route_github("issue_comment", "created", {"comment": "x"}, POLICY, "d")
    assert malformed.jobs == () and not malformed.silent
    assert malformed.reason == "issue_comment: comment must be an object"


def test_serial_keys_join_github_issues_and_pulls_but_not_azure_cards_and_pulls() -> None:
    assert serial_key("github", "o/r", "card", 5) == serial_key("github", "o/r", "pull", 5)
    assert serial_key("azure-devops", "p/r", "card", 5) != serial_key(
        "azure-devops", "p/r", "pull", 5
    )


def test_dispatch_payloads_round_trip_and_match_the_action() -> None:
    scope = ScopeDecisionJob(pull=7, comment_id="123", delivery="d")
    moved = HeadMovedJob(pull=7, head_sha="a" * 40, delivery="d")
    assert scope.to_payload() == {
        "version": 1,
        "kind": "scope-decision",
        "pull": 7,
        "commentId": "123",
        "delivery": "d",
    }
    assert moved.to_payload()["head"] == "a" * 40
    for job in (scope, moved):
        assert job_from_payload(job.to_payload()) == job
    request = PairRequest(card=3, verb="retry")
    assert job_from_payload(request.to_payload()) == request
    for bad in (
        {"version": 1, "kind": "merge", "pull": 1},
        {"version": 2, "kind": "head-moved", "pull": 1, "head": "a" * 40},
        {"version": 1, "kind": "head-moved", "pull": 0, "head": "a" * 40},
        {"version": 1, "kind": "head-moved", "pull": 1, "head": "HEAD"},
        {"version": 1, "kind": "scope-decision", "pull": 1},
    ):
        with pytest.raises(PayloadError):
            job_from_payload(bad)


@pytest.mark.parametrize(
    ("error", "attempts", "action"),
    [
        (RateLimited("slow down", retry_after=90), 1, "retry"),
        (HostUnavailable("502"), 2, "retry"),
        (BatchLockedError("busy"), 1, "retry"),
        (HostUnavailable("502"), 6, "fail"),
        (NotFound("no such repo"), 1, "fail"),
        (ConfigError("PAIR_APP_ID"), 1, "fail"),
        (KeyError("bug"), 1, "fail"),
        (GitError("git push failed (exit 1): refused", returncode=1, stderr="refused"), 1, "fail"),
    ],
)
def test_failures_retry_what_time_can_fix(error: Exception, attempts: int, action: str) -> None:
    failure = on_failure(error, attempts)
    assert failure.action == action
    if isinstance(error, RateLimited):
        assert failure.delay_s == 90
    assert failure.expected is not isinstance(error, KeyError)


def test_an_expected_failure_is_recorded_as_one_line_with_its_remedy() -> None:
    pushed = GitError(
        "git push failed (exit 1):\nremote: refused\nerror: failed", returncode=1, stderr=""
    )
    assert on_failure(pushed, 1).message == (
        "git failed: git push failed (exit 1): | remote: refused | error: failed; check the "
        "remote, the credential and the network (a protected or moved branch refuses a push), "
        "then run again"
    )
    assert on_failure(NotFound("get card 7: GitHub answered 404"), 1).message.startswith(
        "not found on the host: get card 7: GitHub answered 404; check that it still exists"
    )


def test_replies_quote_user_text_as_code() -> None:
    reply = usage_reply(CommandError(1, "/pair `x", "unknown verb '@everyone`x'", "/pair approve"))
    # The line is inert code; the message is literal prose (no ping, no code span to break).
    assert reply.startswith("pairbot did not run ``/pair `x``: unknown verb '@\u200beveryone\\`x'.")
    assert "Usage: `/pair approve`" in reply
    multi = usage_reply(CommandError(1, "/pair", "a verb is missing", "line one\nline two"))
    assert multi.endswith("line one\nline two")
    body = tracking_body(PairRequest(card=1, verb="implement"), "pair", "GitHub Actions")
    assert body == "queued `/pair implement`; it runs next in GitHub Actions."


def test_work_item_comments_are_html() -> None:
    # Escaped, so the command grammar reads the plain text a reader saw, never markup.
    assert html_to_text("<div>/pair approve</div><div>thanks &amp; bye</div>") == (
        "\\/pair approve\n\nthanks \\& bye"
    )
    assert html_to_text("<!-- hidden /pair abandon -->seen<br/>x") == "seen\nx"


@pytest.mark.parametrize(
    "history",
    [
        pytest.param("<blockquote>/pair abandon</blockquote>", id="blockquote"),
        pytest.param("<div><blockquote><div>/pair abandon</div></blockquote></div>", id="quote"),
        pytest.param("<pre><code>/pair abandon</code></pre>", id="pre-code"),
        pytest.param("<pre>\n/pair abandon\n</pre>", id="pre"),
        pytest.param("<div><code>/pair abandon</code></div>", id="code"),
        pytest.param('<div><span style="display:none">/pair abandon</span></div>', id="none"),
        pytest.param('<div><span style="font-size:0px">/pair abandon</span></div>', id="tiny"),
        pytest.param('<div><span style="color:#ffffff">/pair abandon</span></div>', id="white"),
        pytest.param("<div hidden>/pair abandon</div>", id="hidden"),
        pytest.param("<ul><li>/pair abandon</li></ul>", id="list"),
        pytest.param("<table><tr><td>/pair abandon</td></tr></table>", id="table"),
        pytest.param("<!-- <div>/pair abandon</div> -->", id="comment"),
        pytest.param("<div>&lt;!-- x --&gt;/pair abandon</div>", id="escaped-comment"),
        pytest.param("<div>`/pair abandon`</div>", id="backticks-are-text"),
        pytest.param("<div>/pair\u202e abandon</div>", id="bidi"),
    ],
)
def test_boards_quotes_code_and_hidden_text_never_act(history: str) -> None:
    routed = route_azure(azure_workitem(f"<div>thanks</div>{history}"), POLICY, "n-9")
    assert routed.jobs == () or all(
        CommandJob.from_json(job.request).request is None
        or CommandJob.from_json(job.request).request.verb != "abandon"
        for job in routed.jobs
    )


def test_boards_top_level_paragraphs_act() -> None:
    body = "<div><div>looks good</div><div>/pair implement until: merged</div></div>"
    [job] = route_azure(azure_workitem(body), POLICY, "n-10").jobs
    request = CommandJob.from_json(job.request).request
    assert request is not None and (request.verb, dict(request.args)) == (
        "implement",
        {"until": "merged"},
    )


def azure_workitem(
    history: str, changed_by: Any = "Jamal Hartnett <fabrikamfiber4@hotmail.com>"
) -> dict[str, Any]:
    """`workitem.commented`, built from the documented shape (the corpus has no sample)."""
    return {
        "id": "a3f9b1b3-2d4c-4f77-9b8e-3b6c5e0a1c11",
        "eventType": "workitem.commented",
        "publisherId": "tfs",
        "resource": {
            "id": 5,
            "rev": 4,
            "fields": {
                "System.TeamProject": "Fabrikam",
                "System.WorkItemType": "User Story",
                "System.Title": "Some great new idea!",
                "System.ChangedBy": changed_by,
                "System.History": history,
            },
            "url": "https://dev.azure.com/fabrikam/_apis/wit/workItems/5",
        },
    }


def test_azure_work_item_comments_route_like_issue_comments() -> None:
    routed = route_azure(azure_workitem("<div>/pair implement until: merged</div>"), POLICY, "n-1")
    [job] = routed.jobs
    command = CommandJob.from_json(job.request)
    assert command.request is not None and command.request.args == {"until": "merged"}
    assert command.author.login == "fabrikamfiber4@hotmail.com"
    assert command.comment.id == ""  # nothing to react to: the notification names no comment
    assert (job.source, job.repo, job.target, job.number) == ("azure-devops", "Fabrikam", "card", 5)
    assert job.dedupe_key == "azure-devops:Fabrikam:comment:wi5:rev4"
    identity = {"displayName": "Jamal", "uniqueName": "jamal@fabrikam.com", "id": "54d1"}
    [other] = route_azure(azure_workitem("/pair status", identity), POLICY, "n-2").jobs
    assert CommandJob.from_json(other.request).author.id == "54d1"
    own = route_azure(azure_workitem("<!-- pair:tracking #5 -->\nqueued"), POLICY, "n-3")
    assert own.silent


def test_azure_pull_request_updates_on_pairbot_branches_move_the_head() -> None:
    sample = fixture("azure-devops/git.pullrequest.created.json")
    sample["eventType"] = "git.pullrequest.updated"
    assert route_azure(sample, POLICY, "n").jobs == ()  # branch `mytopic`
    sample["resource"]["sourceRefName"] = "refs/heads/pair/card-5"
    [job] = route_azure(sample, POLICY, "n").jobs
    moved = job_from_payload(job.request["job"])
    assert moved == HeadMovedJob(
        pull=1, head_sha="53d54ac915144006c2c9e90d2c7d3880920db49c", delivery="n"
    )
    created = fixture("azure-devops/git.pullrequest.created.json")
    assert route_azure(created, POLICY, "n").reason == "git.pullrequest.created is not for pairbot"


def test_the_app_acts_only_on_the_routes_it_declares() -> None:
    from tests.domain.intake.test_intake_equivalence import corpus, hostile, variants

    for case in [*corpus(), *variants(), *hostile()]:
        event, payload = case.values
        action = payload.get("action") if isinstance(payload.get("action"), str) else None
        routed = route_github(event, action, payload, POLICY, "d")
        if routed.jobs or routed.installation is not None:
            assert (event, action) in GITHUB_ROUTES, case.id


BUILD_SERVICE = {
    "displayName": "Fabrikam Build Service (fabrikam)",
    "uniqueName": "Build\\6ce954b1-ce1f-45d1-b94d-e6bf2464ba2c",
    "id": "2b1c4c5b-8e1a-4f3e-9c1d-0a1b2c3d4e5f",
    "descriptor": "svc.MmIxYzRjNWI",
}


def test_the_app_ignores_azure_bots_unless_their_identity_is_allowlisted() -> None:
    comment = azure_workitem("<div>/pair approve</div>", BUILD_SERVICE)
    ignored = route_azure(comment, POLICY, "n-bot")
    assert ignored.silent and ignored.jobs == () and "allowlist" in ignored.reason
    listed = Policy(trigger="pair", identity_allowlist=frozenset({BUILD_SERVICE["id"]}))
    [job] = route_azure(comment, listed, "n-bot").jobs
    command = CommandJob.from_json(job.request)
    assert command.author.is_bot and command.request is not None


def test_a_work_item_notification_naming_its_comment_gives_the_app_something_to_like() -> None:
    comment = azure_workitem("<div>/pair status</div>")
    comment["resource"]["commentVersionRef"] = {"commentId": 41, "version": 1}
    [job] = route_azure(comment, POLICY, "n-41").jobs
    assert CommandJob.from_json(job.request).comment.id == "41"
    assert job.dedupe_key == "azure-devops:Fabrikam:comment:wi5:c41:v1"


def test_a_command_on_a_forks_pull_request_becomes_the_fork_reply() -> None:
    pull = fixture("azure-devops/git.pullrequest.created.json")["resource"]
    pull["forkSource"] = {"repository": {"name": "fork", "project": {"name": "Elsewhere"}}}
    notification = {
        "id": "n-fork",
        "eventType": "ms.vss-code.git-pullrequest-comment-event",
        "resource": {
            "comment": {
                "id": 2,
                "content": "/pair implement",
                "author": pull["createdBy"],
                "commentType": "text",
                "_links": {"threads": {"href": f"{pull['url']}/threads/21"}},
            },
            "pullRequest": pull,
        },
    }
    [job] = route_azure(notification, POLICY, "n-fork").jobs
    command = CommandJob.from_json(job.request)
    assert command.request is None and command.problem is not None
    assert "forks" in command.problem.message
