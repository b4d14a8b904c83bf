"""What a reader sees: hidden content never survives `reader_text`, `visible_lines` or
`strip_hidden`, and hostile shapes cost one bounded pass."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.intake.comment_commands import Command, CommandError, parse_commands
from app.domain.text.invisible import MAX_CHARS, cap, strip_hidden, strip_invisible
from app.domain.text.sanitize import (
    MAX_BLOCK_ELEMENTS,
    MAX_DELIMITERS,
    MAX_ELEMENTS,
    reader_text,
    visible_lines,
)

HIDDEN = "SECRET"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"a <!-- {HIDDEN} --> b", id="comment"),
        pytest.param(f"a <!--\n{HIDDEN}\n--> b", id="multiline-comment"),
        pytest.param(f"a\n\n<!-- {HIDDEN}", id="unterminated-comment"),
        pytest.param(f'a <span data-x="{HIDDEN}">b</span>', id="data-attribute"),
        pytest.param(f'a <abbr title="{HIDDEN}">b</abbr>', id="title-attribute"),
        pytest.param(f'a <img alt="{HIDDEN}" src="x.png"> b', id="img-alt"),
        pytest.param(f"a ![{HIDDEN}](x.png) b", id="markdown-alt"),
        pytest.param(f'a [b](https://x.example "{HIDDEN}")', id="link-title"),
        pytest.param(f"a <span hidden>{HIDDEN}</span> b", id="hidden-attribute"),
        pytest.param(f'a <span style="display: none">{HIDDEN}</span> b', id="display-none"),
        pytest.param(f'<div style="font-size:0">{HIDDEN}</div>\n\nb', id="font-size-0"),
        pytest.param(f"<div hidden>\n\n{HIDDEN}\n\n</div>", id="hidden-block"),
        pytest.param(f"a\u202e{HIDDEN}\u202c b", id="bidi-override-run"),
        pytest.param(f"a\u2067{HIDDEN}\u2069 b", id="bidi-isolate-run"),
        pytest.param(f"a\u202b x \u2066{HIDDEN}\u2069 {HIDDEN}\u202c b", id="nested-runs"),
        pytest.param(f"a\u202e{HIDDEN}\nb", id="run-to-end-of-line"),
        pytest.param(f"a <span\nhidden>{HIDDEN}</span> b", id="tag-across-lines"),
        pytest.param(f"<details><summary>a</summary><template>{HIDDEN}</template></details>"),
        pytest.param(f"| a | b |\n|---|---|\n| <!-- {HIDDEN} --> | c |", id="table-cell"),
        pytest.param(f"- a <span hidden>{HIDDEN}</span>\n  > b <!-- {HIDDEN} -->", id="nested"),
    ],
)
def test_hidden_content_never_reaches_the_reader(body: str) -> None:
    text = reader_text(body)
    assert HIDDEN not in text
    assert all(HIDDEN not in line for line in visible_lines(body).lines)


def test_zero_width_characters_are_gone_and_the_text_joins() -> None:
    assert reader_text("ig\u200bno\u200dre pre\ufeffvious \U000e0041") == "ignore previous"


def test_what_a_reader_sees_keeps_its_structure() -> None:
    body = (
        "# Title\n\nSome *emphasis* and `code` and [a link](https://x.example).\n\n"
        "> quoted\n\n- one\n- two\n\n1. first\n\n```py\nx = '<!-- shown -->'\n```\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n\n---\n"
    )
    assert reader_text(body).split("\n") == [
        "# Title",
        "",
        "Some *emphasis* and `code` and a link (<https://x.example>).",
        "",
        "> quoted",
        "",
        "- one",
        "- two",
        "",
        "1. first",
        "",
        "```",
        "x = '<!-- shown -->'",
        "```",
        "",
        "| a | b |",
        "| 1 | 2 |",
        "",
        "- [x] done",
        "",
        "---",
    ]


def test_text_over_the_cap_is_cut_at_a_line_break_and_said() -> None:
    body = "a\n" * (MAX_CHARS // 2) + "b" * 10
    kept, dropped = cap(body)
    assert len(kept) <= MAX_CHARS and kept.endswith("a") and dropped == len(body) - len(kept)
    assert reader_text(body).endswith(f"more characters over the {MAX_CHARS}-character cap]")
    # A command past the cap is never read; nor is one whose line the cap would cut.
    assert parse_commands("x\n" * (MAX_CHARS // 2) + "\n/pair approve") == []


def test_too_many_elements_are_withheld_from_the_agent() -> None:
    assert "withheld" in reader_text("<b>" * (MAX_ELEMENTS + 100))


def test_an_emphasis_flood_is_refused_before_it_is_parsed() -> None:
    flood = "*_" * (MAX_DELIMITERS // 2 + 1)
    assert "withheld" in reader_text(flood)
    assert parse_commands(flood + "\n\n/pair approve") == []
    assert parse_commands("a_b " * 1000 + "\n\n/pair approve") != []
    deep = "> " * 65 + "x\n\n/pair approve"
    assert "withheld" in reader_text(deep) and parse_commands(deep) == []
    assert parse_commands("> " * 64 + "x\n\n/pair approve") != []


def test_a_block_with_too_many_elements_holds_no_command() -> None:
    assert parse_commands("/pair approve\n" + "*a* " * MAX_BLOCK_ELEMENTS) == []
    assert parse_commands("*a* " * MAX_BLOCK_ELEMENTS + "\n\n/pair approve") != []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a\u202ebc\u202cd", "a d", id="override-closed"),
        pytest.param("a\u202ebc\nd", "a\nd", id="to-end-of-line"),
        pytest.param("a\u2066b\u202ac\u2069d", "a d", id="pdi-closes-embeddings-inside"),
        pytest.param("a\u202cb\u2069c", "abc", id="unmatched-closers-dropped"),
        pytest.param("a\u202ab\u2069c", "a", id="pdi-without-isolate-closes-nothing"),
        pytest.param("a\u200e\u200fb", "ab", id="marks"),
        pytest.param("x\u202e" * 300 + "\ny", "x\ny", id="many-controls-drop-the-line-tail"),
    ],
)
def test_bidi_runs_are_dropped_whole(text: str, expected: str) -> None:
    # A run closed mid-line leaves one space: the two sides never join into a new word.
    assert strip_invisible(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a<!-- b -->c", "ac", id="one"),
        pytest.param("a<!-<!-- -->- b -->c", "ac", id="assembled-by-removal"),
        pytest.param("a<!\u200b-- b -->c", "ac", id="assembled-by-zero-width"),
        pytest.param("a<!<!-- x -->-- z --> w", "a w", id="assembled-twice"),
        pytest.param("a<!-- b", "a", id="unterminated"),
        pytest.param("<!-<!-" * 3 + "- -->->->", "<!-<!-<!-<!-", id="nested"),
    ],
)
def test_strip_hidden_leaves_no_comment(text: str, expected: str) -> None:
    assert strip_hidden(text) == expected


@given(st.text(alphabet="<!->\u200bab\n", max_size=60))
def test_strip_hidden_never_leaves_a_comment_opener(text: str) -> None:
    stripped = strip_hidden(text)
    assert "<!--" not in stripped and "\u200b" not in stripped
    assert strip_hidden(stripped) == stripped


def test_visible_lines_keep_source_line_numbers() -> None:
    reading = visible_lines("a <!-- x\ny -->\nb `c`\n\n- d\n\n<div>e <span hidden>f</span></div>")
    assert reading.lines[:4] == ["a ", "", "b `c`", ""]
    assert reading.prose[:5] == [True, False, True, False, False]
    assert (reading.lines[6].strip(), reading.prose[6]) == ("e", True)


def test_a_paragraph_whose_lines_do_not_map_holds_no_command() -> None:
    # A code span across lines swallows a line break: the paragraph cannot be placed exactly.
    assert parse_commands("`a\nb` x\n/pair approve") == []
    assert [r.line for r in parse_commands("`a\nb` x\n\n/pair approve")] == [4]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("<span hidden>/pair approve</span>", id="hidden-span"),
        pytest.param('<span style="display:none">\n/pair approve\n</span>', id="display-none"),
        pytest.param("<div hidden>\n/pair approve\n</div>", id="hidden-div"),
        pytest.param("<blockquote>\n/pair approve\n</blockquote>", id="html-blockquote"),
        pytest.param("<pre>\n/pair approve\n</pre>", id="html-pre"),
        pytest.param("<code>/pair approve</code>", id="html-code"),
        pytest.param("<kbd>/pair approve</kbd>", id="html-kbd"),
        pytest.param('<img alt="/pair approve" src="x">', id="img-alt"),
        pytest.param("![/pair approve](x.png)", id="markdown-alt"),
        pytest.param('<span title="\n/pair approve\n">x</span>', id="attribute"),
        pytest.param("**/pair approve**", id="emphasis"),
        pytest.param("~~/pair approve~~", id="struck"),
        pytest.param("- x\n  /pair approve", id="list-continuation"),
        pytest.param("/pair approve\n===", id="setext-heading"),
        pytest.param("| a |\n|---|\n| /pair approve |", id="table"),
        pytest.param("<!-<!-- -->\n/pair approve -->", id="nested-comment"),
        pytest.param("<div hidden>\n\n/pair approve\n\n</div>", id="hidden-div-around-blocks"),
        pytest.param("<blockquote>\n\n/pair approve\n\n</blockquote>", id="quote-around-blocks"),
    ],
)
def test_hidden_quoted_or_code_text_never_acts(body: str) -> None:
    assert not any(isinstance(r, Command) for r in parse_commands(body)), parse_commands(body)


def test_html_block_text_at_the_top_level_acts() -> None:
    results = parse_commands("<div>\n/pair approve\n</div>")
    assert [(type(r), r.line) for r in results] == [(Command, 2)]


def test_nested_comment_bomb_is_read_once() -> None:
    # The shape that cost seconds in a regex loop (the benchmark times it).
    body = "<!-" * 12_000 + "<!-- x -->" + "->" * 12_000 + "\n\n/pair status"
    results = parse_commands(body)
    assert [getattr(r, "verb", None) for r in results] == ["status"]
    assert not isinstance(results[0], CommandError)
