"""The App and the Action read every event the same way and answer every comment the same way.

Each case goes through both surfaces' real adapters, not just the shared core:

- the App: `app.web.events.route_github(event, action, payload, policy, delivery)`, as the
  webhook edge calls it; its reading is `Routed.intent`, or for a comment it queued unread
  the worker's (`read_commands` on the job's `UnreadComment`), its reply to a command job is
  `app.web.handling.command_answer` on the job the worker builds (`command_of`);
- the Action: `ActionContext.from_env` over an Actions environment whose `GITHUB_EVENT_PATH`
  holds the payload, `ctx.read_event()`, `action.event.classify(..., policy_of(ctx))`; its reply
  is `action.comments.comment_answer`.

Both run as one deployment: the App `pairbot` (id 123456), and an Action that minted that App's
token, with the same trigger and allowlist. The payloads are every delivery in
tests/fixtures/github-webhooks/ plus held-in hostile comments, each on an issue and on a pull
request. A payload the Action refuses as malformed is one the App ignores for the same reason.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Final

import pytest

from action.comments import comment_answer
from action.context import ActionContext
from action.event import MalformedEventError, classify, policy_of
from app.domain.intake.answers import Reply
from app.domain.intake.authors import decide
from app.domain.intake.intent import Comment, Intent, Malformed, Policy, read_commands
from app.web.events import route_github
from app.web.handling import command_answer
from app.web.jobs import UnreadComment, command_of
from hosts.models import Author

WEBHOOKS: Final = Path(__file__).resolve().parents[2] / "fixtures" / "github-webhooks"
APP_ID: Final = 123456
SLUG: Final = "pairbot"
ALLOWED_BOT: Final = 42
APP_POLICY: Final = Policy(
    trigger="pair", app_slug=SLUG, app_id=APP_ID, allowlist=frozenset({ALLOWED_BOT})
)
FAKE_PEM: Final = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEAnotarealkeynotarealkeynotarealkey\n"
    "-----END RSA PRIVATE KEY-----\n"
)
DECISION: Final = (
    "Decided:\n\n```json\n"
    '{"schemaVersion": 1, "scopeBaselineHash": "abc", '
    '"decisions": [{"id": "sc-1", "action": "ignore"}]}\n```\n'
)

# Who writes a hostile comment: (login, id, type, performed_via_github_app id).
PERSON = ("Codertocat", 21031067, "User", None)
PAIRBOT = (f"{SLUG}[bot]", 987654, "Bot", None)
AUTHORS: Final = {
    "person": PERSON,
    "pairbot": PAIRBOT,
    "pairbot-by-app-id": ("renamed-app[bot]", 555, "Bot", APP_ID),
    "pairbot-uppercase": (f"{SLUG.upper()}[BOT]", 987654, "Bot", None),
    # With an App token, github-actions[bot] is another workflow's bot, not pairbot.
    "actions-bot": ("github-actions[bot]", 41898282, "Bot", None),
    "other-bot": ("dependabot[bot]", 49699333, "Bot", None),
    "allowlisted-bot": ("helper[bot]", ALLOWED_BOT, "Bot", None),
    # Not a login GitHub would issue; a signed payload can still carry it.
    "markdown-login": ("[x](https://evil.example) @everyone", 777, "User", None),
}

HOSTILE: Final[list[tuple[str, str, str]]] = [
    # (id, body, author)
    ("plain-command", "/pair implement until: merged merge: never", "person"),
    ("nested-html-comments", "<!-- <!-- /pair approve --> -->\n", "person"),
    ("comment-assembled-by-removal", "<!-<!-- x -->- \n/pair abandon\n-->", "person"),
    ("unclosed-html-comment", "hello <!--\n/pair approve", "person"),
    ("html-comment-nest-bomb", "<!-" * 200 + "\n/pair approve\n" + "-->" * 200, "person"),
    ("hidden-details", "<details><summary>x</summary>\n\n/pair approve\n\n</details>", "person"),
    ("zero-width-inside-trigger", "/pa\u200bir approve", "person"),
    ("zero-width-opens-comment", "<!\u200b-- /pair abandon -->", "person"),
    ("bom-before-command", "\ufeff/pair status", "person"),
    ("bidi-override", "/pair approve \u202eyrgetni", "person"),
    ("bidi-isolate-before", "\u2066/pair abandon\u2069", "person"),
    ("backtick-fence", "Try:\n\n```\n/pair implement\n```\n", "person"),
    ("tilde-fence", "~~~\n/pair implement\n~~~", "person"),
    ("unclosed-fence", "```sh\n/pair approve", "person"),
    ("list-fence", "- ```\n  /pair approve\n  ```", "person"),
    ("indented-code", "    /pair approve", "person"),
    ("blockquote", "> /pair approve\n\nquoting the above", "person"),
    ("lazy-quote-continuation", "> see\n/pair approve\n\n/pair retry", "person"),
    ("inline-code", "`/pair approve`", "person"),
    ("html-entity-slash", "&#47;pair approve", "person"),
    ("html-wrapped", "<div>/pair approve</div>", "person"),
    ("unknown-verb", "/pair frobnicate", "person"),
    ("no-verb", "/pair", "person"),
    ("deploy-verb", "/pair deploy now", "person"),
    ("no-arguments-allowed", "/pair approve if CI is green", "person"),
    ("missing-phase", "/pair rerun-proof", "person"),
    ("backticks-and-mention-in-args", "/pair implement until: `@org/team`", "person"),
    ("mention-in-unknown-verb", "/pair @everyone", "person"),
    ("html-in-bad-args", "/pair approve <img src=x onerror=alert(1)>", "person"),
    ("link-and-ping-in-args", "/pair approve [click](https://evil.example) @everyone", "person"),
    ("image-as-verb", "/pair ![x](https://evil.example/p.png)", "person"),
    ("markdown-login-refused", "/pair approve", "markdown-login"),
    ("long-bad-line", "/pair approve " + "x" * 5_000, "person"),
    ("help", "/pair help", "person"),
    ("uppercase", "/PAIR APPROVE", "person"),
    ("at-trigger", "@pair status", "person"),
    ("at-app-bot", "@pairbot[bot] status", "person"),
    ("at-app-bot-uppercase", "@PairBot[BOT] retry", "person"),
    ("at-trigger-bot-form", "@pair[bot] status", "person"),
    ("pairing-is-not-pair", "/pairing approve", "person"),
    ("crlf", "Thanks!\r\n/pair implement until: merged\r\n", "person"),
    ("cr-only", "Thanks!\r/pair retry\r", "person"),
    ("answer-text-below", "/pair answer\nuse the staging database\n\nthanks", "person"),
    ("answer-empty", "/pair answer", "person"),
    ("two-commands", "/pair approve\n/pair abandon", "person"),
    ("bad-then-good", "/pair frobnicate\n/pair implement", "person"),
    ("person-quotes-a-marker", "<!-- pair:reply #1 run:2 -->\n/pair status", "person"),
    ("person-pastes-a-whole-reply", "<!-- pair:tracking #1 -->\nqueued\n<!-- /pair -->", "person"),
    ("scope-decision", DECISION, "person"),
    ("scope-decision-and-command", DECISION + "\n/pair approve\n", "person"),
    ("huge-under-the-cap", "lorem ipsum dolor\n" * 3_600 + "/pair status", "person"),
    ("huge-over-the-cap", "x" * 70_000 + "\n/pair approve", "person"),
    ("empty", "", "person"),
    (
        "pairbot-with-marker",
        "<!-- pair:tracking #1 -->\nNext: `/pair approve`\n/pair approve",
        "pairbot",
    ),
    ("pairbot-without-marker", "/pair approve", "pairbot"),
    ("pairbot-scope-packet", "<!-- pair:scope-packet #1 PR#2 -->\n" + DECISION, "pairbot"),
    ("pairbot-by-app-id", "/pair abandon", "pairbot-by-app-id"),
    ("pairbot-login-in-capitals", "/pair abandon", "pairbot-uppercase"),
    ("actions-bot-with-marker", "<!-- pair:reply #1 run:9 -->\n/pair retry", "actions-bot"),
    ("other-bot", "/pair approve", "other-bot"),
    ("other-bot-scope-decision", DECISION, "other-bot"),
    ("allowlisted-bot", "/pair retry", "allowlisted-bot"),
    ("allowlisted-bot-scope-decision", DECISION, "allowlisted-bot"),
    ("allowlisted-bot-bad-command", "/pair retry now", "allowlisted-bot"),
]


def load(relative: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((WEBHOOKS / relative).read_text(encoding="utf-8"))
    return payload


def corpus() -> list[Any]:
    files = sorted(WEBHOOKS.glob("*/*.json"))
    return [
        pytest.param(path.parent.name, load(str(path.relative_to(WEBHOOKS))), id=str(path.stem))
        for path in files
    ]


def hostile_comment(body: str, author: str, *, on_pull: bool) -> dict[str, Any]:
    payload = copy.deepcopy(load("issue_comment/created.with-installation.json"))
    login, uid, kind, via = AUTHORS[author]
    payload["comment"]["body"] = body
    payload["comment"]["user"].update(login=login, id=uid, type=kind)
    payload["comment"]["performed_via_github_app"] = (
        {"id": via, "slug": SLUG} if via is not None else None
    )
    payload["sender"].update(login=login, id=uid, type=kind)
    if on_pull:
        payload["issue"]["pull_request"] = {
            "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"
        }
    return payload


def hostile() -> list[Any]:
    return [
        pytest.param(
            "issue_comment",
            hostile_comment(body, author, on_pull=on_pull),
            id=f"{case}-on-{'pull' if on_pull else 'issue'}",
        )
        for case, body, author in HOSTILE
        for on_pull in (False, True)
    ]


def variants() -> list[Any]:
    """Corpus deliveries changed the way other events differ: an edit, a pairbot branch."""
    edited = copy.deepcopy(load("issue_comment/created.json"))
    edited.update(action="edited")
    edited["comment"]["body"] = "/pair approve"
    moved = copy.deepcopy(load("pull_request/synchronize.json"))
    moved["pull_request"]["head"]["ref"] = "pair/card-1"
    own_push = copy.deepcopy(moved)
    own_push["sender"].update(login=f"{SLUG}[bot]", id=987654, type="Bot")
    fork = copy.deepcopy(moved)
    fork["pull_request"]["head"]["repo"]["full_name"] = "forker/Hello-World"
    dispatch = copy.deepcopy(load("repository_dispatch/payload.json"))
    dispatch.update(action="pair", client_payload={"version": 1, "card": 3, "command": {}})
    return [
        pytest.param("issue_comment", edited, id="edited-comment"),
        pytest.param("pull_request", moved, id="synchronize-on-a-pairbot-branch"),
        pytest.param("pull_request", own_push, id="synchronize-pushed-by-pairbot"),
        pytest.param("pull_request", fork, id="synchronize-from-a-fork"),
        pytest.param("repository_dispatch", dispatch, id="malformed-pair-dispatch"),
        pytest.param("issue_comment", {"action": "created"}, id="comment-without-comment"),
    ]


def action_context(tmp_path: Path, event: str, payload: dict[str, Any]) -> ActionContext:
    """The Action's context as the runner sets it up for an Action holding the App's key."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return ActionContext.from_env(
        {
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(path),
            "GITHUB_REPOSITORY": "Codertocat/Hello-World",
            "GITHUB_API_URL": "https://api.github.com",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": "1658821493",
            "GITHUB_WORKSPACE": str(tmp_path),
            "INPUT_APP_ID": str(APP_ID),
            "INPUT_PRIVATE_KEY": FAKE_PEM,
            "INPUT_ALLOWLIST": str(ALLOWED_BOT),
            "PAIR_GITHUB_INSTALLATION_ID": "1",
            "PAIR_APP_SLUG": SLUG,
            # What action.yml computes once the app-token step minted a token.
            "PAIR_GITHUB_TOKEN_IS_ACTIONS": "false",
        }
    )


