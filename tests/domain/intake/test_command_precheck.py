"""The command grammar's pre-check never turns away a comment the full reading finds a command in.

`parse_commands` answers [] without reading a comment when `may_be_addressed` says no; these
hold that answer against the full reading (`_parse_addressed`, what runs past the pre-check) on
tricky comments: hidden characters inside the trigger (zero-width, variation selectors, tag
characters, bidi runs and controls), HTML comments, code fences, quotes, entities, look-alikes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.intake.comment_commands import (
    Command,
    CommandError,
    _addressed,
    _command_start,
    _parse_addressed,
    may_be_addressed,
    parse_commands,
)

SLUG = "pairbot"


def _full(body: str, trigger: str = "pair") -> list[Command | CommandError]:
    start, addressed = _command_start(trigger, SLUG), _addressed(trigger, SLUG)
    return _parse_addressed(body, trigger, start, addressed)


def _says_maybe(body: str, trigger: str = "pair") -> bool:
    return may_be_addressed(body, _addressed(trigger, SLUG))


# Pieces a comment is built of: the trigger's letters apart, everything that can hide between
# them or around them, and Markdown / HTML that changes what a line is.
_PIECES = [
    "/", "@", "p", "a", "i", "r", "P", "A", "I", "R", "/pair", "@pair", "@pairbot[bot]", "[bot]",
    " approve", " status", " answer yes", "bot",
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u034f", "\u180e", "\u061c",
    "\u200e", "\u200f", "\ufe0f", "\ufe00", "\U000e0101", "\U000e0070", "\U000e0061",
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
    "\n", "\r\n", "\r", " ", "   ", "    ", "\t", "\u00a0",
    "<!--", "-->", "<!-- x -->", "```", "~~~", "> ", "- ", "1. ", "# ",
    "&#47;", "&#x2F;", "&sol;", "&#64;", "&commat;", "&#x200B;", "&ZeroWidthSpace;",
    "<span>", "</span>", "<div hidden>", "</div>", "<code>", "</code>", "`",
    # fullwidth / and @, the division slash, Cyrillic er and a: look-alikes, never the trigger
    "%2F", "\uff0f", "\uff20", "\u2215", "\u0440", "\u0430",
    "K", "\u212a", "\u017f", "data-sourcepos",
]  # fmt: skip

_HIDDEN = [piece for piece in _PIECES if len(piece) == 1 and not piece.isascii()]


@st.composite
def _spelled(draw: st.DrawFn) -> str:
    """A trigger (or the app's bot login) with hidden characters and pieces between its letters,
    then a verb: what a reader may see as a command."""
    word = draw(st.sampled_from(["/pair", "@pair", "@pairbot[bot]", "/PaIr"]))
    between = st.lists(st.sampled_from([*_HIDDEN, *_HIDDEN, "zz", "<!---->", "&#47;"]), max_size=2)
    spelled = "".join(char + "".join(draw(between)) for char in word)
    return spelled + draw(st.sampled_from([" approve", " status", "", " x"]))


_BODIES = st.lists(st.one_of(st.sampled_from(_PIECES), _spelled()), max_size=16).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_BODIES)
def test_the_pre_check_never_turns_away_a_comment_the_reading_finds_a_command_in(
    body: str,
) -> None:
    if not _says_maybe(body):
        assert _full(body) == []
        assert parse_commands(body, trigger="pair", app_slug=SLUG) == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_the_pre_check_turns_away_holds_no_command(body: str) -> None:
    if not _says_maybe(body):
        assert _full(body) == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("/pa\u200bir approve", id="zero-width space in the trigger"),
        pytest.param("/pa\ufe0fir approve", id="variation selector in the trigger"),
        pytest.param("/pa\U000e0101ir approve", id="supplementary variation selector"),
        pytest.param("/pa\U000e0061ir approve", id="tag character in the trigger"),
        pytest.param("/pa\u00adir approve", id="soft hyphen"),
        pytest.param("/pa\u202eir approve", id="unclosed bidi override"),
        pytest.param("/pa\u202e\u202cir approve", id="an empty bidi run"),
        pytest.param("@pairbot\u2060[bot] status", id="word joiner in the app's bot login"),
        pytest.param("\ufeff/pair status", id="byte order mark first"),
        pytest.param("x\r/pa\u200dir status", id="CR line end"),
    ],
)
def test_hidden_characters_in_the_trigger_pass_the_pre_check(body: str) -> None:
    assert _full(body) != []
    assert _says_maybe(body)
    assert parse_commands(body, trigger="pair", app_slug=SLUG) == _full(body)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("Thanks, that reads well.", id="plain prose"),
        pytest.param("&#47;pair approve", id="entity-encoded slash"),
        pytest.param("\uff0fpair approve", id="fullwidth slash"),
        pytest.param("\u2215pair approve", id="division slash"),
        pytest.param("/\u0440air approve", id="Cyrillic look-alike"),
        pytest.param("%2Fpair approve", id="percent-encoded slash"),
        pytest.param("<!-- x -->\n```\nnothing\n```", id="comment and fence, no trigger"),
        pytest.param("a" * 70_000, id="over the cap"),
    ],
)
def test_comments_addressing_no_one_are_turned_away_and_hold_no_command(body: str) -> None:
    assert not _says_maybe(body)
    assert _full(body) == []


def test_the_pre_check_keeps_refusing_a_bad_trigger() -> None:
    # The trigger is configuration: checked even for a comment that addresses no one.
    with pytest.raises(ValueError, match="trigger"):
        parse_commands("Thanks", trigger="no good")
