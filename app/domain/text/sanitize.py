"""What a reader of a comment or card sees, and nothing else. Pure; linear in the input.

Hidden content is how a prompt injection hides in plain sight: an HTML comment renders as
nothing, an attribute (`data-x="…"`, `title="…"`), an image's alt text or a link's title is
never shown in the text, zero-width characters are invisible and a bidi override displays its
run reversed. The agent, and the command grammar, only ever get what a person reading the card
would have seen. The passes live one job a module beside this one: `invisible` (the cap and
the characters nobody sees), `html_scan` (cmark-gfm's HTML, tokenized, and which elements hide
or quote), `reader_view` (that HTML as a reader's text) and `prose_lines` (which source lines
are top-level prose).

    (first, `app.domain.text.invisible`: the text capped at MAX_CHARS, invisible characters,
    bidi runs and HTML comments removed)
    reader_text(text)      Markdown read by a real parser (cmark-gfm, GitHub's own renderer:
                           CommonMark + GFM tables, task lists, strikethrough, autolinks) and
                           its raw HTML by a linear tokenizer, rendered back as the text a
                           reader sees: no HTML comments, no tags or attributes, no content of
                           hidden elements (`hidden`, `<script>`, a style that hides text:
                           `app.domain.text.css_hide`), no invisible character however it is
                           spelled (entities, %XX in link targets), no image
                           alt text, no link titles; links keep their target, code its text
    html_paragraphs(html)  the top-level paragraphs of an HTML fragment (an Azure Boards
                           work-item comment) as escaped text: quoted, code, list, table and
                           hidden text left out
    visible_lines(text)    the same reading, line by line in the source's numbering, with which
                           lines are top-level prose (a paragraph or raw HTML at the top level,
                           outside quotes, code and hidden elements): where a command may stand
    reads_any(text, addressed)
                           whether visible_lines(text, addressed) reads any line: the cheap
                           "is this text addressed at all?" answer, exact
    visible_code(text)     the source's lines with only those of code blocks a reader sees
                           kept (outside quotes, HTML comments and hidden elements), the others
                           blank: where a scope decision's ```json block may stand

Cost: every step is one pass over the text (cmark-gfm is linear on the inputs that make regex
loops quadratic: nested comments, deep lists, long lines, nested brackets and emphasis;
`benchmarks/hostile_comment.py` measures it), and what Python does with the rendered HTML is
bounded by element budgets (MAX_ELEMENTS: an agent is told the text was withheld;
MAX_BLOCK_ELEMENTS / MAX_BLOCKS: such a block holds no command), after hard caps checked before
any parsing: a text with more than MAX_DELIMITERS `*` and `_`, or quotes nested deeper than
MAX_QUOTE_DEPTH, is withheld from an agent and holds no command (cmark-gfm's emphasis pass is
its slowest per character; deep quotes multiply its output), and text longer
than MAX_CHARS (a GitHub comment or issue body holds at most 65,536 characters) is cut at the
last line break before the cap and the rest is never parsed. `reader_text` says so in a last line;
the command grammar simply never sees the rest, and a line is never cut in the middle (so the
cut cannot turn `/pair approve if CI passes` into `/pair approve`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from app.domain.text.html_scan import Stack, render, tokens
from app.domain.text.invisible import (
    LINE_END,
    MAX_CHARS,
    cap,
    strip_invisible,
    strip_percent_encoded,
)
from app.domain.text.prose_lines import LineReader
from app.domain.text.reader_view import Reader

# Rendered HTML with more elements than these is too complex to read in bounded time: a
# 64 KB text of ordinary Markdown renders to about 3,000; nested emphasis or `> > > …` to tens
# of thousands. The whole text (for an agent) or one top-level block (for a command).
MAX_ELEMENTS: Final = 8_192
MAX_BLOCK_ELEMENTS: Final = 2_048
MAX_BLOCKS: Final = 8_192
# Emphasis delimiters cost cmark-gfm the most per character (`*_*_…` over 64 KB takes it ~70 ms
# where plain text takes 1): a text with more `*` and `_` than this is too complex to read,
# checked before it is parsed. 64 KB of snake_case code holds a few thousand.
MAX_DELIMITERS: Final = 16_384
MAX_QUOTE_DEPTH: Final = 64
# Unambiguous (each repetition starts at its own `>`), so a near miss costs no backtracking.
_DEEP_QUOTE = re.compile(rf"^[ ]{{0,3}}(?:>[ ]{{0,3}}){{{MAX_QUOTE_DEPTH + 1}}}", re.MULTILINE)
# The source's own `data-sourcepos` attributes are renamed, so only cmark's place a block.
_SOURCEPOS = re.compile(r"data-sourcepos", re.IGNORECASE)
# Elements whose text is still prose in a work-item comment; any other element quiets its text.
_PROSE_TAGS: Final = frozenset(
    {"p", "div", "span", "font", "b", "strong", "i", "em", "u", "s", "strike", "del", "ins",
     "a", "br", "small", "big", "sub", "sup", "mark", "abbr", "body", "html"}
)  # fmt: skip
_PARAGRAPH_BREAKS: Final = frozenset({"p", "div", "br", "li", "tr", "blockquote", "pre", "hr"})
_MD_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
_RAW_TAG = re.compile(r"<[A-Za-z/]")
_CODE_BLOCK = re.compile(r"(\d+):\d+-(\d+):\d+")
_BLOCK_START = re.compile(r'<[a-z0-9]+ data-sourcepos="(\d+):(\d+)-(\d+):(\d+)"')


def reader_text(text: str, *, styles: bool = True) -> str:
    """What a reader of `text` (Markdown with raw HTML) sees, as plain Markdown-like text.

    `styles=False` reads it as GitHub renders it (no inline styles); by default a style that
    hides text hides it, as on Azure DevOps. The final text goes through the invisible pass
    again, %XX escapes included: nothing decoding produced survives (`invisible`'s docstring).
    """
    source, dropped = _prepare(text)
    if _too_many_delimiters(source):
        return (
            f"[pairbot: withheld, this text holds more than {MAX_DELIMITERS} emphasis "
            f"delimiters (* and _) or quotes nested over {MAX_QUOTE_DEPTH} deep; too complex "
            "to read safely]"
        )
    markup = render(source)
    if markup.count("<") > MAX_ELEMENTS:
        return (
            f"[pairbot: withheld, this text renders to more than {MAX_ELEMENTS} HTML elements; "
            "too complex to read safely]"
        )
    body = "\n".join(Reader(styles=styles).read(markup))
    body = strip_percent_encoded(strip_invisible(body)).strip("\n")
    if dropped:
        body += f"\n[pairbot: {dropped} more characters over the {MAX_CHARS}-character cap]"
    return body


def html_paragraphs(markup: str) -> str:
    """The top-level paragraphs of an HTML fragment (a work-item comment), as escaped text.

    Only text a reader sees as plain prose counts: text inside `<blockquote>`, `<pre>`, inline
    code (`<code>`, `<kbd>`, …), lists, tables or a hidden element (`hidden`, a hiding style)
    is left out. Each `<p>` / `<div>` / `<br>` ends a line and paragraphs are separated by a
    blank line; every ASCII punctuation character is backslash-escaped, so reading the result
    as Markdown (the command grammar does) shows exactly this text and nothing can turn into
    markup. Linear, after the same cap as everything else.
    """
    capped, _ = cap(markup)
    stack = Stack()
    lines: list[str] = []
    current = ""
    for tok in tokens(capped):
        if tok.kind == "start":
            element = stack.push(tok)
            if tok.tag in _PARAGRAPH_BREAKS:
                lines.append(current)
                current = ""
            if tok.void:
                continue
            if tok.tag not in _PROSE_TAGS and not element.hidden:
                element.quiet = True  # a list, a table, code, a quote: never a command
        elif tok.kind == "end":
            stack.pop(tok.tag)
            if tok.tag in _PARAGRAPH_BREAKS:
                lines.append(current)
                current = ""
        elif tok.kind == "text" and not stack.hidden and not stack.quiet:
            current += " ".join(tok.text.split("\n"))
    lines.append(current)
    # Decoded pieces (html_scan.Tok) joined: now their bidi runs can be dropped whole.
    lines = [strip_invisible(line) for line in lines]
    text = "\n".join(_MD_PUNCTUATION.sub(r"\\\g<0>", " ".join(line.split())) for line in lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


@dataclass(frozen=True)
class VisibleLines:
    """One entry per source line (CRLF, CR and LF each end one): the text a reader sees on it
    and whether it is top-level prose. Lines past the cap are empty and never prose."""

    lines: list[str]
    prose: list[bool]


def visible_lines(
    text: str, addressed: re.Pattern[str] | None = None, *, styles: bool = True
) -> VisibleLines:
    """The visible text of each source line and which lines are top-level prose.

    `styles` as for `reader_text`. Every piece is decoded, then stripped (`html_scan.Tok`).

    With `addressed`, only the top-level blocks holding a line that matches it (after invisible
    characters and bidi runs are gone) are read; the other lines come back empty, never prose.
    A block with more than MAX_BLOCK_ELEMENTS elements, or a text of more than MAX_BLOCKS
    blocks, is too complex to read: none of it is prose.
    """
    normal = LINE_END.sub("\n", text)
    total = normal.count("\n") + 1
    lines = [""] * total
    prose = [False] * total
    quiet = [False] * total
    source = _reading_source(normal)
    source_lines = source.split("\n")
    wanted = None if addressed is None else _lines_matching(addressed, source)
    if wanted == []:
        return VisibleLines(lines, prose)
    if _PLAIN.fullmatch(source) is not None:
        return _plain_lines(source_lines, wanted, total)
    if _too_many_delimiters(source):
        return VisibleLines(lines, prose)
    markup = render(source)
    # Raw HTML can open an element in one block that hides or quotes the next blocks
    # (`<div hidden>`, a blank line, a paragraph): then every block is scanned for its tags,
    # within the same element budget, so each block is read inside what encloses it.
    raw_html = _RAW_TAG.search(source) is not None
    if raw_html and markup.count("<") > MAX_ELEMENTS:
        return VisibleLines(lines, prose)
    stack = Stack(styles=styles)
    for first, end, segment in _segments(markup, len(source_lines)):
        if wanted is not None and not _any_between(wanted, first, end):
            if raw_html:
                _follow(stack, segment)
            continue
        if segment.count("<") > MAX_BLOCK_ELEMENTS:
            if raw_html:
                _follow(stack, segment)
            continue
        for line, piece, plain in LineReader(source_lines, first, stack).read(segment):
            if line < total:
                lines[line] += piece
                prose[line] = prose[line] or plain
                quiet[line] = quiet[line] or not plain
    # Decoded pieces (html_scan.Tok) joined: now their bidi runs can be dropped whole.
    lines = [strip_invisible(line) for line in lines]
    return VisibleLines(
        lines,
        [p and not q and bool(t.strip()) for p, q, t in zip(prose, quiet, lines, strict=True)],
    )


def reads_any(text: str, addressed: re.Pattern[str]) -> bool:
    """Whether `visible_lines(text, addressed)` reads any line at all: False means every line
    comes back empty and never prose, decided without reading (the same normalisation, the
    same search). Pure."""
    if (
        text.isascii()
        and len(text) <= MAX_CHARS
        and "\r" not in text
        and _SOURCEPOS.search(text) is None
    ):
        # Most comments, read as they stand, without a copy: each step of the normalisation
        # keeps such a text as it is (nothing invisible in ASCII, no CR, under the cap, no
        # `data-sourcepos` to rename).
        return addressed.search(text) is not None
    return addressed.search(_reading_source(LINE_END.sub("\n", text))) is not None


def _reading_source(normal: str) -> str:
    """What `visible_lines` reads of a text whose line ends are `\\n`: capped, invisible
    characters and bidi runs gone, the source's own `data-sourcepos` renamed."""
    return _SOURCEPOS.sub("data-x-", _prepare(normal)[0])


def visible_code(text: str) -> list[str] | None:
    """The source's lines (CRLF, CR and LF each end one), each blank unless it belongs to a
    code block a reader sees outside a quote; None when the text is too complex to read.

    A code block is seen where cmark-gfm renders one (its `data-sourcepos` names its source
    lines) outside hidden elements: one inside an HTML comment, a `hidden` or hiding-styled
    element, or spelled with entities (`&#96;&#96;&#96;json`) is no code block, so its lines come
    back blank. Invisible characters are gone. Not capped at MAX_CHARS (cmark is linear and the
    element budget holds), so a long decision keeps its line numbers.
    """
    source = _SOURCEPOS.sub("data-x-", strip_invisible(LINE_END.sub("\n", text)))
    source_lines = source.split("\n")
    kept = [""] * len(source_lines)
    if "```" not in source and "~~~" not in source:
        return kept
    if _too_many_delimiters(source):
        return None
    markup = render(source)
    if markup.count("<") > MAX_ELEMENTS:
        return None
    stack = Stack()
    for tok in tokens(markup):
        if tok.kind == "start":
            quoted = stack.quiet
            element = stack.push(tok)
            where = _CODE_BLOCK.fullmatch(tok.attrs.get("data-sourcepos", "") or "-")
            if tok.tag == "pre" and where and not element.hidden and not quoted:
                first, last = int(where.group(1)) - 1, int(where.group(2)) - 1
                kept[first : last + 1] = source_lines[first : last + 1]
        elif tok.kind == "end":
            stack.pop(tok.tag)
    return kept


# Text in which Markdown and HTML can make nothing: ASCII letters, digits, spaces and the
# punctuation below, every line starting with a letter, `/` or `@` (so none opens a heading,
# list, quote, fence, table, HTML block or setext underline, or continues one), no
# line starting or ending with a space (indented code, hard breaks), `@` only first on a line
# (no e-mail autolink), no `:` (no URL autolink) and no `.` after a `w` (no `www.` one), at
# most `_PLAIN_LINES` lines. Read as it stands — a short `/pair status` in 3 µs instead of
# the 40 µs of a parse; tests/domain/text/test_sanitize_plain.py checks it against the parse.
_PLAIN_LINES: Final = 64
_PLAIN = re.compile(
    r"(?:(?:[A-Za-z/@](?:[A-Za-z0-9 ,;?/()'\"=+%-]|\.(?<!w\.))*(?<! ))?\n){0,63}"
    r"(?:[A-Za-z/@](?:[A-Za-z0-9 ,;?/()'\"=+%-]|\.(?<!w\.))*(?<! ))?"
)


def _plain_lines(source_lines: list[str], wanted: list[int] | None, total: int) -> VisibleLines:
    """`visible_lines` of a text `_PLAIN` matches: each paragraph (a run of non-blank lines)
    reads as written, and is prose; with `wanted`, only the paragraphs holding a wanted line."""
    lines = [""] * total
    prose = [False] * total
    start = 0
    for index in range(len(source_lines) + 1):
        if index < len(source_lines) and source_lines[index]:
            continue
        if start < index and (wanted is None or _any_between(wanted, start, index)):
            for line in range(start, index):
                lines[line] = source_lines[line]
                prose[line] = True
        start = index + 1
    return VisibleLines(lines, prose)


def _too_many_delimiters(source: str) -> bool:
    """Too many emphasis delimiters, or quotes nested deeper than MAX_QUOTE_DEPTH (each level
    costs cmark-gfm a block and its HTML a line: 32,000 levels render to 2 MB)."""
    if source.count("*") + source.count("_") > MAX_DELIMITERS:
        return True
    return _DEEP_QUOTE.search(source) is not None


def _lines_matching(pattern: re.Pattern[str], text: str) -> list[int]:
    """The 0-based numbers of the lines of `text` that `pattern` finds something on."""
    found: list[int] = []
    line, counted = 0, 0
    for match in pattern.finditer(text):
        line += text.count("\n", counted, match.start())
        counted = match.start()
        if not found or found[-1] != line:
            found.append(line)
    return found


def _follow(stack: Stack, segment: str) -> None:
    """Open and close elements as a segment does, reading none of its text."""
    for tok in tokens(segment):
        if tok.kind == "start":
            stack.push(tok)
        elif tok.kind == "end":
            stack.pop(tok.tag)


def _any_between(ordered: list[int], first: int, end: int) -> bool:
    at = bisect.bisect_left(ordered, first)
    return at < len(ordered) and ordered[at] < end


def _segments(markup: str, total: int) -> Iterator[tuple[int, int, str]]:
    """The rendered HTML cut before each top-level block: (first source line, end, HTML).

    cmark writes blocks in source order, each with `data-sourcepos`; a block that starts after
    the end of the last top-level one is top-level itself. Raw HTML between two blocks belongs
    to the segment before it.
    """
    if markup.count("data-sourcepos") > MAX_BLOCKS:
        return
    starts: list[tuple[int, int]] = []  # (offset in markup, first source line)
    last_end = (0, 0)
    for match in _BLOCK_START.finditer(markup):
        begin = (int(match.group(1)), int(match.group(2)))
        if begin > last_end:
            starts.append((match.start(), begin[0] - 1))
            last_end = (int(match.group(3)), int(match.group(4)))
    if not starts or starts[0][0] > 0:
        starts.insert(0, (0, 0))
    for index, (offset, first) in enumerate(starts):
        following = starts[index + 1] if index + 1 < len(starts) else (len(markup), total)
        yield first, following[1], markup[offset : following[0]]


# -- the passes -----------------------------------------------------------------------------------


def _prepare(text: str) -> tuple[str, int]:
    capped, dropped = cap(LINE_END.sub("\n", text))
    return strip_invisible(capped), dropped
