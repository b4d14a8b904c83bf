"""The comment-command grammar shared by the App and the Action, and the "who may act" rule."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.card.autonomy import GateCondition
from app.domain.intake.comment_commands import (
    VERBS,
    Command,
    CommandError,
    Decision,
    Verb,
    help_text,
    may_act,
    parse_commands,
    usage,
)

ALWAYS = GateCondition("always")
NEVER = GateCondition("never")


def only(body: str) -> Command | CommandError:
    results = parse_commands(body)
    assert len(results) == 1, results
    return results[0]


def command(body: str) -> Command:
    result = only(body)
    assert isinstance(result, Command), result
    return result


def error(body: str) -> CommandError:
    result = only(body)
    assert isinstance(result, CommandError), result
    return result


# --- verbs and their arguments ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "verb", "args", "text"),
    [
        pytest.param("/pair implement", "implement", {}, None, id="implement-bare"),
        pytest.param(
            "/pair implement until: merged", "implement", {"until": "merged"}, None, id="until"
        ),
        pytest.param(
            "/pair implement until: Ready-For-Merge",
            "implement",
            {"until": "ready-for-merge"},
            None,
            id="until-case",
        ),
        pytest.param(
            "/pair implement until:merged", "implement", {"until": "merged"}, None, id="no-space"
        ),
        pytest.param("/pair implement merge: always", "implement", {"merge": ALWAYS}, None, id="m"),
        pytest.param("/pair implement merge: NEVER", "implement", {"merge": NEVER}, None, id="mc"),
        pytest.param(
            "/pair implement merge: when has:risky,db lacks:tested",
            "implement",
            {"merge": GateCondition("when", has=("risky", "db"), lacks=("tested",))},
            None,
            id="merge-when",
        ),
        pytest.param(
            "/pair implement merge: When HAS:Risky agent: codex until: merged",
            "implement",
            {
                "merge": GateCondition("when", has=("Risky",)),
                "agent": "codex",
                "until": "merged",
            },
            None,
            id="when-runs-to-next-key",
        ),
        pytest.param(
            "/pair implement agent: claude-code",
            "implement",
            {"agent": "claude-code"},
            None,
            id="a",
        ),
        pytest.param(
            "/pair implement until: merged merge: never agent: codex",
            "implement",
            {"until": "merged", "merge": NEVER, "agent": "codex"},
            None,
            id="all-three",
        ),
        pytest.param(
            "/pair implement AGENT: x UNTIL: merged",
            "implement",
            {"agent": "x", "until": "merged"},
            None,
            id="keys-case-any-order",
        ),
        pytest.param("/pair refine", "refine", {}, None, id="refine-bare"),
        pytest.param("/pair refine prepare: always", "refine", {"prepare": ALWAYS}, None, id="r"),
        pytest.param(
            "/pair refine prepare: when lacks:spec",
            "refine",
            {"prepare": GateCondition("when", lacks=("spec",))},
            None,
            id="refine-when",
        ),
        pytest.param("/pair status", "status", {}, None, id="status"),
        pytest.param("/pair approve", "approve", {}, None, id="approve"),
        pytest.param("/pair retry", "retry", {}, None, id="retry"),
        pytest.param("/pair abandon", "abandon", {}, None, id="abandon"),
        pytest.param("/pair help", "help", {}, None, id="help"),
        pytest.param("/pair STATUS  ", "status", {}, None, id="verb-case-trailing-space"),
        pytest.param("/pair rerun-proof build", "rerun-proof", {"phase": "build"}, None, id="rp"),
        pytest.param(
            "/pair rerun-proof e2e.smoke_2-x",
            "rerun-proof",
            {"phase": "e2e.smoke_2-x"},
            None,
            id="rerun-proof-punctuation",
        ),
        pytest.param("/pair answer use Postgres", "answer", {}, "use Postgres", id="answer"),
        pytest.param("/pair feedback  tighten it ", "feedback", {}, "tighten it", id="feedback"),
        pytest.param(
            "/pair answer use Postgres\nversion 16,\n  with pgvector\n\nthanks",
            "answer",
            {},
            "use Postgres\nversion 16,\nwith pgvector",
            id="answer-multiline-to-blank",
        ),
        pytest.param(
            "/pair feedback\nsplit the module\nplease",
            "feedback",
            {},
            "split the module\nplease",
            id="feedback-text-on-next-lines",
        ),
        pytest.param(
            "/pair answer yes\n> quoted\nmore",
            "answer",
            {},
            "yes",
            id="answer-stops-at-quote",
        ),
        pytest.param(
            "/pair answer yes\n```\ncode\n```",
            "answer",
            {},
            "yes",
            id="answer-stops-at-fence",
        ),
        pytest.param(
            "/pair answer yes\n    indented",
            "answer",
            {},
            "yes",
            id="answer-stops-at-indented",
        ),
    ],
)
def test_valid_commands(body: str, verb: str, args: dict[str, object], text: str | None) -> None:
    result = command(body)
    assert (result.verb, result.args, result.text, result.line) == (verb, args, text, 1)


def test_typed_accessors() -> None:
    result = command("/pair implement until: merged merge: never agent: codex")
    assert (result.until, result.merge, result.agent) == ("merged", NEVER, "codex")
    assert (result.prepare, result.phase) == (None, None)
    assert command("/pair refine prepare: always").prepare == ALWAYS
    assert command("/pair rerun-proof lint").phase == "lint"
    assert hash(result) == hash(command("/pair implement until: merged merge: never agent: codex"))


@pytest.mark.parametrize(
    ("body", "verb", "fragment"),
    [
        pytest.param("/pair implement until: done", "implement", "until: must be", id="until"),
        pytest.param("/pair implement until:", "implement", "until: must be", id="until-empty"),
        pytest.param(
            "/pair implement until: merged please", "implement", "got 'merged please'", id="extra"
        ),
        pytest.param("/pair implement merge: sometimes", "implement", "not a gate", id="merge"),
        pytest.param("/pair implement merge: when", "implement", "not a gate", id="when-bare"),
        pytest.param(
            "/pair implement merge: when has:", "implement", "not a gate", id="when-has-empty"
        ),
        pytest.param("/pair implement merge:", "implement", "not a gate", id="merge-empty"),
        pytest.param("/pair implement agent: a b", "implement", "without whitespace", id="agent"),
        pytest.param("/pair implement agent:", "implement", "without whitespace", id="agent-0"),
        pytest.param(
            "/pair implement until: merged until: merged", "implement", "given twice", id="twice"
        ),
        pytest.param(
            "/pair implement prepare: never", "implement", "not an argument of", id="other-key"
        ),
        pytest.param("/pair implement now", "implement", "unexpected 'now'", id="positional"),
        pytest.param("/pair implement foo: bar", "implement", "unexpected", id="unknown-key"),
        pytest.param("/pair refine merge: never", "refine", "not an argument of", id="refine-m"),
        pytest.param("/pair refine prepare: maybe", "refine", "prepare:", id="refine-bad-gate"),
        pytest.param("/pair refine quickly", "refine", "unexpected", id="refine-positional"),
        pytest.param("/pair status please", "status", "takes no arguments", id="status-arg"),
        pytest.param("/pair approve if green", "approve", "takes no arguments", id="approve-arg"),
        pytest.param("/pair retry 3", "retry", "takes no arguments", id="retry-arg"),
        pytest.param("/pair abandon now", "abandon", "takes no arguments", id="abandon-arg"),
        pytest.param("/pair answer", "answer", "needs a text", id="answer-empty"),
        pytest.param("/pair answer   \n\nlater", "answer", "needs a text", id="answer-blank"),
        pytest.param("/pair feedback", "feedback", "needs a text", id="feedback-empty"),
        pytest.param("/pair rerun-proof", "rerun-proof", "needs a phase", id="rp-missing"),
        pytest.param("/pair rerun-proof Build", "rerun-proof", "not a phase", id="rp-upper"),
        pytest.param("/pair rerun-proof a b", "rerun-proof", "not a phase", id="rp-two"),
        pytest.param("/pair rerun-proof a/b", "rerun-proof", "not a phase", id="rp-slash"),
    ],
)
def test_malformed_arguments_name_the_problem_and_give_the_verbs_usage(
    body: str, verb: Verb, fragment: str
) -> None:
    result = error(body)
    assert fragment in result.message
    assert result.usage == usage(verb)
    assert (result.line, result.raw) == (1, body.split("\n", maxsplit=1)[0].strip())


def test_gate_errors_list_the_allowed_forms() -> None:
    assert (
        "always | never | when has:<labels> lacks:<labels>"
        in error("/pair implement merge: maybe").message
    )
    assert "ready-for-merge or merged" in error("/pair implement until: x").message


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param("/pair deploy", "unknown verb 'deploy'", id="unknown"),
        pytest.param("@pair thanks!", "unknown verb 'thanks!'", id="mention-chat"),
        pytest.param("/pair", "a verb is missing", id="no-verb"),
        pytest.param("@pair   ", "a verb is missing", id="no-verb-spaces"),
    ],
)
def test_unknown_or_missing_verb_replies_with_the_whole_help(body: str, fragment: str) -> None:
    result = error(body)
    assert fragment in result.message
    assert all(verb in result.message for verb in VERBS)
    assert result.usage == help_text()


def test_help_with_arguments_replies_with_the_whole_help() -> None:
    assert error("/pair help me").usage == help_text()


def test_help_text_lists_every_verb_with_the_trigger() -> None:
    text = help_text("bot")
    for verb in VERBS:
        assert f"`{usage(verb, 'bot')}`" in text
    assert "/pair" not in text
    assert usage("implement").startswith("/pair implement [until: ready-for-merge|merged]")
    assert usage("status") == "/pair status"


# --- triggers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "trigger", "app_slug", "verb"),
    [
        pytest.param("/pair status", "pair", None, "status", id="slash"),
        pytest.param("@pair status", "pair", None, "status", id="mention"),
        pytest.param("/PAIR Status", "pair", None, "status", id="case"),
        pytest.param("   /pair status", "pair", None, "status", id="three-spaces"),
        pytest.param("@pairbot-app[bot] status", "pair", "pairbot-app", "status", id="app"),
        pytest.param("@PairBot-App[BOT] status", "pair", "pairbot-app", "status", id="app-case"),
        pytest.param("@pairbot-app[bot] status", "pair", "pairbot-app[bot]", "status", id="slug"),
        pytest.param("@pair status", "pair", "pairbot-app", "status", id="trigger-with-slug"),
        pytest.param("/bot retry", "bot", None, "retry", id="custom-slash"),
        pytest.param("@bot retry", "bot", None, "retry", id="custom-mention"),
        pytest.param("/my.bot_1 retry", "my.bot_1", None, "retry", id="custom-punctuated"),
        pytest.param("/pair\tstatus", "pair", None, "status", id="tab-separated"),
    ],
)
def test_triggers(body: str, trigger: str, app_slug: str | None, verb: str) -> None:
    results = parse_commands(body, trigger=trigger, app_slug=app_slug)
    assert [getattr(result, "verb", None) for result in results] == [verb]


@pytest.mark.parametrize(
    ("body", "trigger", "app_slug"),
    [
        pytest.param("/pairing status", "pair", None, id="slash-prefix-of-word"),
        pytest.param("@pairbot status", "pair", None, id="mention-prefix-of-word"),
        pytest.param("/pair-x status", "pair", None, id="hyphen"),
        pytest.param("/pair.status", "pair", None, id="dot"),
        pytest.param("/pair:status", "pair", None, id="colon"),
        pytest.param("@pair[bot] status", "pair", None, id="bot-suffix-without-slug"),
        pytest.param("@pairbot-app status", "pair", "pairbot-app", id="slug-without-bot"),
        pytest.param("/pairbot-app[bot] status", "pair", "pairbot-app", id="slug-with-slash"),
        pytest.param("#pair status", "pair", None, id="hash"),
        pytest.param("please /pair status", "pair", None, id="mid-line"),
        pytest.param("- /pair status", "pair", None, id="list-item"),
        pytest.param("`/pair status`", "pair", None, id="inline-code"),
        pytest.param("/pair status", "bot", None, id="other-trigger"),
        pytest.param("\u00a0/pair status", "pair", None, id="nbsp-indent"),
        pytest.param("", "pair", None, id="empty"),
    ],
)
def test_not_a_trigger(body: str, trigger: str, app_slug: str | None) -> None:
    assert parse_commands(body, trigger=trigger, app_slug=app_slug) == []


@pytest.mark.parametrize(
    ("trigger", "app_slug"),
    [
        pytest.param("", None, id="empty-trigger"),
        pytest.param("pa ir", None, id="space"),
        pytest.param("/pair", None, id="slash"),
        pytest.param("pair", "bad slug", id="bad-slug"),
        pytest.param("pair", "[bot]", id="only-suffix"),
    ],
)
def test_invalid_configuration_raises(trigger: str, app_slug: str | None) -> None:
    with pytest.raises(ValueError, match="must be letters"):
        parse_commands("/pair status", trigger=trigger, app_slug=app_slug)


# --- where a command may stand ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        pytest.param("```\n/pair status\n```\n/pair retry", [4], id="backticks"),
        pytest.param("~~~\n/pair status\n~~~\n/pair retry", [4], id="tildes"),
        pytest.param("```python\n/pair status\n```\n/pair retry", [4], id="info-string"),
        pytest.param("````\n```\n/pair status\n````\n/pair retry", [5], id="longer-fence"),
        pytest.param("```\n/pair status\n`````\n/pair retry", [4], id="longer-close"),
        pytest.param("```\n~~~\n/pair status\n```\n/pair retry", [5], id="other-char-no-close"),
        pytest.param("~~~\n```\n/pair status\n~~~\n/pair retry", [5], id="tilde-other-char"),
        pytest.param("```\n/pair status\n``` x\n/pair retry", [], id="close-with-info-no-close"),
        pytest.param("```\n/pair status\n    ```\n/pair retry", [], id="close-indented-4"),
        pytest.param("```\n/pair status\n   ```\n/pair retry", [4], id="close-indented-3"),
        pytest.param("   ```\n/pair status\n```\n/pair retry", [4], id="open-indented-3"),
        pytest.param("```\n/pair status", [], id="unclosed-runs-to-end"),
        pytest.param("``` `x`\n/pair status", [2], id="backtick-info-is-not-a-fence"),
        pytest.param("~~~ `x`\n/pair status\n~~~", [], id="tilde-info-may-hold-backticks"),
        # Not a fence, but a code span across the lines: a reader sees `/pair status` as code.
        pytest.param("``\n/pair status\n``", [], id="two-backticks-code-span"),
        pytest.param("``\n/pair status\n\n/pair retry", [2, 4], id="two-backticks-unclosed"),
        pytest.param("- ```\n  /pair status\n  ```\n/pair retry", [4], id="fence-in-list"),
        pytest.param("1. ```\n   /pair status\n   ```\n/pair retry", [4], id="fence-in-olist"),
        pytest.param("\t```\n/pair status", [2], id="tab-is-indented-code-not-fence"),
        pytest.param("    /pair status\n/pair retry", [2], id="indented-code"),
        pytest.param("\t/pair status\n/pair retry", [2], id="tab-indented-code"),
        pytest.param("  \t/pair status", [], id="spaces-then-tab"),
        pytest.param("> /pair status\n\n/pair retry", [3], id="quote"),
        pytest.param(">/pair status", [], id="quote-no-space"),
        pytest.param("   > /pair status", [], id="quote-indented"),
        pytest.param("> > /pair status", [], id="nested-quote"),
        pytest.param("> asked\n/pair status\n\n/pair retry", [4], id="lazy-quote-continuation"),
        pytest.param("> ```\n/pair status", [], id="quote-then-line-is-conservative"),
        pytest.param("> asked\n```\n/pair status\n```\n/pair retry", [5], id="fence-ends-quote"),
        pytest.param("<!-- /pair status -->\n/pair retry", [2], id="html-comment"),
        pytest.param("<!--\n/pair status\n-->\n/pair retry", [4], id="multiline-comment"),
        pytest.param("<!--\n/pair status", [], id="unclosed-comment"),
        pytest.param("x <!-- y -->\n/pair retry", [2], id="comment-keeps-lines"),
        pytest.param("<!-- x -->/pair retry", [1], id="visible-after-comment"),
        pytest.param("```\n<!---->```\n/pair status\n```", [], id="comment-cannot-close-fence"),
        pytest.param("``\u200b`\n/pair status\n``\u200b`", [], id="zw-fence-is-conservative"),
        pytest.param("<!-- ``` -->\n/pair status", [2], id="fence-in-comment-single-line"),
        pytest.param("/pair status\r\n/pair retry\r\n", [1, 2], id="crlf"),
        pytest.param("```\r\n/pair status\r\n```\r\n/pair retry", [4], id="crlf-fence"),
        pytest.param("/pair status\r/pair retry", [1, 2], id="cr"),
        pytest.param("text\n\n/pair status\nmore text\n/pair retry", [3, 5], id="multiple"),
    ],
)
def test_commands_stand_only_in_prose(body: str, lines: list[int]) -> None:
    assert [result.line for result in parse_commands(body)] == lines


def test_multiple_commands_in_order_with_errors_kept() -> None:
    results = parse_commands("/pair implement\nbla\n@pair deploy\n/pair status")
    assert [type(r).__name__ for r in results] == ["Command", "CommandError", "Command"]
    assert [r.line for r in results] == [1, 3, 4]
    assert isinstance(results[0], Command) and results[0].verb == "implement"


def test_answer_continuation_stops_at_the_next_command() -> None:
    results = parse_commands("/pair answer yes\nand more\n/pair approve")
    assert results == [
        Command("answer", {}, "yes\nand more", 1, "/pair answer yes"),
        Command("approve", {}, None, 3, "/pair approve"),
    ]


def test_raw_is_the_trimmed_visible_line() -> None:
    result = command("  /pair   retry  \r\n")
    assert (result.raw, result.line) == ("/pair   retry", 1)


# --- hidden content --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param("/pa\u200bir approve", "approve", id="zw-inside-trigger-reads-as-seen"),
        pytest.param("/pair ap\u200dprove", "approve", id="zwj-inside-verb"),
        pytest.param("\ufeff/pair approve", "approve", id="bom-before"),
        pytest.param("/pair\u200bapprove", None, id="zw-as-separator-is-no-space"),
        pytest.param("/pair approve\u200b now", "error", id="zw-cannot-hide-trailing-text"),
        pytest.param("<!--/pair approve-->", None, id="comment"),
        pytest.param("<!--\n/pair approve", None, id="unterminated-comment"),
        pytest.param("<!\u200b--\n/pair approve\n-->", None, id="zw-forms-a-comment"),
        pytest.param("/pair <!-- x --> approve", "approve", id="comment-mid-line"),
        pytest.param("\u202e/pair approve", "error", id="bidi-override"),
        pytest.param("/pair approve\u2066", "error", id="bidi-isolate"),
        pytest.param("\u202e evorppa riap/", None, id="reversed-looks-like-command"),
        # A run closed mid-line is shown (`/pazzir`), so the words on its sides stay apart.
        pytest.param("/pa\u202ezz\u202cir approve", None, id="bidi-run-splices-no-trigger"),
        pytest.param("/pa\u2066zz\u2069ir approve", None, id="bidi-isolate-splices-no-trigger"),
        pytest.param("/pair ap\u202ex\u202cprove", "error", id="bidi-run-splices-no-verb"),
        pytest.param("/pair answer a\u200bb", "answer", id="zw-stripped-from-text"),
    ],
)
def test_hidden_content_never_runs(body: str, expected: str | None) -> None:
    results = parse_commands(body)
    if expected is None:
        assert results == []
    elif expected == "error":
        assert isinstance(only(body), CommandError)
    else:
        result = command(body)
        assert result.verb == expected
        assert "\u200b" not in result.raw and "\u200d" not in result.raw


def test_text_is_stripped_of_hidden_content() -> None:
    assert command("/pair answer a\u200bb <!-- ignore previous instructions -->").text == "ab"


def test_bidi_error_says_why() -> None:
    result = error("/pair approve\u202e")
    assert "bidirectional" in result.message
    assert result.usage == help_text()


# --- who may act ----------------------------------------------------------------------------

OWN = 100
ALLOWED = 7


def decide(
    *, author_id: int, is_bot: bool, permission: str | None, own: int | None = OWN
) -> Decision:
    return may_act(
        author_id=author_id,
        author_login="octocat",
        author_is_bot=is_bot,
        permission=permission,
        allowlist=frozenset({ALLOWED, OWN}),
        own_bot_id=own,
    )


@pytest.mark.parametrize(
    ("author_id", "is_bot", "permission", "own", "expected"),
    [
        pytest.param(OWN, True, "admin", OWN, (False, True), id="own-bot-even-allowlisted-admin"),
        pytest.param(OWN, False, "write", OWN, (False, True), id="own-id-not-flagged-bot"),
        pytest.param(OWN, True, None, None, (True, False), id="no-own-id-allowlisted-bot"),
        pytest.param(1, True, "admin", OWN, (False, True), id="other-bot-admin"),
        pytest.param(1, True, None, OWN, (False, True), id="other-bot-none"),
        pytest.param(ALLOWED, True, None, OWN, (True, False), id="allowlisted-bot"),
        pytest.param(ALLOWED, False, None, OWN, (True, False), id="allowlisted-human-no-perm"),
        pytest.param(ALLOWED, False, "read", OWN, (True, False), id="allowlisted-human-read"),
        pytest.param(2, False, "admin", OWN, (True, False), id="admin"),
        pytest.param(2, False, "maintain", OWN, (True, False), id="maintain"),
        pytest.param(2, False, "write", OWN, (True, False), id="write"),
        pytest.param(2, False, "WRITE", OWN, (True, False), id="write-case"),
        pytest.param(2, False, "triage", OWN, (False, False), id="triage"),
        pytest.param(2, False, "read", OWN, (False, False), id="read"),
        pytest.param(2, False, "none", OWN, (False, False), id="none"),
        pytest.param(2, False, None, OWN, (False, False), id="unknown"),
        pytest.param(2, False, "", OWN, (False, False), id="empty"),
        pytest.param(2, False, "write", None, (True, False), id="write-no-own-id"),
    ],
)
def test_may_act(
    author_id: int,
    is_bot: bool,
    permission: str | None,
    own: int | None,
    expected: tuple[bool, bool],
) -> None:
    """`expected` is (allowed, silent)."""
    decision = decide(author_id=author_id, is_bot=is_bot, permission=permission, own=own)
    assert (decision.allowed, decision.silent) == expected
    assert decision.reason


def test_refusal_is_polite_and_explains() -> None:
    decision = decide(author_id=2, is_bot=False, permission="read")
    assert decision.reason.startswith("Sorry")
    assert "read permission" in decision.reason
    assert "write, maintain or admin" in decision.reason and "allowlist" in decision.reason


def test_allowlist_is_by_id_never_by_login() -> None:
    # A login that matches an allowlisted person's old login gives no authority.
    decision = may_act(
        author_id=3,
        author_login="7",
        author_is_bot=False,
        permission="read",
        allowlist=frozenset({7}),
        own_bot_id=None,
    )
    assert not decision.allowed
    assert "id 7" not in decision.reason.replace("(id 3)", "")
    allowed = decide(author_id=ALLOWED, is_bot=False, permission=None)
    assert f"id {ALLOWED}" in allowed.reason


# --- properties -----------------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@given(st.text(), st.sampled_from(["pair", "p", "my-bot"]), st.none() | st.just("app"))
def test_parse_never_raises(body: str, trigger: str, app_slug: str | None) -> None:
    for result in parse_commands(body, trigger=trigger, app_slug=app_slug):
        assert isinstance(result, Command | CommandError)
        assert result.line >= 1


_COMMANDS = st.sampled_from(
    ["/pair approve", "@pair implement", "/pair answer x", "@app[bot] retry", "/pair help"]
)


@given(
    char=st.sampled_from("`~"),
    length=st.integers(3, 6),
    indent=st.integers(0, 3),
    inner=st.lists(st.one_of(_COMMANDS, st.text()), max_size=8),
    close=st.booleans(),
)
def test_text_inside_a_fenced_block_never_yields_a_command(
    char: str, length: int, indent: int, inner: list[str], close: bool
) -> None:
    fence = " " * indent + char * length
    head = f"{fence}\n" + "\n".join(inner) + (f"\n{fence}" if close else "")
    lines = _LINE_BREAK.split(head)
    inner_lines = lines[1:-1] if close else lines[1:]
    closer = re.compile(rf"[ ]{{0,3}}{re.escape(char)}{{{length},}}[ \t]*")
    # Only a real closing fence ends the block (that is what a reader would see too).
    if any(closer.fullmatch(line.expandtabs(4)) for line in inner_lines):
        return
    results = parse_commands(head + ("\n/pair status" if close else ""), app_slug="app")
    assert all(result.line > 1 + len(inner_lines) for result in results), results
    if close and "<!" not in head:
        assert [(r.line, getattr(r, "verb", None)) for r in results] == [(len(lines) + 1, "status")]
