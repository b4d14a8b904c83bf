"""The card hash covers only the work: title and body, without pairbot's sections or layout."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hosts.cardhash import card_hash, normalise
from hosts.markers import END_MARKER, make_marker, render

TITLE = "Log in with a password"
BODY = "As a user I can log in.\n\n## Acceptance criteria\n\nAC-1: a valid password logs in.\n"
BASE = card_hash(TITLE, BODY)
PLAN = render(make_marker("plan", 3), "- [ ] task one\n- [x] task two")


def test_format() -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", BASE)
    assert card_hash(TITLE, BODY) == BASE


@pytest.mark.parametrize(
    ("title", "body"),
    [
        pytest.param(TITLE, BODY.replace("\n", "\r\n"), id="crlf"),
        pytest.param(TITLE, BODY.replace("\n", "\r"), id="cr"),
        pytest.param(f"  {TITLE}\t", f"\n\n{BODY}\n\n\n", id="leading-trailing"),
        pytest.param(TITLE, BODY.replace(" ", "  ").replace("\n\n", "\n \t\n"), id="runs"),
        pytest.param(TITLE, BODY.replace(" ", "\u00a0"), id="nbsp"),
        pytest.param(TITLE, BODY + "\n" + PLAN, id="pairbot-section-appended"),
        pytest.param(TITLE, PLAN + "\n" + BODY, id="pairbot-section-prepended"),
        pytest.param(TITLE, BODY.replace("\n\n## ", f"\n{PLAN}\n## "), id="section-inside"),
        pytest.param(TITLE, BODY + make_marker("status", 3), id="stray-marker"),
        pytest.param(TITLE, BODY + END_MARKER, id="stray-end-marker"),
        pytest.param(TITLE + make_marker("x", 1), BODY, id="marker-in-title"),
    ],
)
def test_layout_and_pairbots_own_text_do_not_change_it(title: str, body: str) -> None:
    assert card_hash(title, body) == BASE


def test_pairbots_section_can_change_freely() -> None:
    ticked = render(make_marker("plan", 3), "- [x] task one\n- [x] task two\n- [ ] task three")
    assert card_hash(TITLE, BODY + PLAN) == card_hash(TITLE, BODY + ticked) == BASE


@pytest.mark.parametrize(
    ("title", "body"),
    [
        pytest.param(TITLE + "!", BODY, id="title"),
        pytest.param(TITLE, BODY.replace("valid", "correct"), id="body-word"),
        pytest.param(TITLE, BODY + "AC-2: a wrong password is refused.", id="body-added"),
        pytest.param(TITLE, BODY.replace("AC-1", "AC-01"), id="ac-id"),
        pytest.param(TITLE, BODY.lower(), id="case"),
        pytest.param(TITLE, BODY + "<!-- pairing notes -->", id="human-html-comment"),
        pytest.param(TITLE, "", id="empty-body"),
    ],
)
def test_edits_to_the_work_change_it(title: str, body: str) -> None:
    assert card_hash(title, body) != BASE


def test_title_and_body_do_not_run_into_each_other() -> None:
    assert card_hash("a b", "c") != card_hash("a", "b c")
    assert card_hash("", "a") != card_hash("a", "")


def test_text_after_an_unclosed_marker_is_still_the_work() -> None:
    stray = make_marker("synthesis", 3)
    before = card_hash(TITLE, f"{BODY}\n{stray}\nhuman text")
    assert card_hash(TITLE, f"{BODY}\n{stray}\nhuman text, edited") != before


def test_a_stray_marker_does_not_swallow_text_up_to_a_later_section() -> None:
    stray = make_marker("pasted", 1)
    before = card_hash(TITLE, f"{stray} human text\n{PLAN}")
    assert card_hash(TITLE, f"{stray} human text, edited\n{PLAN}") != before
    assert normalise(f"{stray} human text\n{PLAN}") == "human text"


def test_normalise() -> None:
    assert normalise("  a \r\n\r\n b\t") == "a b"
    assert normalise(f"keep {PLAN} this") == "keep this"


@given(
    words=st.lists(st.text("abcXYZ-:#1", min_size=1, max_size=8), min_size=1, max_size=12),
    gaps=st.lists(st.sampled_from([" ", "  ", "\n", "\r\n", "\t", "\n\n \n"]), min_size=12),
)
def test_any_whitespace_between_the_same_words_hashes_the_same(
    words: list[str], gaps: list[str]
) -> None:
    spaced = "".join(w + g for w, g in zip(words, gaps, strict=False))
    assert card_hash(TITLE, spaced) == card_hash(TITLE, " ".join(words))
