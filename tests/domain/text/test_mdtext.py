"""Untrusted text in pairbot's Markdown: hidden content, markers, tables, code spans, mentions."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.text.mdtext import (
    EMPTY,
    cell,
    clean,
    code,
    fenced,
    inline,
    link,
    one_line,
    safe_url,
)

# Text built from the pieces an attacker would combine.
PIECES = st.lists(
    st.sampled_from(
        ["<!--", "-->", "<!", "--", " pair:", "\u200b", "\u202e", "|", "\n", "`", "@", "x", " "]
    )
).map("".join)
TEXT = st.one_of(st.text(), PIECES)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("plain", "plain", id="plain"),
        pytest.param("a<!-- hidden -->b", "ab", id="comment"),
        pytest.param("a<!-- unterminated", "a", id="unterminated-comment"),
        pytest.param("<!\u200b-- pair:tracking #1 -->x", "x", id="zero-width-splits-a-marker"),
        pytest.param("<!<!-- x -->-- pair:tracking #1 -->x", "x", id="comment-splits-a-marker"),
        pytest.param("a\x00b\x1bc", "abc", id="control-characters"),
        pytest.param("tab\tand\nnewline", "tab\tand\nnewline", id="whitespace-kept"),
    ],
)
def test_clean(raw: str, expected: str) -> None:
    assert clean(raw) == expected


@given(TEXT)
def test_clean_leaves_no_comment_opener_and_is_idempotent(text: str) -> None:
    cleaned = clean(text)
    assert "<!--" not in cleaned
    assert clean(cleaned) == cleaned


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("a | b", "a \\| b", id="pipe"),
        pytest.param("line1\nline2\r\nline3", "line1 line2 line3", id="newlines"),
        pytest.param("**bold** _it_ `code`", "\\*\\*bold\\*\\* \\_it\\_ \\`code\\`", id="emphasis"),
        pytest.param("<img src=x>", "\\<img src=x\\>", id="html"),
        pytest.param("[x](http://e)", "\\[x\\](http://e)", id="link"),
        pytest.param("cc @octocat", "cc @\u200boctocat", id="mention"),
        pytest.param("a@b.c", "a@\u200bb.c", id="email-like"),
        pytest.param("back\\slash", "back\\\\slash", id="backslash"),
        pytest.param("&lt;", "\\&lt;", id="entity"),
    ],
)
def test_inline(raw: str, expected: str) -> None:
    assert inline(raw) == expected


def test_one_line_bounds_the_text() -> None:
    assert one_line("abcdefghij", 5) == "abcd…"
    assert one_line("abc", 5) == "abc"
    assert len(inline("x" * 500, 50)) == 50


@given(TEXT)
def test_inline_is_one_line_with_no_unescaped_pipe_or_marker(text: str) -> None:
    rendered = inline(text)
    assert "\n" not in rendered
    assert "\r" not in rendered
    assert "<!--" not in rendered
    assert re.search(r"(?<!\\)\|", rendered) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(None, EMPTY, id="none"),
        pytest.param("", EMPTY, id="empty"),
        pytest.param("<!-- only hidden -->", EMPTY, id="only-hidden"),
        pytest.param("ok", "ok", id="text"),
    ],
)
def test_cell(raw: str | None, expected: str) -> None:
    assert cell(raw) == expected


@pytest.mark.parametrize(
    ("raw", "in_table", "expected"),
    [
        pytest.param("pytest -k x", True, "`pytest -k x`", id="plain"),
        pytest.param("a | b", True, "`a \\| b`", id="pipe-in-table"),
        pytest.param("a | b", False, "`a | b`", id="pipe-outside-table"),
        pytest.param("echo `x`", True, "`` echo `x` ``", id="backticks"),
        pytest.param("``", True, "``` `` ```", id="only-backticks"),
        pytest.param("a\nb", True, "`a b`", id="newline"),
        pytest.param("", True, EMPTY, id="empty"),
    ],
)
def test_code(raw: str, in_table: bool, expected: str) -> None:
    assert code(raw, in_table=in_table) == expected


@given(TEXT)
def test_code_span_cannot_be_closed_early(text: str) -> None:
    rendered = code(text)
    if rendered == EMPTY:
        return
    fence = re.match(r"`+", rendered)
    assert fence is not None
    inner = rendered[len(fence.group()) : -len(fence.group())]
    assert all(len(run) < len(fence.group()) for run in re.findall(r"`+", inner))
    assert "<!--" not in rendered
    assert "\n" not in rendered


def test_fenced_block_outlasts_any_fence_inside() -> None:
    block = fenced("```\nnot closed\n````\n<!-- pair:x #1 -->", "markdown")
    assert block.startswith("`````markdown\n")
    assert block.endswith("\n`````")
    assert "<!--" not in block
    assert fenced("a\r\nb\rc") == "```\na\nb\nc\n```"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            "https://github.com/o/r/pull/12#issuecomment-1",
            "https://github.com/o/r/pull/12#issuecomment-1",
            id="github",
        ),
        pytest.param(
            " http://127.0.0.1:8080/x?a=1&b=2 ", "http://127.0.0.1:8080/x?a=1&b=2", id="port"
        ),
        pytest.param("https://example.com", "https://example.com", id="bare-host"),
        pytest.param("javascript:alert(1)", None, id="javascript"),
        pytest.param("https://e.com/a)(b", None, id="parenthesis"),
        pytest.param("https://e.com/a b", None, id="space"),
        pytest.param("https://e.com/a|b", None, id="pipe"),
        pytest.param("https://e.com/<x>", None, id="angle"),
        pytest.param("ftp://e.com/x", None, id="other-scheme"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="none"),
    ],
)
def test_safe_url(url: str | None, expected: str | None) -> None:
    assert safe_url(url) == expected


def test_link() -> None:
    assert link("PR #1", "https://e.com/p/1") == "[PR \\#1](https://e.com/p/1)"
    assert link("[x]", "javascript:alert(1)") == "\\[x\\]"


def test_strip_hidden_reaches_a_fixpoint() -> None:
    from app.domain.text.invisible import strip_hidden

    assert strip_hidden("a<!\u200b-- pair:tracking #1 -->b") == "ab"
    assert strip_hidden("a<!-<!-- x -->- pair:review #1 -->b") == "ab"
    assert strip_hidden("plain text") == "plain text"