def app_reading(event: str, payload: dict[str, Any]) -> tuple[Intent | None, Any]:
    """The edge's reading; for a comment it queued unread, the worker's (`read_commands` on
    the job's `UnreadComment`, as app.web.handling reads it)."""
    action = payload.get("action")
    routed = route_github(
        event, action if isinstance(action, str) else None, payload, APP_POLICY, "delivery-1"
    )
    if routed.unread is None:
        return routed.intent, routed
    [job] = routed.jobs
    unread = UnreadComment.from_json(job.request)
    assert unread is not None
    assert unread.comment == routed.unread
    return read_commands(unread.comment, unread.trigger, unread.app_slug), routed


def action_reading(ctx: ActionContext) -> Intent | str:
    try:
        return classify(ctx.event_name, ctx.read_event(), policy_of(ctx))
    except MalformedEventError as err:
        return str(err)


def app_reply(intent: Comment, routed: Any, permission: str) -> Reply | None:
    [job] = routed.jobs
    command, _ = command_of(intent, delivery="delivery-1", comment_id=intent.comment.id)
    author = Author(command.author.login, command.author.id, command.author.is_bot)
    decision = decide(author, permission, APP_POLICY.allowlist)
    return command_answer(
        command, decision, number=job.number, fallback="unused", trigger=APP_POLICY.trigger
    )


