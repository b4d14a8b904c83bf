"""`visible_lines`' fast path for plain text reads exactly as the full Markdown parse does.

The fast path skips cmark-gfm for text in which Markdown and HTML can make nothing; any text
it takes must come back the same as the parse would have read it, with or without the
`addressed` filter.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.text import sanitize
from app.domain.text.sanitize import VisibleLines, visible_lines

ADDRESSED = re.compile(r"[/@]pair", re.IGNORECASE)
_NEVER = re.compile(r"(?!)")

# Everything the fast path allows, and the characters nearest to what it refuses.
_ALLOWED = "abwzAZ09 ,;?/()'\"=+%-.@"
_NEAR = "#>*_`~[]!<&|:\\\t"
_WORDS = [
    "/pair",
    "@pair",
    "status",
    "approve",
    "www.",
    "WWW.",
    "Www.",
    "w.",
    "x@y.z",
    " ",
    "  ",
    "1.",
    "-",
    "==",
    "a",
]


def _slow(
    text: str, addressed: re.Pattern[str] | None, monkeypatch: pytest.MonkeyPatch
) -> VisibleLines:
    with monkeypatch.context() as patched:
        patched.setattr(sanitize, "_PLAIN", _NEVER)
        return visible_lines(text, addressed)


def _line() -> st.SearchStrategy[str]:
    pieces = st.one_of(st.sampled_from(_WORDS), st.text(_ALLOWED, max_size=6))
    return st.lists(pieces, max_size=6).map("".join)


_TEXT = st.lists(_line(), max_size=8).map("\n".join)


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.booleans())
def test_plain_text_reads_as_the_parse_reads_it(text: str, filtered: bool) -> None:
    addressed = ADDRESSED if filtered else None
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert visible_lines(text, addressed) == _slow(text, addressed, monkeypatch)


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.sampled_from(_NEAR), st.integers(0, 80))
def test_text_with_markup_takes_the_parse(text: str, char: str, at: int) -> None:
    """One character the fast path refuses, anywhere: both readings still agree (the fast path
    declined it, or it reads the same)."""
    text = text[:at] + char + text[at:]
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert visible_lines(text, ADDRESSED) == _slow(text, ADDRESSED, monkeypatch)


@pytest.mark.parametrize(
    "text",
    [
        "/pair status",
        "@pair approve",
        "Thanks!\n\n/pair status",
        '/pair answer yes\nit is "quoted" and it\'s (fine)',
        "/pair status\n===",
        "/pair status\n---",
        "    /pair status",
        "/pair status  ",
        "1. /pair status",
        "see www.example.com\n/pair status",
        "mail a@b.co\n/pair status",
        "/pair status\n\n\nok",
        "/pair implement until: merged",
    ],
)
def test_examples_read_as_the_parse_reads_them(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for addressed in (ADDRESSED, None):
        assert visible_lines(text, addressed) == _slow(text, addressed, monkeypatch)


def test_the_fast_path_takes_a_short_command_and_refuses_markup() -> None:
    assert sanitize._PLAIN.fullmatch("/pair status") is not None
    assert sanitize._PLAIN.fullmatch("Thanks\n\n/pair approve") is not None
    refused = ("/pair status\n---", "# /pair status", "/pair status  ", " /pair status")
    refused += ("a@b.co", "www.example.com", "http://x", "/pair *status*", "1. /pair")
    for text in refused:
        assert sanitize._PLAIN.fullmatch(text) is None, text
    assert sanitize._PLAIN.fullmatch("\n".join(["/pair status"] * 65)) is None
