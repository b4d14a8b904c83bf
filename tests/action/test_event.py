"""The Action's adapter: `classify` over real webhook payloads (tests/fixtures/github-webhooks),
and what `action.comments` answers a comment with (the App's text and marker: the equivalence
of the two surfaces is tests/domain/intake/test_intake_equivalence.py).

Each case starts from a real delivery and changes only what it is about (a comment body, an
action, an author), so everything else is what GitHub really sends.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from action.comments import comment_answer
from action.event import (
    ACTIONS_BOT_ID,
    Comment,
    HeadMoved,
    Ignore,
    Intent,
    MalformedEventError,
    Policy,
    Run,
    ScopeDecision,
    Tick,
    classify,
    ignored_reason,
)
from app.domain.intake.answers import Reply
from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.comment_commands import Command, CommandError
from app.domain.intake.intent import Installation
from app.domain.intake.pair_request import CommentRef, PairRequest, PayloadError
from app.errors import OperatorError, UserError
from hosts.markers import make_marker
from hosts.models import Author

WEBHOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "github-webhooks"
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # pull_request/synchronize.json's head
DECISION = (
    "Decided:\n\n```json\n"
    '{"schemaVersion": 1, "scopeBaselineHash": "abc", '
    '"decisions": [{"id": "sc-1", "action": "ignore"}]}\n```\n'
)


def load(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((WEBHOOKS / name).read_text(encoding="utf-8"))
    return payload


# A comment that may act: its payload is read in full (one that asks nothing is not).
ASKS = "/pair status"


def comment(body: str, **changes: Any) -> dict[str, Any]:
    """issue_comment/created.json with another body (and optional top-level changes)."""
    payload = copy.deepcopy(load("issue_comment/created.json"))
    payload["comment"]["body"] = body
    payload.update(changes)
    return payload


def on_pull(payload: dict[str, Any]) -> dict[str, Any]:
    payload["issue"]["pull_request"] = {
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"
    }
    return payload


def by(login: str, user_id: int, kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(payload: dict[str, Any]) -> dict[str, Any]:
        payload["comment"]["user"].update(login=login, id=user_id, type=kind)
        return payload

    return change


def synchronize(**head: Any) -> dict[str, Any]:
    payload = copy.deepcopy(load("pull_request/synchronize.json"))
    payload["pull_request"]["head"]["ref"] = "pair/card-1"
    payload["pull_request"]["head"].update(head)
    return payload


def dispatch(client_payload: object, action: str = "pair") -> dict[str, Any]:
    payload = copy.deepcopy(load("repository_dispatch/payload.json"))
    payload["action"] = action
    payload["client_payload"] = client_payload
    return payload


# An Action that minted the App's token writes as octo-pair[bot]; one on GITHUB_TOKEN as
# github-actions[bot]. Both are in this policy so that both own-comment cases are exercised.
POLICY = Policy(app_slug="octo-pair", actions_token=True)
CODERTOCAT = Author(login="Codertocat", id="21031067")
NO_COMMAND = Ignore("the comment on issue #1 holds no command for pairbot")
REF = CommentRef(
    id="492700400",
    author_login="Codertocat",
    author_id=21031067,
    url="https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400",
)
REQUEST = PairRequest(
    card=12,
    verb="implement",
    args={"until": "merged", "merge": "never"},
    comment=CommentRef("99", "octocat", 583231, "", on_pull=False),
    delivery="d-1",
)


def implement_comment(
    ref: CommentRef = REF, *, bot: bool = False, command: Command | CommandError | None = None
) -> Comment:
    return Comment(
        card=1,
        comment=ref,
        command=command or Command("implement", {}, None, 1, "/pair implement"),
        author=Author(login=ref.author_login, id=str(ref.author_id), is_bot=bot),
    )


@pytest.mark.parametrize(
    ("event", "payload", "expected"),
    [
        # -- ticks --
        pytest.param("schedule", {"schedule": "*/15 * * * *"}, Tick(None), id="schedule"),
        pytest.param(
            "workflow_dispatch", load("workflow_dispatch/payload.json"), Tick(None), id="dispatch"
        ),
        pytest.param(
            "workflow_dispatch",
            {**load("workflow_dispatch/payload.json"), "inputs": {"batch": "release-2"}},
            Tick("release-2"),
            id="dispatch-with-batch",
        ),
        pytest.param(
            "workflow_dispatch",
            {**load("workflow_dispatch/payload.json"), "inputs": {"batch": ""}},
            Tick(None),
            id="dispatch-with-empty-batch",
        ),
        pytest.param(
            "workflow_dispatch",
            {**load("workflow_dispatch/payload.json"), "inputs": None},
            Tick(None),
            id="dispatch-without-inputs",
        ),
        # -- the corpus comment holds no command --
        pytest.param(
            "issue_comment",
            load("issue_comment/created.json"),
            NO_COMMAND,
            id="corpus-comment-no-command",
        ),
        pytest.param(
            "issue_comment",
            load("issue_comment/created.with-installation.json"),
            NO_COMMAND,
            id="corpus-comment-with-installation",
        ),
        # -- commands --
        pytest.param(
            "issue_comment",
            comment("Looks good.\n/pair implement until: merged"),
            Comment(
                card=1,
                comment=REF,
                command=Command(
                    "implement", {"until": "merged"}, None, 2, "/pair implement until: merged"
                ),
                author=CODERTOCAT,
            ),
            id="command",
        ),
        pytest.param(
            "issue_comment",
            comment("/pair frobnicate"),
            "command-error",
            id="unknown-verb-is-a-command-error",
        ),
        pytest.param(
            "issue_comment",
            comment("Try this:\n\n```\n/pair implement\n```\n"),
            NO_COMMAND,
            id="command-in-a-code-block",
        ),
        pytest.param(
            "issue_comment",
            comment("> /pair approve\n\nquoting the above"),
            NO_COMMAND,
            id="command-in-a-quote",
        ),
        pytest.param(
            "issue_comment",
            comment("<!-- /pair approve -->"),
            NO_COMMAND,
            id="command-in-an-html-comment",
        ),
        pytest.param(
            "issue_comment",
            comment("/pair implement", action="edited"),
            Ignore("issue_comment.edited: only a newly created comment acts"),
            id="edited-comment",
        ),
        pytest.param(
            "issue_comment",
            comment("/pair implement", action="deleted"),
            Ignore("issue_comment.deleted: only a newly created comment acts"),
            id="deleted-comment",
        ),
        pytest.param(
            "issue_comment",
            by("dependabot[bot]", 49699333, "Bot")(comment("/pair approve")),
            Ignore("comment by bot 'dependabot[bot]', which is not on the allowlist", silent=True),
            id="bot-author-off-the-allowlist-is-dropped-by-the-intake",
        ),
        # -- pairbot's own comments, before anything else --
        pytest.param(
            "issue_comment",
            by("github-actions[bot]", ACTIONS_BOT_ID, "Bot")(
                comment("<!-- pair:tracking #1 -->\nNext: `/pair approve`\n/pair approve")
            ),
            Ignore("pairbot's own comment (by github-actions[bot])", silent=True),
            id="own-comment-actions-bot",
        ),
        pytest.param(
            "issue_comment",
            by("octo-pair[bot]", 1, "Bot")(comment("<!-- pair:synthesis #1 -->\n/pair status")),
            Ignore("pairbot's own comment (by octo-pair[bot])", silent=True),
            id="own-comment-app-bot",
        ),
        pytest.param(
            "issue_comment",
            by("github-actions[bot]", ACTIONS_BOT_ID, "Bot")(
                comment("<!-- pair:tracking #1 -->", action="edited")
            ),
            Ignore("pairbot's own comment (by github-actions[bot])", silent=True),
            id="own-comment-edited",
        ),
        # -- scope decisions --
        pytest.param(
            "issue_comment",
            on_pull(comment(DECISION)),
            ScopeDecision(1, "492700400", CODERTOCAT),
            id="scope-decision-on-a-pull",
        ),
        pytest.param(
            "issue_comment",
            on_pull(comment(DECISION + "\n/pair approve\n")),
            ScopeDecision(1, "492700400", CODERTOCAT),
            id="scope-decision-wins-over-a-command",
        ),
        pytest.param(
            "issue_comment",
            comment(DECISION),
            NO_COMMAND,
            id="scope-decision-on-an-issue-is-not-one",
        ),
        pytest.param(
            "issue_comment",
            by("renovate[bot]", 29139614, "Bot")(on_pull(comment(DECISION))),
            Ignore("scope decision by bot 'renovate[bot]': only a person decides scope", True),
            id="scope-decision-by-a-bot",
        ),
        pytest.param(
            "issue_comment",
            by("octo-pair[bot]", 7, "Bot")(
                on_pull(comment("<!-- pair:scope-packet #1 PR#2 -->\n" + DECISION))
            ),
            Ignore("pairbot's own comment (by octo-pair[bot])", silent=True),
            id="own-scope-packet-showing-the-json",
        ),
        # -- head moved --
        pytest.param("pull_request", synchronize(), HeadMoved(2, HEAD), id="synchronize"),
        pytest.param(
            "pull_request",
            load("pull_request/synchronize.json"),
            Ignore("pull request #2 head 'changes' is not a pairbot branch"),
            id="synchronize-corpus-branch-is-not-pairbots",
        ),
        pytest.param(
            "pull_request",
            synchronize(repo={"full_name": "forker/Hello-World"}),
            Ignore("pull request #2 comes from another repository (forker/Hello-World)"),
            id="synchronize-from-a-fork",
        ),
        pytest.param(
            "pull_request",
            load("pull_request/opened.json"),
            Ignore("pull_request.opened: only synchronize (a moved head) concerns pairbot"),
            id="pull-request-opened",
        ),
        # -- dispatches --
        pytest.param(
            "repository_dispatch", dispatch(REQUEST.to_payload()), Run(REQUEST), id="dispatch-pair"
        ),
        pytest.param(
            "repository_dispatch",
            dispatch({"version": 1, "kind": "scope-decision", "pull": 7, "commentId": "1234"}),
            ScopeDecision(7, "1234"),
            id="dispatch-scope-decision",
        ),
        pytest.param(
            "repository_dispatch",
            dispatch({"version": 1, "kind": "head-moved", "pull": 7, "head": HEAD}),
            HeadMoved(7, HEAD),
            id="dispatch-head-moved",
        ),
        pytest.param(
            "repository_dispatch",
            load("repository_dispatch/payload.json"),
            Ignore("repository_dispatch of type 'on-demand-test' is not pairbot's ('pair')"),
            id="corpus-dispatch-of-another-type",
        ),
        # -- everything else --
        pytest.param(
            "issues",
            load("issues/opened.json"),
            Ignore("issues.opened is not for pairbot"),
            id="unhandled-event",
        ),
        pytest.param(
            "pull_request_target",
            synchronize(),
            Ignore("pull_request_target.synchronize is not for pairbot"),
            id="pull-request-target-never-runs",
        ),
    ],
)
def test_classify(event: str, payload: dict[str, Any], expected: Intent | str) -> None:
    intent = classify(event, payload, POLICY)
    if expected == "command-error":
        assert isinstance(intent, Comment)
        assert isinstance(intent.command, CommandError)
        assert "unknown verb 'frobnicate'" in intent.command.message
    else:
        assert intent == expected


def test_a_comment_carries_what_authorization_and_the_reply_need() -> None:
    payload = on_pull(comment("/pair approve\n/pair retry\n/pair nope"))
    intent = classify("issue_comment", payload)
    assert isinstance(intent, Comment)
    assert intent.is_pull
    assert (intent.card, intent.author_id, intent.author_login) == (1, 21031067, "Codertocat")
    assert intent.comment.url.endswith("#issuecomment-492700400")
    assert isinstance(intent.command, Command)
    assert intent.command.verb == "approve"
    assert [type(r).__name__ for r in intent.rest] == ["Command", "CommandError"]


def test_the_app_slug_is_a_command_address_and_a_trigger_is_honoured() -> None:
    intent = classify("issue_comment", comment("@octo-pair[bot] status"), POLICY)
    assert isinstance(intent, Comment)
    assert isinstance(intent.command, Command)
    assert intent.command.verb == "status"
    ignored = classify("issue_comment", comment("/pair status"), Policy(trigger="bot"))
    assert ignored == NO_COMMAND


@pytest.mark.parametrize("body", ["<!-- pair:tracking #1 -->\n/pair status", "/pair approve"])
def test_a_comment_by_the_own_id_is_ignored_whatever_its_login_and_marker(body: str) -> None:
    payload = by("renamed-bot[bot]", 555, "Bot")(comment(body))
    assert classify("issue_comment", payload, Policy(own_id=555)) == Ignore(
        "pairbot's own comment (by renamed-bot[bot])", silent=True
    )


def test_an_own_comment_that_addresses_no_one_is_ignored_before_its_author_is_read() -> None:
    """Nothing in it could act, so who wrote it is not even read (`unaddressed_comment`)."""
    payload = by("renamed-bot[bot]", 555, "Bot")(comment("<!-- pair:tracking #1 -->\nqueued"))
    assert classify("issue_comment", payload, Policy(own_id=555)) == NO_COMMAND


def test_github_actions_bot_is_pairbot_only_when_the_action_writes_with_github_token() -> None:
    payload = by("github-actions[bot]", ACTIONS_BOT_ID, "Bot")(comment("/pair approve"))
    own = classify("issue_comment", payload, Policy(actions_token=True))
    assert own == Ignore("pairbot's own comment (by github-actions[bot])", silent=True)
    # With an App token it is another bot: ignored unless allowlisted, like any bot.
    other = classify("issue_comment", payload, Policy(app_slug="octo-pair"))
    assert other == Ignore(
        "comment by bot 'github-actions[bot]', which is not on the allowlist", silent=True
    )
    allowed = Policy(app_slug="octo-pair", allowlist=frozenset({ACTIONS_BOT_ID}))
    assert isinstance(classify("issue_comment", payload, allowed), Comment)


def test_a_person_quoting_a_marker_is_not_pairbot() -> None:
    body = "<!-- pair:tracking #1 -->\n/pair status"
    assert isinstance(classify("issue_comment", comment(body), POLICY), Comment)


def test_the_batch_input_is_the_tick_batch_unless_the_event_names_one() -> None:
    nightly = Policy(batch="nightly")
    assert classify("schedule", {"schedule": "0 * * * *"}, nightly) == Tick("nightly")
    named = {"inputs": {"batch": "release"}}
    assert classify("workflow_dispatch", named, nightly) == Tick("release")


def test_own_logins() -> None:
    assert Policy().own_logins == frozenset()
    assert Policy(actions_token=True).own_logins == frozenset({"github-actions[bot]"})
    assert Policy(app_slug="Octo-Pair[bot]").own_logins == frozenset({"octo-pair[bot]"})
    assert Policy(actions_token=True, own_id=7).own_ids == frozenset({ACTIONS_BOT_ID, 7})


def test_installations_are_the_apps_bookkeeping() -> None:
    intent = classify("installation", load("installation/created.json"), POLICY)
    assert isinstance(intent, Installation)
    assert (
        ignored_reason(intent) == "installation.created is the App's bookkeeping, not the Action's"
    )
    assert ignored_reason(Tick()) is None


@pytest.mark.parametrize(
    ("client_payload", "message"),
    [
        pytest.param([], r"client_payload must be an object", id="not-an-object"),
        pytest.param({"version": 2, "card": 1}, r"client_payload\.version must be 1", id="version"),
        pytest.param(
            {"version": 1, "card": "12", "command": {"verb": "status"}},
            r"client_payload\.card must be a positive integer, got '12'",
            id="card-as-string",
        ),
        pytest.param(
            {"version": 1, "card": 12, "command": {"verb": "deploy"}},
            r"client_payload\.command\.verb 'deploy' is not one of",
            id="unknown-verb",
        ),
        pytest.param(
            {"version": 1, "card": 12, "command": {"verb": "implement", "args": {"merge": "x"}}},
            r"client_payload\.command\.args\.merge",
            id="bad-gate",
        ),
        pytest.param(
            {"version": 1, "kind": "scope-decision", "pull": 0, "commentId": "1"},
            r"client_payload\.pull must be a positive integer, got 0",
            id="scope-decision-pull",
        ),
        pytest.param(
            {"version": 1, "kind": "scope-decision", "pull": 3, "commentId": ""},
            r"client_payload\.commentId must be a comment id or URL",
            id="scope-decision-comment",
        ),
        pytest.param(
            {"version": 1, "kind": "head-moved", "pull": 3, "head": "main"},
            r"client_payload\.head must be a full lowercase commit SHA, got 'main'",
            id="head-moved-sha",
        ),
        pytest.param(
            {"version": 2, "kind": "head-moved", "pull": 3, "head": HEAD},
            r"client_payload\.version must be 1, got 2",
            id="head-moved-version",
        ),
        pytest.param(
            {"version": 1, "kind": "merge-now", "pull": 3},
            r"client_payload\.kind 'merge-now' is not one of: scope-decision, head-moved",
            id="unknown-kind",
        ),
    ],
)
def test_a_malformed_pair_dispatch_is_an_error_naming_the_field(
    client_payload: object, message: str
) -> None:
    with pytest.raises(MalformedEventError, match=message) as caught:
        classify("repository_dispatch", dispatch(client_payload))
    # Operator-facing, and still a PayloadError for code that handles the App's.
    assert isinstance(caught.value, OperatorError)
    assert isinstance(caught.value, PayloadError)
    assert str(caught.value).startswith("repository_dispatch 'pair': ")


@pytest.mark.parametrize(
    ("event", "payload", "message"),
    [
        pytest.param(
            "issue_comment", {"action": "created"}, r"comment must be an object", id="no-comment"
        ),
        pytest.param(
            "issue_comment",
            {"action": "created", "comment": {"body": "x", "user": {"login": "a"}}},
            r"comment\.user\.id must be a positive integer, got None",
            id="no-user-id",
        ),
        pytest.param(
            "issue_comment",
            {**comment("x"), "comment": {**comment("x")["comment"], "body": 5}},
            r"comment\.body must be a string",
            id="comment-body",
        ),
        pytest.param(
            "issue_comment",
            {**comment(ASKS), "comment": {**comment(ASKS)["comment"], "id": "1"}},
            r"comment\.id must be a positive integer, got '1'",
            id="comment-id",
        ),
        pytest.param(
            "issue_comment",
            {**comment(ASKS), "comment": {**comment(ASKS)["comment"], "id": -5}},
            r"issue_comment: comment\.id must be a positive integer, got -5",
            id="comment-id-negative",
        ),
        pytest.param(
            "issue_comment",
            {**comment("x"), "issue": {"number": -5}},
            r"^issue_comment: issue\.number must be a positive integer, got -5$",
            id="issue-number-negative",
        ),
        pytest.param(
            "issue_comment",
            {**comment("x"), "issue": {"number": 0}},
            r"issue\.number must be a positive integer, got 0",
            id="issue-number-zero",
        ),
        pytest.param(
            "issue_comment",
            {**comment("x"), "issue": {"number": 1.5}},
            r"issue\.number must be a positive integer, got 1\.5",
            id="issue-number-float",
        ),
        pytest.param(
            "issue_comment",
            {**comment("x"), "issue": {"number": "9" * 80}},
            r"issue\.number must be a positive integer, got '9{38}…$",
            id="issue-number-long-string",
        ),
        pytest.param(
            "pull_request",
            {**synchronize(), "number": None, "pull_request": {"head": {}}},
            r"pull_request: pull_request\.number must be a positive integer, got None",
            id="pull-number",
        ),
        pytest.param(
            "issue_comment",
            {**comment("x"), "issue": {"number": "1"}},
            r"issue\.number must be a positive integer",
            id="issue-number",
        ),
        pytest.param(
            "pull_request",
            {**synchronize(), "pull_request": {"number": 2, "head": {"sha": "zz"}}},
            r"pull_request\.head\.sha must be a commit SHA",
            id="head-sha",
        ),
        pytest.param(
            "workflow_dispatch",
            {"inputs": ["batch"]},
            r"workflow_dispatch: inputs must be an object",
            id="dispatch-inputs",
        ),
    ],
)
def test_a_payload_missing_what_its_event_always_carries_is_an_error(
    event: str, payload: dict[str, Any], message: str
) -> None:
    with pytest.raises(MalformedEventError, match=message):
        classify(event, payload)


def test_a_workflow_dispatch_batch_that_is_not_a_name_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"workflow_dispatch input batch='\.\./x' is not"):
        classify("workflow_dispatch", {"inputs": {"batch": "../x"}})


# -- what a comment gets (action.comments.comment_answer) -----------------------------------


def answer(
    intent: Comment, permission: str | None, allowlist: frozenset[int] = frozenset()
) -> Reply | None:
    return comment_answer(intent, decide(intent.author, permission, allowlist), "pair", "run-1")


def test_a_writer_gets_no_reply_and_the_command_runs() -> None:
    intent = implement_comment()
    assert decide(intent.author, "write", frozenset()).allowed
    assert answer(intent, "write") is None


def test_a_reader_gets_a_polite_refusal_under_the_comments_reply_marker() -> None:
    reply = answer(implement_comment(), "read")
    assert reply is not None and reply.kind == "refusal"
    assert reply.marker == make_marker("reply", 1, run="492700400")
    assert "Codertocat (id 21031067) has read permission" in reply.text


def test_a_bot_is_ignored_silently_unless_allowlisted() -> None:
    bot = implement_comment(CommentRef("5", "dependabot[bot]", 49699333), bot=True)
    assert not needs_permission(bot.author, frozenset())
    assert answer(bot, None) is None
    assert not decide(bot.author, None, frozenset()).allowed
    assert decide(bot.author, None, frozenset({49699333})).allowed


def test_permission_is_looked_up_only_for_people_off_the_allowlist() -> None:
    assert needs_permission(implement_comment().author, frozenset())
    assert not needs_permission(implement_comment().author, frozenset({21031067}))


def test_a_malformed_command_gets_its_usage_with_the_line_as_inert_code() -> None:
    error = CommandError(1, "/pair implement until: `@org/team`", "until: must be …", "/pair x")
    reply = answer(implement_comment(command=error), "admin")
    assert reply is not None and reply.kind == "usage"
    # The echoed line sits in a code span longer than any backtick run inside it, so a mention
    # or a link in it does nothing.
    assert reply.text.startswith(
        "pairbot did not run `` /pair implement until: `@org/team` ``: until: must be …."
    )
    assert reply.text.endswith("Usage: `/pair x`")


def test_an_unknown_verb_gets_the_whole_help() -> None:
    intent = classify("issue_comment", comment("/pair frobnicate"), POLICY)
    assert isinstance(intent, Comment)
    reply = answer(intent, "maintain")
    assert reply is not None and reply.kind == "usage"
    assert "`/pair implement" in reply.text
    assert "`/pair rerun-proof <phase>`" in reply.text


def test_help_is_answered_not_run() -> None:
    intent = classify("issue_comment", comment("/pair help"), POLICY)
    assert isinstance(intent, Comment)
    reply = answer(intent, "write")
    assert reply is not None and reply.kind == "help"
    assert reply.marker == make_marker("reply", 1, run="492700400")
