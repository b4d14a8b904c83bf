"""Scope decisions: the baseline hash, who may decide, the comment's shape, and applying it.

Every refusal code has its own table rows and each row checks the message names what was
wrong and what is allowed. Hypothesis checks the hash ignores order and wording, that any
well-formed decision over pending proposals validates back to itself, and that applying
decisions bumps the epoch once per extending decision and never on a replay.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.review.verdict import ScopeChange
from app.domain.scope.decision import (
    SCOPE_ACTIONS,
    ApprovedDelta,
    DecisionItem,
    Disposition,
    ExtendCard,
    NewCard,
    OpenRemediationRound,
    ScopeDecision,
    ScopeState,
    apply_decisions,
    resolve_maintainer,
    rewrite_card,
    scope_baseline_hash,
    validate_decision,
)
from app.domain.scope.decision_json import json_too_deep
from app.domain.scope.refusal import Refusal
from hosts.models import Author, Comment

MAINTAINER = "octocat"


def sc(
    n: int, kind: str = "new-requirement", evidence: str = "", ac: str | None = None
) -> ScopeChange:
    return ScopeChange(id=f"sc-{n}", type=kind, evidence=evidence, affected_ac=ac)


PENDING = (
    sc(1, evidence="Adds a password-strength meter.\nNot in the card.", ac="AC-1"),
    sc(2, "behaviour-change", evidence="Locks accounts after 3 tries."),
    sc(3),
)
HASH = scope_baseline_hash(PENDING)


def item(pid: str, action: Any = "ignore", **extra: Any) -> dict[str, Any]:
    return {"id": pid, "action": action, **extra}


def extend(pid: str, ac: str = "AC-2", text: str = "Locked after 3 tries.") -> dict[str, Any]:
    return item(pid, "extend-current-card", approvedDelta={"ac": ac, "text": text})


def payload(*items: Any, baseline: str = HASH, **top: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, "scopeBaselineHash": baseline, "decisions": list(items), **top}


def fenced(data: Any) -> str:
    return f"Decision:\n\n```json\n{json.dumps(data, indent=2)}\n```\n\nThanks!"


def comment(
    body: str, login: str = MAINTAINER, *, is_bot: bool = False, cid: str = "c1"
) -> Comment:
    return Comment(
        id=cid,
        body=body,
        author=Author(login=login, id="1", is_bot=is_bot),
        url=f"https://example.test/pull/7#issuecomment-{cid}",
    )


def check(
    body: str,
    *,
    login: str = MAINTAINER,
    is_bot: bool = False,
    maintainer: str | None = MAINTAINER,
    assignees: tuple[str, ...] = (),
    pending: tuple[ScopeChange, ...] = PENDING,
) -> ScopeDecision | Refusal:
    return validate_decision(
        comment(body, login, is_bot=is_bot),
        maintainer=maintainer,
        assignees=assignees,
        pending=pending,
    )


def refused(result: object, code: str, *mentions: str) -> None:
    assert isinstance(result, Refusal), result
    assert result.code == code, result
    for text in mentions:
        assert text in result.message, (text, result.message)


# ---------------------------------------------------------------- the baseline hash


def test_hash_is_pinned() -> None:
    # The maintainer copies it from the packet: its format must never drift.
    assert scope_baseline_hash([sc(1)]) == (
        "sha256:da4915aa7b5baf28331029a7d09e9f829819dcee2394de02129b654df0f03799"
    )
    empty = hashlib.sha256(b"[]").hexdigest()
    assert scope_baseline_hash([]) == f"sha256:{empty}"


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        pytest.param([sc(1), sc(2)], [sc(2), sc(1)], True, id="order"),
        pytest.param([sc(1, evidence="a")], [sc(1, evidence="b", ac="AC-3")], True, id="wording"),
        pytest.param([sc(1)], [sc(1, "other")], False, id="type"),
        pytest.param([sc(1)], [sc(2)], False, id="id"),
        pytest.param([sc(1)], [sc(1), sc(2)], False, id="added"),
        pytest.param([sc(1)], [], False, id="emptied"),
    ],
)
def test_hash_covers_ids_and_types_only(
    left: list[ScopeChange], right: list[ScopeChange], same: bool
) -> None:
    assert (scope_baseline_hash(left) == scope_baseline_hash(right)) is same


PROPOSALS = st.lists(
    st.builds(
        sc,
        st.integers(1, 40),
        st.sampled_from(["new-requirement", "behaviour-change", "x"]),
        st.text(max_size=20),
    ),
    max_size=6,
    unique_by=lambda p: p.id,
)


@given(PROPOSALS, st.randoms(use_true_random=False), st.text(max_size=10))
def test_hash_ignores_order_and_wording(
    proposals: list[ScopeChange], rnd: Any, wording: str
) -> None:
    shuffled = proposals[:]
    rnd.shuffle(shuffled)
    reworded = [p.model_copy(update={"evidence": wording}) for p in shuffled]
    assert scope_baseline_hash(reworded) == scope_baseline_hash(proposals)


# ---------------------------------------------------------------- who may decide


@pytest.mark.parametrize(
    ("maintainer", "assignees", "expected"),
    [
        pytest.param("octocat", (), "octocat", id="config"),
        pytest.param("octocat", ("hubot",), "octocat", id="config-wins-over-assignee"),
        pytest.param(" @octocat ", (), "octocat", id="config-at-sign"),
        pytest.param(None, ("hubot",), "hubot", id="one-assignee"),
        pytest.param("", ("hubot",), "hubot", id="empty-config"),
        pytest.param(None, ("Hubot", "hubot"), "Hubot", id="same-assignee-twice"),
        pytest.param(None, ("@hubot", " "), "hubot", id="blank-assignee-ignored"),
    ],
)
def test_maintainer_resolution(
    maintainer: str | None, assignees: tuple[str, ...], expected: str
) -> None:
    assert resolve_maintainer(maintainer, assignees) == expected


@pytest.mark.parametrize(
    ("assignees", "mentions"),
    [
        pytest.param((), ["no assignee"], id="none"),
        pytest.param(("a", "b"), ["2 assignees (a, b)"], id="several"),
    ],
)
def test_maintainer_unresolved(assignees: tuple[str, ...], mentions: list[str]) -> None:
    result = check(fenced(payload(item("sc-1"))), maintainer=None, assignees=assignees)
    refused(result, "maintainer-unresolved", "maintainer: <login>", "exactly one", *mentions)


@pytest.mark.parametrize(
    ("login", "is_bot", "code", "mentions"),
    [
        pytest.param("octocat", True, "author-is-bot", ["'octocat'", "octocat"], id="bot-flag"),
        pytest.param("pair[bot]", False, "author-is-bot", ["'pair[bot]'"], id="bot-login"),
        pytest.param("OctoCat[BOT]", False, "author-is-bot", [], id="bot-login-any-case"),
        pytest.param("mallory", False, "not-maintainer", ["'mallory'", "only octocat"], id="user"),
    ],
)
def test_only_the_maintainer_decides(
    login: str, is_bot: bool, code: str, mentions: list[str]
) -> None:
    refused(check(fenced(payload(item("sc-1"))), login=login, is_bot=is_bot), code, *mentions)


def test_logins_compare_case_insensitively() -> None:
    result = check(fenced(payload(item("sc-1"))), login="OCTOCAT")
    assert isinstance(result, ScopeDecision)
    assert result.author == "OCTOCAT"


def test_assignee_maintainer_is_honoured() -> None:
    result = check(
        fenced(payload(item("sc-1"))), login="hubot", maintainer=None, assignees=("hubot",)
    )
    assert isinstance(result, ScopeDecision)


def test_authentication_comes_before_reading_the_body() -> None:
    refused(check("no json at all", login="mallory"), "not-maintainer")


# ---------------------------------------------------------------- reading the comment

GOOD = json.dumps(payload(item("sc-1")))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("I ignore sc-1.", id="prose"),
        pytest.param(f"```\n{GOOD}\n```", id="untagged-fence"),
        pytest.param(f"```python\n{GOOD}\n```", id="other-language"),
        pytest.param(f"> ```json\n> {GOOD}\n> ```", id="quoted"),
        pytest.param(f"    ```json\n    {GOOD}\n    ```", id="indented-code"),
        pytest.param(f"````\n```json\n{GOOD}\n```\n````", id="inside-another-fence"),
        pytest.param(f"```md\nunclosed\n```json\n{GOOD}", id="after-an-unclosed-fence"),
        pytest.param("", id="empty"),
    ],
)
def test_no_decision(body: str) -> None:
    refused(check(body), "no-decision", "```json", "schemaVersion")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"```json\n{GOOD}\n```", id="plain"),
        pytest.param(f"~~~json\n{GOOD}\n~~~", id="tildes"),
        pytest.param(f"```JSON\n{GOOD}\n```", id="upper-case-info"),
        pytest.param(f"``` json\n{GOOD}\n```", id="space-before-info"),
        pytest.param(f"````json\n{GOOD}\n````", id="longer-fence"),
        pytest.param(f"```json\r\n{GOOD}\r\n```\r\n", id="crlf"),
        pytest.param(f"```python\nx = 1\n```\n```json\n{GOOD}\n```", id="after-other-fence"),
        pytest.param(f"```json\n{GOOD}\n```\n> ```json\n> {{}}\n> ```", id="quote-ignored"),
        pytest.param(f"```a`b\n```json\n{GOOD}\n```", id="backtick-info-is-not-a-fence"),
    ],
)
def test_the_fence_is_found(body: str) -> None:
    assert isinstance(check(body), ScopeDecision)


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        pytest.param(
            f"```json\n{GOOD}\n```\n\n```json\n{GOOD}\n```",
            ["2 fenced ```json blocks (lines 1, 5)", "exactly one"],
            id="two-blocks",
        ),
        pytest.param(f"text\n```json\n{GOOD}", ["opened on line 2 is never closed"], id="unclosed"),
        pytest.param(
            'intro\n```json\n{\n  "schemaVersion": 1,\n  oops\n}\n```',
            ["not valid JSON", "on line 5", "column 3"],
            id="syntax-error-line",
        ),
        pytest.param("```json\n[1, 2]\n```", ["JSON list, not an object"], id="array"),
        pytest.param(
            f"````json\n{GOOD}\n```\n````",
            ["Extra data on line 3"],
            id="shorter-fence-inside-is-content",
        ),
        pytest.param('```json\n"x"\n```', ["JSON str, not an object"], id="string"),
        pytest.param(
            '```json\n{"schemaVersion": 1, "schemaVersion": 1}\n```',
            ["repeats the key 'schemaVersion'"],
            id="duplicate-key",
        ),
        pytest.param('```json\n{"a": NaN}\n```', ["NaN is not JSON"], id="nan"),
        pytest.param("```json\n\n```", ["not valid JSON"], id="empty-block"),
        pytest.param(
            "```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```",
            ["line 2 nests arrays and objects more than 32 deep"],
            id="array-100k-deep",
        ),
        pytest.param(
            '```json\n{"schemaVersion": 1,\n "x": ' + '{"a":' * 50_000 + "\n```",
            ["line 3 nests arrays and objects more than 32 deep"],
            id="unclosed-objects-deep",
        ),
    ],
)
def test_malformed_json(body: str, mentions: list[str]) -> None:
    refused(check(body), "malformed-json", *mentions)


@pytest.mark.parametrize(
    ("text", "deep_at"),
    [
        pytest.param("[" * 32 + "]" * 32, None, id="at-the-limit"),
        pytest.param("[" * 33, 32, id="one-past"),
        pytest.param('["' + "[" * 100 + '"]', None, id="brackets-in-a-string"),
        pytest.param('["\\\\"' + "[" * 40, 5 + 31, id="an-escaped-backslash-ends-the-string"),
        pytest.param('["\\"]' + "[" * 40, None, id="an-escaped-quote-stays-in-the-string"),
        pytest.param("]]]]" + "[" * 32, None, id="closers-never-go-negative"),
        pytest.param('"\\"\\"' * 30_000, None, id="quotes-and-backslashes-linear"),
    ],
)
def test_json_depth_is_one_linear_scan(text: str, deep_at: int | None) -> None:
    assert json_too_deep(text) == deep_at


# ---------------------------------------------------------------- its shape


@pytest.mark.parametrize(
    ("version", "shown"),
    [
        pytest.param(2, "2", id="two"),
        pytest.param("1", '"1"', id="string"),
        pytest.param(True, "true", id="bool"),
        pytest.param(1.0, "1.0", id="float"),
        pytest.param(None, "null", id="null"),
    ],
)
def test_schema_version(version: Any, shown: str) -> None:
    body = fenced({**payload(item("sc-1")), "schemaVersion": version})
    refused(check(body), "unsupported-schema-version", f"schemaVersion is {shown}", "1 only")


@pytest.mark.parametrize(
    ("data", "mentions"),
    [
        pytest.param(
            payload(item("sc-1"), extra=1),
            ["unknown key 'extra'", "allowed: schemaVersion, scopeBaselineHash, decisions"],
            id="extra-top-key",
        ),
        pytest.param(
            {"decisions": [item("sc-1")]},
            ["missing 'schemaVersion'", "missing 'scopeBaselineHash'"],
            id="missing-top-keys",
        ),
        pytest.param(
            {"schemaVersion": 1, "scopeBaselineHash": HASH},
            ["missing 'decisions'"],
            id="missing-decisions",
        ),
        pytest.param(
            payload(baseline=""),
            ["scopeBaselineHash must be", "decisions must be"],
            id="empty-hash-and-decisions",
        ),
        pytest.param(
            {**payload(), "decisions": {}},
            ["decisions must be a non-empty list"],
            id="decisions-object",
        ),
        pytest.param(payload("sc-1"), ["decisions[0] is a JSON str"], id="item-not-object"),
        pytest.param(payload({"action": "ignore"}), ["decisions[0] is missing 'id'"], id="no-id"),
        pytest.param(payload({"id": "sc-1"}), ["missing 'action'"], id="no-action"),
        pytest.param(
            payload(item("sc-1", action=3)),
            ["action must be a non-empty string"],
            id="action-number",
        ),
        pytest.param(payload(item(" ")), ["id must be a non-empty string"], id="blank-id"),
        pytest.param(
            payload(item("sc-1", note="x")),
            ["unknown key 'note'", "approvedDelta"],
            id="extra-item-key",
        ),
        pytest.param(
            payload(item("sc-1", rationale=1)),
            ["rationale must be a string"],
            id="rationale-number",
        ),
        pytest.param(
            payload(item("sc-1", targetIssueUrl="https://x.test/1")),
            ["targetIssueUrl belongs only to a new-card"],
            id="url-on-ignore",
        ),
        pytest.param(
            payload(item("sc-1", "new-card", targetIssueUrl="issue 9")),
            ["targetIssueUrl must be an http(s) URL"],
            id="url-not-url",
        ),
        pytest.param(
            payload(item("sc-1", "extend-current-card")),
            ["approvedDelta is missing", '"ac": "AC-<n>"'],
            id="extend-without-delta",
        ),
        pytest.param(
            payload(item("sc-1", "extend-current-card", approvedDelta="AC-2")),
            ["approvedDelta must be an object"],
            id="delta-not-object",
        ),
        pytest.param(
            payload(item("sc-1", approvedDelta={"ac": "AC-1", "text": "x"})),
            ["approvedDelta belongs only to an extend-current-card"],
            id="delta-on-ignore",
        ),
        pytest.param(
            payload(
                item(
                    "sc-1",
                    "extend-current-card",
                    approvedDelta={"ac": "AC-1", "text": "x", "why": "y"},
                )
            ),
            ["approvedDelta has the unknown key 'why' (allowed: ac, text)"],
            id="delta-extra-key",
        ),
        pytest.param(
            payload(extend("sc-1", ac="criterion 2")), ["AC-<n>, e.g. AC-2"], id="delta-bad-ac"
        ),
        pytest.param(
            payload(extend("sc-1", text=" ")), ["approvedDelta.text must be"], id="delta-empty-text"
        ),
    ],
)
def test_invalid_decision(data: dict[str, Any], mentions: list[str]) -> None:
    refused(check(fenced(data)), "invalid-decision", *mentions, "{id, action")


def test_unknown_action() -> None:
    body = fenced(payload(item("sc-1", "defer"), item("sc-2", "IGNORE"), item("sc-3")))
    refused(
        check(body),
        "unknown-action",
        "sc-1 ('defer')",
        "sc-2 ('IGNORE')",
        "ignore | new-card | extend-current-card",
    )


def test_duplicate_id() -> None:
    body = fenced(payload(item("sc-1"), item("sc-1", "new-card"), item("sc-2")))
    refused(check(body), "duplicate-id", "sc-1 decided more than once", "one decision")


@pytest.mark.parametrize(
    "baseline",
    [
        pytest.param("sha256:0000", id="wrong"),
        pytest.param(scope_baseline_hash(PENDING[:2]), id="older-pending-set"),
    ],
)
def test_stale_baseline(baseline: str) -> None:
    refused(
        check(fenced(payload(item("sc-1"), baseline=baseline))),
        "stale-baseline",
        repr(baseline),
        "sc-1 (new-requirement), sc-2 (behaviour-change), sc-3 (new-requirement)",
        f'"scopeBaselineHash": "{HASH}"',
    )


def test_stale_baseline_when_nothing_is_pending() -> None:
    refused(check(fenced(payload(item("sc-1"))), pending=()), "stale-baseline", "none is pending")


def test_baseline_compare_ignores_case_and_blanks() -> None:
    assert isinstance(
        check(fenced(payload(item("sc-1"), baseline=f" {HASH.upper()} "))), ScopeDecision
    )


@pytest.mark.parametrize(
    ("ids", "mentions"),
    [
        pytest.param(["sc-9"], ["sc-9 is not pending", "sc-1 (new-requirement)"], id="one"),
        pytest.param(["sc-1", "sc-8", "x"], ["sc-8, x are not pending"], id="several"),
    ],
)
def test_unknown_proposal(ids: list[str], mentions: list[str]) -> None:
    refused(check(fenced(payload(*(item(i) for i in ids)))), "unknown-proposal", *mentions)


def test_conflicting_delta() -> None:
    body = fenced(payload(extend("sc-1", ac="AC-2"), extend("sc-2", ac="ac-02"), item("sc-3")))
    refused(check(body), "conflicting-delta", "sc-1 and sc-2 all extend AC-2", "one text per AC")


def test_refusal_order_prefers_the_document_over_the_world() -> None:
    # An unknown action in a stale decision is reported as the unknown action first.
    body = fenced(payload(item("sc-9", "defer"), baseline="sha256:0"))
    refused(check(body), "unknown-action")


def test_a_valid_decision() -> None:
    body = fenced(
        payload(
            item("sc-1", rationale="later"),
            item("sc-2", "new-card", targetIssueUrl=" https://x.test/issues/9 "),
            extend(" sc-3 ", ac=" ac-2 ", text="  Locked after 3 tries. "),
        )
    )
    result = check(body)
    assert result == ScopeDecision(
        ref="c1",
        author="octocat",
        baseline_hash=HASH,
        decisions=(
            DecisionItem("sc-1", "ignore", rationale="later"),
            DecisionItem("sc-2", "new-card", target_issue_url="https://x.test/issues/9"),
            DecisionItem(
                "sc-3",
                "extend-current-card",
                approved_delta=ApprovedDelta(ac="ac-2", text="Locked after 3 tries."),
            ),
        ),
        url="https://example.test/pull/7#issuecomment-c1",
    )


DECISIONS = st.lists(
    st.tuples(
        st.integers(1, 40),
        st.sampled_from(SCOPE_ACTIONS),
        st.none() | st.text(max_size=10),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda t: t[0],
)


@given(DECISIONS)
def test_any_well_formed_decision_validates_back_to_itself(
    rows: list[tuple[int, str, str | None, bool]],
) -> None:
    pending = tuple(sc(n) for n, *_ in rows)
    items: list[dict[str, Any]] = []
    expected: list[DecisionItem] = []
    for ac, (n, action, rationale, with_url) in enumerate(rows, start=1):
        raw: dict[str, Any] = {"id": f"sc-{n}", "action": action}
        url = delta = None
        if rationale is not None:
            raw["rationale"] = rationale
        if action == "new-card" and with_url:
            url = raw["targetIssueUrl"] = f"https://x.test/issues/{n}"
        if action == "extend-current-card":
            delta = ApprovedDelta(ac=f"AC-{ac}", text=f"text {ac}")
            raw["approvedDelta"] = {"ac": delta.ac, "text": delta.text}
        items.append(raw)
        expected.append(DecisionItem(f"sc-{n}", action, rationale, url, delta))  # type: ignore[arg-type]
    result = check(fenced(payload(*items, baseline=scope_baseline_hash(pending))), pending=pending)
    assert isinstance(result, ScopeDecision), result
    assert result.decisions == tuple(expected)


# ---------------------------------------------------------------- rewriting the card

CARD = "## Acceptance criteria\n\n- [ ] **AC-1: Login.** Users log in.\nAC-2: Lockout after 5.\n"


def decided(*items: DecisionItem, ref: str = "c1") -> ScopeDecision:
    return ScopeDecision(
        ref=ref,
        author=MAINTAINER,
        baseline_hash=HASH,
        decisions=items,
        url=f"https://example.test/c/{ref}",
    )


def extend_item(pid: str, ac: str, text: str) -> DecisionItem:
    return DecisionItem(pid, "extend-current-card", approved_delta=ApprovedDelta(ac, text))


def test_rewrite_card_applies_every_delta() -> None:
    decision = decided(
        extend_item("sc-1", "AC-01", "Users log in with a passkey."),
        DecisionItem("sc-2", "ignore"),
        extend_item("sc-3", "AC-2", "Lockout after 3."),
    )
    assert rewrite_card(CARD, decision) == (
        "## Acceptance criteria\n\n- [ ] **AC-1: Login.** Users log in with a passkey.\n"
        "AC-2: Lockout after 3.\n"
    )


def test_rewrite_card_without_deltas_changes_nothing() -> None:
    assert rewrite_card(CARD, decided(DecisionItem("sc-1", "ignore"))) == CARD


@pytest.mark.parametrize(
    ("body", "ac", "code"),
    [
        pytest.param("Users log in.", "AC-1", "unsupported-card-format", id="unsupported"),
        pytest.param(CARD, "AC-7", "ac-id-unresolvable", id="unresolvable"),
        pytest.param(CARD + "AC-2: twice\n", "AC-2", "ambiguous-ac-id", id="ambiguous"),
        pytest.param(CARD, "AC-2", "invalid-ac-text", id="bad-text"),
    ],
)
def test_rewrite_card_refusals(body: str, ac: str, code: str) -> None:
    text = "two\nlines" if code == "invalid-ac-text" else "x"
    result = rewrite_card(body, decided(extend_item("sc-4", ac, text)))
    refused(result, code, "sc-4 (extend-current-card): ", ac)


# ---------------------------------------------------------------- applying it

STATE = ScopeState(pending=PENDING)


def test_ignore_and_new_card_disposition_without_an_epoch() -> None:
    decision = decided(
        DecisionItem("sc-1", "new-card", rationale="separate story"),
        DecisionItem("sc-2", "ignore", rationale="won't do"),
        DecisionItem("sc-3", "new-card", target_issue_url="https://x.test/issues/9"),
    )
    state, effects = apply_decisions(STATE, decision)
    assert state.pending == ()
    assert state.scope_epoch == 0
    assert state.applied_refs == ("c1",)
    assert state.dispositions == (
        Disposition("sc-1", "new-requirement", "new-card", "c1", rationale="separate story"),
        Disposition("sc-2", "behaviour-change", "ignore", "c1", rationale="won't do"),
        Disposition(
            "sc-3",
            "new-requirement",
            "new-card",
            "c1",
            target_issue_url="https://x.test/issues/9",
        ),
    )
    (new_card,) = effects  # the card filed by hand (sc-3) is not created again
    assert isinstance(new_card, NewCard)
    assert new_card.proposal_id == "sc-1"
    assert new_card.title == "Adds a password-strength meter."
    assert "`sc-1` (`new-requirement`)" in new_card.body
    assert "https://example.test/c/c1" in new_card.body
    assert "Affected acceptance criterion: AC-1" in new_card.body
    assert "> Adds a password-strength meter.\n> Not in the card." in new_card.body
    assert "Maintainer's rationale: separate story" in new_card.body


@pytest.mark.parametrize(
    ("proposal", "title"),
    [
        pytest.param(sc(1), "new-requirement (sc-1)", id="no-evidence"),
        pytest.param(sc(1, evidence="\n\n  first line  \nsecond"), "first line", id="first-line"),
        pytest.param(sc(1, evidence="x" * 100), "x" * 79 + "…", id="truncated"),
    ],
)
def test_new_card_title(proposal: ScopeChange, title: str) -> None:
    state = ScopeState(pending=(proposal,))
    _, (effect,) = apply_decisions(state, decided(DecisionItem("sc-1", "new-card")))
    assert isinstance(effect, NewCard)
    assert effect.title == title
    assert "Evidence" not in effect.body or proposal.evidence.strip()
    assert effect.body.endswith("\n")


def test_new_card_without_a_comment_url_names_the_comment_id() -> None:
    decision = ScopeDecision(
        ref="c9",
        author=MAINTAINER,
        baseline_hash=HASH,
        decisions=(DecisionItem("sc-3", "new-card"),),
    )
    _, (effect,) = apply_decisions(STATE, decision)
    assert isinstance(effect, NewCard)
    assert "(comment c9)" in effect.body


def test_extend_bumps_the_epoch_once_per_decision() -> None:
    decision = decided(
        extend_item("sc-1", "AC-1", "one"),
        DecisionItem("sc-2", "ignore"),
        extend_item("sc-3", "AC-2", "two"),
    )
    state, effects = apply_decisions(ScopeState(pending=PENDING, scope_epoch=4), decision)
    assert state.scope_epoch == 5
    assert effects == (
        ExtendCard(ac="AC-1", text="one", proposal_id="sc-1"),
        ExtendCard(ac="AC-2", text="two", proposal_id="sc-3"),
        OpenRemediationRound(scope_epoch=5, acs=("AC-1", "AC-2"), decision_ref="c1"),
    )
    assert [d.ac for d in state.dispositions] == ["AC-1", None, "AC-2"]


def test_a_replayed_decision_is_a_no_op() -> None:
    decision = decided(extend_item("sc-1", "AC-1", "one"))
    once, effects = apply_decisions(STATE, decision)
    assert effects
    twice, again = apply_decisions(once, decision)
    assert twice is once
    assert again == ()


def test_partial_decisions_leave_the_rest_pending() -> None:
    state, _ = apply_decisions(STATE, decided(DecisionItem("sc-2", "ignore")))
    assert [p.id for p in state.pending] == ["sc-1", "sc-3"]
    later, _ = apply_decisions(state, decided(extend_item("sc-3", "AC-1", "x"), ref="c2"))
    assert [p.id for p in later.pending] == ["sc-1"]
    assert later.applied_refs == ("c1", "c2")
    assert later.scope_epoch == 1


def test_applying_an_unvalidated_decision_is_a_bug() -> None:
    with pytest.raises(ValueError, match="not pending: sc-9"):
        apply_decisions(STATE, decided(DecisionItem("sc-9", "ignore")))


@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(SCOPE_ACTIONS), min_size=1, max_size=3),
            st.booleans(),
        ),
        max_size=5,
    )
)
def test_epochs_count_extending_decisions_and_replays_change_nothing(
    plan: list[tuple[list[str], bool]],
) -> None:
    counter = iter(range(1, 1000))
    pending = []
    decisions = []
    for index, (actions, _) in enumerate(plan):
        items = []
        for action in actions:
            n = next(counter)
            pending.append(sc(n))
            delta = ApprovedDelta(f"AC-{n}", "t") if action == "extend-current-card" else None
            items.append(DecisionItem(f"sc-{n}", action, approved_delta=delta))  # type: ignore[arg-type]
        decisions.append(decided(*items, ref=f"c{index}"))
    state = ScopeState(pending=tuple(pending))
    for decision, (_, replay) in zip(decisions, plan, strict=True):
        before = state
        state, effects = apply_decisions(state, decision)
        extends = sum(1 for i in decision.decisions if i.action == "extend-current-card")
        assert state.scope_epoch - before.scope_epoch == (1 if extends else 0)
        rounds = [e for e in effects if isinstance(e, OpenRemediationRound)]
        assert len(rounds) == (1 if extends else 0)
        assert len(state.pending) == len(before.pending) - len(decision.decisions)
        if replay:
            assert apply_decisions(state, decision) == (state, ())
    extending = sum(
        1 for d in decisions if any(i.action == "extend-current-card" for i in d.decisions)
    )
    assert state.scope_epoch == extending
    assert state.pending == ()
    assert len(state.dispositions) == len(pending)