def action_reply(intent: Comment, ctx: ActionContext, permission: str) -> Reply | None:
    decision = decide(intent.author, permission, ctx.allowlist)
    return comment_answer(intent, decision, ctx.trigger, "unused")


def test_the_action_sees_the_same_deployment_as_the_app(tmp_path: Path) -> None:
    ctx = action_context(tmp_path, "schedule", {"schedule": "0 * * * *"})
    assert policy_of(ctx) == APP_POLICY


def test_the_corpus_is_every_payload_and_the_hostile_list_is_held_in() -> None:
    assert len(corpus()) == 11
    assert len({case for case, _, _ in HOSTILE}) == len(HOSTILE) >= 60


@pytest.mark.parametrize(("event", "payload"), [*corpus(), *variants(), *hostile()])
def test_both_surfaces_read_the_same_intent_and_give_the_same_reply(
    tmp_path: Path, event: str, payload: dict[str, Any]
) -> None:
    app_intent, routed = app_reading(event, payload)
    ctx = action_context(tmp_path, event, payload)
    action_intent = action_reading(ctx)
    if isinstance(app_intent, Malformed):
        # The Action fails loudly (exit 1) where the App answers "ignored": the same reason.
        assert action_intent == app_intent.reason
        assert routed.jobs == ()
        return
    assert app_intent is not None
    assert action_intent == app_intent
    if not isinstance(app_intent, Comment):
        return
    assert isinstance(action_intent, Comment)
    for permission in ("write", "read"):
        from_app = app_reply(app_intent, routed, permission)
        from_action = action_reply(action_intent, ctx, permission)
        assert from_app == from_action, permission
        if from_app is not None:
            # Echoed user text never pings, links or renders (outside inert inline code).
            prose = re.sub(r"(`+).*?\1", "", from_app.text, flags=re.DOTALL)
            assert "@everyone" not in prose, from_app.text
            assert not re.search(r"(?<!\\)(?:\]\(|<img)", prose), from_app.text
            # Text and marker: the comment's one reply, `reply #<n> run:<comment id>`.
            assert from_app.marker == f"<!-- pair:reply #1 run:{action_intent.comment.id} -->"


@pytest.mark.parametrize(
    "case",
    [
        "pairbot-with-marker",
        "pairbot-without-marker",
        "pairbot-scope-packet",
        "pairbot-by-app-id",
        "pairbot-login-in-capitals",
    ],
)
def test_pairbots_own_comments_are_never_commands_marker_or_not(tmp_path: Path, case: str) -> None:
    [(body, author)] = [(b, a) for c, b, a in HOSTILE if c == case]
    payload = hostile_comment(body, author, on_pull=True)
    intent, routed = app_reading("issue_comment", payload)
    assert routed.silent and routed.jobs == ()
    assert intent == action_reading(action_context(tmp_path, "issue_comment", payload))
