"""Acceptance criteria: the adopted formats, in-place rewrites and the three refusals.

Tables pin the grammar line by line; Hypothesis builds whole cards out of random criteria in
every format (ids spelled any way, bullets, checkboxes, titles, continuation lines, headings,
clause styles, CRLF) and prose, and checks that parsing finds exactly what was written and that
a rewrite changes nothing outside the criterion's span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from app.domain.scope.acceptance import (
    AcceptanceError,
    Criterion,
    ac_number,
    parse_ac_id,
    parse_criteria,
    resolve_criterion,
    rewrite_criterion,
)
from app.errors import UserError


def only(body: str) -> Criterion:
    criteria = parse_criteria(body)
    assert len(criteria) == 1, criteria
    return criteria[0]


def refusal(body: str, ac_id: str, text: str = "new") -> AcceptanceError:
    with pytest.raises(AcceptanceError) as caught:
        rewrite_criterion(body, ac_id, text)
    return caught.value


# ---------------------------------------------------------------- ids


@pytest.mark.parametrize(
    ("value", "number"),
    [
        pytest.param("AC-1", 1, id="plain"),
        pytest.param("AC-01", 1, id="zero-padded"),
        pytest.param("ac-001", 1, id="lower-case"),
        pytest.param(" Ac-12 ", 12, id="whitespace"),
        pytest.param("AC-0", 0, id="zero"),
        pytest.param("AC1", None, id="no-hyphen"),
        pytest.param("AC-", None, id="no-number"),
        pytest.param("AC-1a", None, id="suffix"),
        pytest.param("AC-\u0661", None, id="non-ascii-digit"),
        pytest.param("XAC-1", None, id="prefix"),
        pytest.param("", None, id="empty"),
    ],
)
def test_parse_ac_id(value: str, number: int | None) -> None:
    assert parse_ac_id(value) == number


def test_ac_number_refuses_a_non_id() -> None:
    with pytest.raises(AcceptanceError) as caught:
        ac_number("criterion two")
    assert caught.value.code == "invalid-ac-id"
    assert "'criterion two'" in caught.value.message
    assert "AC-<n>" in caught.value.message


def test_acceptance_error_is_user_facing() -> None:
    err = AcceptanceError("ac-id-unresolvable", "AC-3 is not in the card")
    assert isinstance(err, UserError)
    assert str(err) == "ac-id-unresolvable: AC-3 is not in the card"
    assert (err.code, err.message) == ("ac-id-unresolvable", "AC-3 is not in the card")


# ---------------------------------------------------------------- single-line formats


@pytest.mark.parametrize(
    ("line", "ac_id", "fmt", "title", "text"),
    [
        pytest.param("AC-1: text", "AC-1", "colon", None, "text", id="colon-plain"),
        pytest.param("AC-1 : text", "AC-1", "colon", None, "text", id="colon-space-before"),
        pytest.param("ac-2:text", "ac-2", "colon", None, "text", id="colon-lower-no-space"),
        pytest.param("- **AC-1**: text", "AC-1", "colon", None, "text", id="colon-bold"),
        pytest.param("- **AC-1:** text", "AC-1", "colon", None, "text", id="colon-bold-inside"),
        pytest.param("* AC-1: text", "AC-1", "colon", None, "text", id="colon-star"),
        pytest.param("+ AC-1: text", "AC-1", "colon", None, "text", id="colon-plus"),
        pytest.param("1. AC-1: text", "AC-1", "colon", None, "text", id="colon-ordered"),
        pytest.param("2) AC-1: text", "AC-1", "colon", None, "text", id="colon-ordered-paren"),
        pytest.param("  - AC-1: text", "AC-1", "colon", None, "text", id="colon-nested"),
        pytest.param("- [ ] AC-1: text", "AC-1", "colon", None, "text", id="colon-in-checkbox"),
        pytest.param("- [x] **AC-1**: t", "AC-1", "colon", None, "t", id="colon-bold-checked"),
        pytest.param("**AC-1**: text", "AC-1", "colon", None, "text", id="colon-bold-no-bullet"),
        pytest.param("AC-1: text  ", "AC-1", "colon", None, "text", id="colon-trailing-blanks"),
        pytest.param("AC-1:", "AC-1", "colon", None, "", id="colon-empty"),
        pytest.param(
            "- [ ] **AC-01: Title.** Description.",
            "AC-01",
            "checkbox",
            "Title.",
            "Description.",
            id="checkbox-titled",
        ),
        pytest.param(
            "- [x] **AC-01: Title.** Description.",
            "AC-01",
            "checkbox",
            "Title.",
            "Description.",
            id="checkbox-checked",
        ),
        pytest.param(
            "* [X] **AC-3** Description.", "AC-3", "checkbox", None, "Description.", id="titleless"
        ),
        pytest.param(
            "- [ ] **AC-4:Tight**  spaced", "AC-4", "checkbox", "Tight", "spaced", id="tight"
        ),
        pytest.param("- [ ] **AC-5: T.**", "AC-5", "checkbox", "T.", "", id="checkbox-empty"),
        pytest.param(
            "\t- [ ] **AC-6** nested", "AC-6", "checkbox", None, "nested", id="checkbox-tab"
        ),
    ],
)
def test_single_line_formats(line: str, ac_id: str, fmt: str, title: str | None, text: str) -> None:
    body = f"intro\n\n{line}\n\noutro\n"
    criterion = only(body)
    assert (criterion.id, criterion.format, criterion.title, criterion.text) == (
        ac_id,
        fmt,
        title,
        text,
    )
    assert body[criterion.span[0] : criterion.span[1]] == text
    assert criterion.line == 3


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("AC-1 text", id="no-colon"),
        pytest.param("- AC-1 — text", id="dash-not-colon"),
        pytest.param("AC1: text", id="no-hyphen"),
        pytest.param("AC-1a: text", id="id-runs-on"),
        pytest.param("The AC-1: text", id="not-at-start"),
        pytest.param("> AC-1: text", id="quoted"),
        pytest.param("### AC-1: heading without clauses", id="heading-alone"),
        pytest.param("- [ ] AC-1 no colon", id="checkbox-plain-no-colon"),
        pytest.param("- [ ] **AC-1**no-space", id="checkbox-no-space"),
        pytest.param("-AC-1: text", id="bullet-without-space"),
        pytest.param("- [y] **AC-1** text", id="bad-box"),
        pytest.param("**AC-1** text", id="bold-without-colon-or-box"),
    ],
)
def test_lines_that_are_not_criteria(line: str) -> None:
    assert parse_criteria(f"{line}\n") == []


@pytest.mark.parametrize(
    ("body", "text"),
    [
        pytest.param(
            "- [ ] **AC-1: T.** first\n  second\n  third\n", "first\n  second\n  third", id="two"
        ),
        pytest.param("- AC-1: first\n\tsecond\n", "first\n\tsecond", id="tab"),
        pytest.param("- AC-1: first\n  second  \n", "first\n  second", id="trailing-blanks"),
        pytest.param("- AC-1: first\nsecond\n", "first", id="not-indented"),
        pytest.param("- AC-1: first\n\n  second\n", "first", id="after-blank"),
        pytest.param("- AC-1: first\n  - sub item\n", "first", id="sub-list"),
        pytest.param("- AC-1: first\n  ## heading\n", "first", id="heading"),
        pytest.param("AC-1: first\n  second\n", "first", id="unbulleted-takes-none"),
        pytest.param("  - AC-1: first\n  second\n", "first", id="same-indent"),
    ],
)
def test_continuation_lines(body: str, text: str) -> None:
    assert only(body).text == text


def test_continuation_stops_at_the_next_criterion() -> None:
    criteria = parse_criteria("- AC-1: first\n  AC-2: second\n")
    assert [(c.id, c.text) for c in criteria] == [("AC-1", "first"), ("AC-2", "second")]


# ---------------------------------------------------------------- Given/When/Then

GWT = "**Given** a user\n**When** they log in\n**Then** they see the dashboard"


@pytest.mark.parametrize(
    ("header", "ac_id", "title"),
    [
        pytest.param("### AC-1", "AC-1", None, id="heading"),
        pytest.param("### AC-1: Login", "AC-1", "Login", id="heading-colon"),
        pytest.param("## AC-1 \u2014 Login", "AC-1", "Login", id="heading-em-dash"),
        pytest.param("#### AC-1 - Login", "AC-1", "Login", id="heading-hyphen"),
        pytest.param("### AC-1. Login", "AC-1", "Login", id="heading-dot"),
        pytest.param("### AC-1 Login ###", "AC-1", "Login", id="heading-closing-hashes"),
        pytest.param("### **AC-1** Login", "AC-1", "Login", id="heading-bold"),
        pytest.param("**AC-1**", "AC-1", None, id="bold"),
        pytest.param("**AC-1**: Login", "AC-1", "Login", id="bold-colon-title"),
        pytest.param("**AC-1: Login**", "AC-1", "Login", id="bold-title-inside"),
        pytest.param("**AC-1 Login**", "AC-1", "Login", id="bold-title-inside-space"),
        pytest.param("   **ac-01**", "ac-01", None, id="indented-lower-padded"),
    ],
)
def test_given_when_then_headers(header: str, ac_id: str, title: str | None) -> None:
    body = f"{header}\n\n{GWT}\n\nafter\n"
    criterion = only(body)
    assert (criterion.id, criterion.format, criterion.title) == (ac_id, "given-when-then", title)
    assert criterion.text == GWT
    assert criterion.line == 1


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("AC-1", id="bare-not-heading"),
        pytest.param("    **AC-1**", id="four-spaces"),
        pytest.param("**AC-1: Login** and more", id="text-after-bold-title"),
        pytest.param("### AC-12x", id="id-runs-on"),
        pytest.param("- **AC-1**", id="bulleted"),
    ],
)
def test_lines_that_are_not_given_when_then_headers(header: str) -> None:
    assert parse_criteria(f"{header}\n{GWT}\n") == []


@pytest.mark.parametrize(
    "clauses",
    [
        pytest.param(GWT, id="bold"),
        pytest.param("**Given:** a\n**When:** b\n**Then:** c", id="colon-inside"),
        pytest.param("**Given**: a\n**When**: b\n**Then**: c", id="colon-outside"),
        pytest.param("- **Given** a\n- **When** b\n- **Then** c", id="bullets"),
        pytest.param("1. **Given** a\n2. **When** b\n3. **Then** c", id="numbered"),
        pytest.param("**GIVEN** a\n**when** b\n**Then** c", id="any-case"),
        pytest.param("**Given** a\n\n**When** b\n\n**Then** c", id="blank-separated"),
        pytest.param("**Given** a\n**And** b\n**When** c\n**Then** d\n**But** e", id="and-but"),
        pytest.param("**Given** a\n**Given** b\n**When** c\n**When** d\n**Then** e", id="repeats"),
        pytest.param(
            "**Given** a\n**When** b\n**Then** c\n**Given** d\n**When** e\n**Then** f",
            id="two-scenarios",
        ),
        pytest.param("**Given** a\nstill a\n**When** b\n**Then** c\nstill c", id="continuation"),
        pytest.param("**Given**\n**When** b\n**Then** c", id="empty-clause"),
    ],
)
def test_given_when_then_blocks(clauses: str) -> None:
    body = f"### AC-1\n{clauses}\n\nafter\n"
    assert only(body).text == clauses


@pytest.mark.parametrize(
    "clauses",
    [
        pytest.param("**When** b\n**Then** c", id="no-given"),
        pytest.param("**Given** a\n**Then** c", id="no-when"),
        pytest.param("**Given** a\n**When** b", id="no-then"),
        pytest.param("**And** a\n**When** b\n**Then** c", id="and-first"),
        pytest.param("**Given** a\n**When** b\n**Given** c\n**Then** d", id="given-after-when"),
        pytest.param("**Given** a\n**Then** b\n**When** c", id="out-of-order"),
        pytest.param("Given a\nWhen b\nThen c", id="not-bold"),
        pytest.param("**Given**a\n**When** b\n**Then** c", id="no-space"),
        pytest.param("prose\n**Given** a\n**When** b\n**Then** c", id="prose-first"),
        pytest.param("**Given** a\n- other\n**When** b\n**Then** c", id="interrupted"),
        pytest.param("", id="nothing"),
    ],
)
def test_broken_given_when_then_blocks_are_not_criteria(clauses: str) -> None:
    assert parse_criteria(f"### AC-1\n{clauses}\n") == []


def test_given_when_then_block_ends_at_prose_after_a_blank_line() -> None:
    body = f"### AC-1\n{GWT}\n\nNotes: prose.\n### AC-2\n{GWT}\n"
    first, second = parse_criteria(body)
    assert first.text == second.text == GWT
    assert (first.line, second.line) == (1, 7)


def test_crlf_is_a_line_ending_not_text() -> None:
    body = "AC-1: one\r\n- [ ] **AC-2** two\r\n### AC-3\r\n" + GWT.replace("\n", "\r\n") + "\r\n"
    texts = [c.text for c in parse_criteria(body)]
    assert texts == ["one", "two", GWT.replace("\n", "\r\n")]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("```\nAC-1: example\n```\n", id="backticks"),
        pytest.param("~~~md\nAC-1: example\n~~~\n", id="tildes"),
        pytest.param("````\n```\nAC-1: example\n````\n", id="longer-fence"),
        pytest.param("```\nAC-1: example\n", id="unclosed"),
        pytest.param("<!--\nAC-1: commented out\n-->\n", id="html-comment"),
    ],
)
def test_examples_are_not_criteria(body: str) -> None:
    assert parse_criteria(body) == []


def test_criteria_after_a_fence_and_a_one_line_comment_count() -> None:
    body = "```\nAC-1: example\n```\n<!-- pair:x -->\nAC-2: real\n```a`b\nAC-3: real too\n"
    assert [c.id for c in parse_criteria(body)] == ["AC-2", "AC-3"]


# ---------------------------------------------------------------- rewriting

CARD = """# Login

Intro.

## Acceptance criteria

- [ ] **AC-01: Valid login.** A user with the right password gets in.
- [x] **AC-02** Lockout after five tries
  for fifteen minutes.
- **AC-3**: Bold colon.
AC-4: Plain colon.

### AC-5 \u2014 Reset

1. **Given:** a user
2. **When:** they reset

3. **Then:** they get mail

Trailing prose.
"""


@pytest.mark.parametrize(
    ("ac_id", "new_text", "old_line", "new_line"),
    [
        pytest.param(
            "AC-1",
            "  Valid users get in.  ",
            "- [ ] **AC-01: Valid login.** A user with the right password gets in.",
            "- [ ] **AC-01: Valid login.** Valid users get in.",
            id="checkbox-title-kept",
        ),
        pytest.param(
            "ac-2",
            "Lockout after three tries.",
            "- [x] **AC-02** Lockout after five tries\n  for fifteen minutes.",
            "- [x] **AC-02** Lockout after three tries.",
            id="checked-state-kept-continuation-replaced",
        ),
        pytest.param(
            "AC-003",
            "Still bold.",
            "- **AC-3**: Bold colon.",
            "- **AC-3**: Still bold.",
            id="bold-colon",
        ),
        pytest.param("AC-4", "Changed.", "AC-4: Plain colon.", "AC-4: Changed.", id="plain-colon"),
        pytest.param(
            "AC-5",
            "Given a locked user\nwhen: they reset\n- And they wait\n**Then** they get mail",
            "1. **Given:** a user\n2. **When:** they reset\n\n3. **Then:** they get mail",
            "1. **Given:** a locked user\n\n2. **When:** they reset\n\n3. **And:** they wait"
            "\n\n4. **Then:** they get mail",
            id="given-when-then-restyled",
        ),
    ],
)
def test_rewrite_in_place(ac_id: str, new_text: str, old_line: str, new_line: str) -> None:
    assert old_line in CARD
    assert rewrite_criterion(CARD, ac_id, new_text) == CARD.replace(old_line, new_line)


@pytest.mark.parametrize(
    ("body", "ac_id", "new_text", "expected"),
    [
        pytest.param("AC-1:", "AC-1", "x", "AC-1: x", id="empty-colon-gets-a-space"),
        pytest.param("AC-1:   \n", "AC-1", "x", "AC-1:   x\n", id="empty-colon-with-blanks"),
        pytest.param(
            "- [ ] **AC-1: T.**\r\n", "AC-1", "x", "- [ ] **AC-1: T.** x\r\n", id="empty-checkbox"
        ),
        pytest.param("AC-1: a  \r\nz", "AC-1", "b", "AC-1: b  \r\nz", id="crlf-and-blanks-kept"),
        pytest.param(
            f"### AC-1\r\n{GWT.replace(chr(10), chr(13) + chr(10))}\r\n",
            "AC-1",
            "Given x\nWhen y\nThen z",
            "### AC-1\r\n**Given** x\r\n**When** y\r\n**Then** z\r\n",
            id="given-when-then-crlf",
        ),
        pytest.param(
            "**AC-1**\n  - **Given** a\n  - **When** b\n  - **Then** c\n\nafter",
            "AC-1",
            "given x\nwhen y\nthen z",
            "**AC-1**\n  - **Given** x\n  - **When** y\n  - **Then** z\n\nafter",
            id="given-when-then-nested-bullets",
        ),
        pytest.param(
            "### AC-1\n**Given** a\n**When** b\n**Then** c\nlazy continuation\n\nafter",
            "AC-1",
            "Given x\nWhen y\nThen z",
            "### AC-1\n**Given** x\n**When** y\n**Then** z\n\nafter",
            id="given-when-then-lazy-continuation-is-part-of-the-block",
        ),
        pytest.param(
            "- AC-1:\n  more\n", "AC-1", "x", "- AC-1: x\n", id="empty-first-line-continued"
        ),
        pytest.param("ac-2:tight", "AC-2", "x", "ac-2: x", id="tight-colon-gets-a-space"),
        pytest.param(
            "### AC-1\n**Given**: a\n**When**: b\n**Then**: c",
            "AC-1",
            "Given\nWhen y\nThen z\nAnd w",
            "### AC-1\n**Given**:\n**When**: y\n**Then**: z\n**And**: w",
            id="given-when-then-colon-outside-and-empty-clause",
        ),
    ],
)
def test_rewrite_edge_cases(body: str, ac_id: str, new_text: str, expected: str) -> None:
    assert rewrite_criterion(body, ac_id, new_text) == expected


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("body", "ac_id", "code", "mentions"),
    [
        pytest.param(
            "AC-1: a\nAC-1: b\n", "AC-1", "ambiguous-ac-id", ["AC-1", "2 times"], id="dup-colon"
        ),
        pytest.param(
            "AC-1: a\n- [ ] **AC-01** b\n",
            "AC-1",
            "ambiguous-ac-id",
            ["AC-01 (checkbox, line 2)", "AC-1 (colon, line 1)", "new-card"],
            id="dup-across-formats",
        ),
        pytest.param(
            f"### AC-2\n{GWT}\n\nAC-2: again\n",
            "ac-02",
            "ambiguous-ac-id",
            ["ac-02", "given-when-then"],
            id="dup-across-gwt-and-colon",
        ),
        pytest.param(
            "AC-1: a\nAC-2: b\n",
            "AC-3",
            "ac-id-unresolvable",
            ["AC-3", "AC-1 (colon, line 1)", "AC-2", "never taken to be a new one", "new-card"],
            id="unknown-id",
        ),
        pytest.param(
            "AC-1: a\n### AC-3\nprose only\n",
            "AC-3",
            "ac-id-unresolvable",
            ["AC-3"],
            id="id-present-but-not-parsable-in-a-recognised-card",
        ),
        pytest.param(
            "Users can log in.\n",
            "AC-1",
            "unsupported-card-format",
            ["AC-1", "adopted format", "new-card"],
            id="no-format",
        ),
        pytest.param(
            "Criteria:\n1. AC-1 users log in\n",
            "AC-01",
            "unsupported-card-format",
            ["AC-01 appears in its text"],
            id="id-mentioned-in-unsupported-card",
        ),
        pytest.param(
            "```\nAC-1: example\n```\n",
            "AC-1",
            "unsupported-card-format",
            ["appears in its text"],
            id="only-in-a-fence",
        ),
        pytest.param("", "AC-1", "unsupported-card-format", ["AC-1"], id="empty-card"),
        pytest.param("AC-1: a", "1", "invalid-ac-id", ["'1'"], id="bad-id"),
    ],
)
def test_refusals(body: str, ac_id: str, code: str, mentions: list[str]) -> None:
    err = refusal(body, ac_id)
    assert err.code == code
    for text in mentions:
        assert text in err.message


def test_unsupported_card_says_when_the_id_is_absent() -> None:
    err = refusal("Users can log in.", "AC-1")
    assert "appears in its text" not in err.message


@pytest.mark.parametrize(
    ("body", "new_text", "mentions"),
    [
        pytest.param("AC-1: a", "   ", ["empty"], id="empty"),
        pytest.param("AC-1: a", "one\ntwo", ["several lines"], id="two-lines"),
        pytest.param("- [ ] **AC-1** a", "one\r\ntwo", ["several lines"], id="crlf-lines"),
        pytest.param(f"### AC-1\n{GWT}", "Users log in.", ["'Users log in.'"], id="not-clauses"),
        pytest.param(f"### AC-1\n{GWT}", "Given a\nThen c", ["Given … When … Then"], id="order"),
        pytest.param(f"### AC-1\n{GWT}", "", ["Given … When … Then"], id="gwt-empty"),
    ],
)
def test_invalid_new_text(body: str, new_text: str, mentions: list[str]) -> None:
    err = refusal(body, "AC-1", new_text)
    assert err.code == "invalid-ac-text"
    assert "AC-1" in err.message
    for text in mentions:
        assert text in err.message


def test_resolve_criterion_returns_the_one_named() -> None:
    assert resolve_criterion(CARD, "ac-005").title == "Reset"


# ---------------------------------------------------------------- properties

WORD = st.text(alphabet="abcdefgh xyz,.", min_size=1, max_size=12).map(str.strip).filter(bool)
SENTENCE = st.lists(WORD, min_size=1, max_size=5).map(" ".join)
PROSE = st.lists(SENTENCE, min_size=1, max_size=3).map("\n".join)


@dataclass(frozen=True)
class Written:
    """What the generator wrote for one criterion."""

    number: int
    format: str
    text: str
    title: str | None


@st.composite
def id_spelling(draw: st.DrawFn, number: int) -> str:
    prefix = draw(st.sampled_from(["AC", "ac", "Ac"]))
    return f"{prefix}-{str(number).zfill(draw(st.integers(1, 3)))}"


@st.composite
def colon_criterion(draw: st.DrawFn, number: int) -> tuple[str, Written]:
    ac = draw(id_spelling(number))
    bullet = draw(st.sampled_from(["", "- ", "* ", "+ ", "1. ", "  - ", "- [ ] ", "- [x] "]))
    head = draw(st.sampled_from([f"{ac}: ", f"{ac} : ", f"**{ac}**: ", f"**{ac}:** "]))
    text = draw(SENTENCE)
    lines = [f"{bullet}{head}{text}"]
    if bullet:
        extra = draw(st.lists(SENTENCE, max_size=2))
        indent = " " * (len(bullet) - len(bullet.lstrip()) + 2)
        lines += [f"{indent}{more}" for more in extra]
        text = "\n".join([text, *(f"{indent}{more}" for more in extra)])
    return "\n".join(lines), Written(number, "colon", text, None)


@st.composite
def checkbox_criterion(draw: st.DrawFn, number: int) -> tuple[str, Written]:
    ac = draw(id_spelling(number))
    mark = draw(st.sampled_from([" ", "x", "X"]))
    title = draw(st.none() | SENTENCE)
    bold = f"**{ac}: {title}**" if title else f"**{ac}**"
    text = draw(SENTENCE)
    return f"- [{mark}] {bold} {text}", Written(number, "checkbox", text, title)


CLAUSE_STYLES = ["**{kw}** ", "**{kw}:** ", "**{kw}**: ", "- **{kw}** ", "1. **{kw}** "]


@st.composite
def clauses(draw: st.DrawFn) -> list[tuple[str, str]]:
    scenarios = draw(st.integers(1, 2))
    out: list[tuple[str, str]] = []
    for _ in range(scenarios):
        for kw in ("Given", "When", "Then"):
            out.append((kw, draw(SENTENCE)))
            out += [(draw(st.sampled_from(["And", "But"])), draw(SENTENCE))] * draw(
                st.integers(0, 1)
            )
    return out


@st.composite
def gwt_criterion(draw: st.DrawFn, number: int) -> tuple[str, Written]:
    ac = draw(id_spelling(number))
    title = draw(st.none() | SENTENCE)
    header = draw(
        st.sampled_from(
            [f"### {ac}", f"## **{ac}**", f"**{ac}**"]
            if title is None
            else [f"### {ac}: {title}", f"### {ac} \u2014 {title}", f"**{ac}: {title}**"]
        )
    )
    style = draw(st.sampled_from(CLAUSE_STYLES))
    gap = draw(st.sampled_from(["\n", "\n\n"]))
    text = gap.join(style.format(kw=kw) + rest for kw, rest in draw(clauses()))
    return f"{header}\n{draw(st.sampled_from(['', chr(10)]))}{text}", Written(
        number, "given-when-then", text, title
    )


@st.composite
def cards(draw: st.DrawFn) -> tuple[str, list[Written]]:
    numbers = draw(st.lists(st.integers(0, 120), min_size=1, max_size=6, unique=True))
    blocks: list[str] = []
    written: list[Written] = []
    if draw(st.booleans()):
        blocks.append(draw(PROSE))
    for number in numbers:
        maker = draw(st.sampled_from([colon_criterion, checkbox_criterion, gwt_criterion]))
        block, info = draw(maker(number))
        blocks.append(block)
        written.append(info)
        if draw(st.booleans()):
            blocks.append(draw(PROSE))
        if draw(st.booleans()):
            blocks.append(f"```\nAC-{number}: an example\n```")
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    body = "\n\n".join(blocks) + draw(st.sampled_from(["", "\n"]))
    if eol == "\r\n":
        body = body.replace("\n", "\r\n")
        written = [
            Written(w.number, w.format, w.text.replace("\n", "\r\n"), w.title) for w in written
        ]
    return body, written


@given(cards())
def test_parsing_finds_exactly_what_was_written(card: tuple[str, list[Written]]) -> None:
    body, written = card
    found = parse_criteria(body)
    assert [(c.number, c.format, c.text, c.title) for c in found] == [
        (w.number, w.format, w.text, w.title) for w in written
    ]


_CLAUSE_LINE = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])?[ \t]*\*\*(\w+):?\*\*:?(?: (.*))?$")


def clause_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for line in text.splitlines():
        if line.strip():
            match = _CLAUSE_LINE.match(line)
            assert match is not None, line
            pairs.append((match.group(1), match.group(2) or ""))
    return pairs


@st.composite
def rewrites(draw: st.DrawFn) -> tuple[str, list[Written], Written, str]:
    body, written = draw(cards())
    target = draw(st.sampled_from(written))
    if target.format == "given-when-then":
        spell = st.sampled_from(["{kw} ", "{kw}: ", "**{kw}** ", "- {kw} ", "{low} "])
        new = "\n".join(
            draw(spell).format(kw=kw, low=kw.lower()) + rest for kw, rest in draw(clauses())
        )
    else:
        new = draw(SENTENCE)
    return body, written, target, new


@given(rewrites(), st.sampled_from(["AC-{n}", "ac-0{n}", "AC-00{n}"]))
def test_a_rewrite_changes_only_the_span(
    case: tuple[str, list[Written], Written, str], spelling: str
) -> None:
    body, _, target, new_text = case
    before = parse_criteria(body)
    (old,) = [c for c in before if c.number == target.number]
    result = rewrite_criterion(body, spelling.format(n=target.number), new_text)
    start, end = old.span
    assert result[:start] == body[:start]
    assert result[len(result) - (len(body) - end) :] == body[end:]
    after = parse_criteria(result)
    assert [(c.number, c.format, c.title) for c in after] == [
        (c.number, c.format, c.title) for c in before
    ]
    for was, now in zip(before, after, strict=True):
        if was.number != target.number:
            assert now.text == was.text
        elif target.format == "given-when-then":
            assert [(kw.capitalize(), rest) for kw, rest in clause_pairs(now.text)] == [
                (m.group("kw").capitalize(), (m.group("rest") or "").strip())
                for m in (
                    re.match(
                        r"^[ \t]*(?:- )?(?:\*\*)?(?P<kw>\w+)(?:\*\*)?:? ?(?P<rest>.*)$",
                        line,
                    )
                    for line in new_text.splitlines()
                )
                if m is not None
            ]
        else:
            assert now.text == new_text.strip()
    # The same rewrite again changes nothing more.
    assert rewrite_criterion(result, spelling.format(n=target.number), new_text) == result


@given(cards(), st.integers(0, 200))
def test_refusals_are_total(card: tuple[str, list[Written]], number: int) -> None:
    body, written = card
    assume(number not in {w.number for w in written})
    with pytest.raises(AcceptanceError) as caught:
        rewrite_criterion(body, f"AC-{number}", "text")
    assert caught.value.code == "ac-id-unresolvable"


@given(st.text(alphabet=st.sampled_from(list("AaCc-0123456789:*#[]x -_\n\r\t`~>GivenWhTdBut"))))
def test_parse_is_total_and_spans_are_exact(body: str) -> None:
    criteria = parse_criteria(body)
    previous_end = 0
    for criterion in criteria:
        start, end = criterion.span
        assert previous_end <= start <= end <= len(body)
        assert body[start:end] == criterion.text
        previous_end = end


@given(
    st.text(alphabet=st.sampled_from(list("AC-12:*[] x\n#GivenWhThe"))),
    st.sampled_from(["AC-1", "AC-2"]),
    SENTENCE,
)
def test_any_rewrite_either_refuses_or_stays_in_the_span(
    body: str, ac_id: str, new_text: str
) -> None:
    try:
        target = resolve_criterion(body, ac_id)
    except AcceptanceError:
        return
    try:
        result = rewrite_criterion(body, ac_id, new_text)
    except AcceptanceError as err:
        assert err.code == "invalid-ac-text"
        return
    start, end = target.span
    assert result[:start] == body[:start]
    assert result[len(result) - (len(body) - end) :] == body[end:]
