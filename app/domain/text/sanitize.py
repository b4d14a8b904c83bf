"""What a reader of a comment or card sees, and nothing else. Pure; linear in the input.

Hidden content is how a prompt injection hides in plain sight: an HTML comment renders as
nothing, an attribute (`data-x="…"`, `title="…"`), an image's alt text or a link's title is
never shown in the text, zero-width characters are invisible and a bidi override displays its
run reversed. The agent, and the command grammar, only ever get what a person reading the card
would have seen.

    cap(text)              at most MAX_CHARS characters, cut at a line break (see below)
    strip_invisible(text)  zero-width / invisible format characters removed and every bidi
                           embedding, override or isolate run dropped whole: from its opening
                           control (U+202A-U+202E, U+2066-U+2068) to its matching PDF / PDI or
                           the end of the line; line breaks are kept
    strip_hidden(text)     strip_invisible, then HTML comments removed in one pass so that no
                           `<!--` is left; for short plain fields (titles, goals) and for text
                           pairbot re-escapes itself
    reader_text(text)      Markdown read by a real parser (cmark-gfm, GitHub's own renderer:
                           CommonMark + GFM tables, task lists, strikethrough, autolinks) and
                           its raw HTML by a linear tokenizer, rendered back as the text a
                           reader sees: no HTML comments, no tags or attributes, no content of
                           hidden elements (`hidden`, `display:none`, `<script>`, …), no image
                           alt text, no link titles; links keep their target, code its text
    html_paragraphs(html)  the top-level paragraphs of an HTML fragment (an Azure Boards
                           work-item comment) as escaped text: quoted, code, list, table and
                           hidden text left out
    visible_lines(text)    the same reading, line by line in the source's numbering, with which
                           lines are top-level prose (a paragraph or raw HTML at the top level,
                           outside quotes, code and hidden elements): where a command may stand

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
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

# cmarkgfm ships no type information; its two entry points are typed where they are used.
import cmarkgfm  # type: ignore[import-untyped]
from cmarkgfm.cmark import Options  # type: ignore[import-untyped]

MAX_CHARS: Final = 65_536
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

_LINE_END = re.compile(r"\r\n?")
# Zero-width and invisible formatting characters: none of them renders as a visible glyph.
# U+E0000-U+E007F are the "tag" characters, invisible ASCII look-alikes used to smuggle text.
_INVISIBLE = re.compile(
    "[\u200b\u200c\u200d\u2060-\u2064\ufeff\u00ad\u034f\u180e\u200e\u200f\u061c"
    "\U000e0000-\U000e007f]"
)
_EMBEDDINGS: Final = frozenset("\u202a\u202b\u202d\u202e")  # closed by PDF U+202C
_ISOLATES: Final = frozenset("\u2066\u2067\u2068")  # closed by PDI U+2069
_PDF: Final = "\u202c"
_PDI: Final = "\u2069"
_BIDI_OR_BREAK = re.compile("[\u202a-\u202e\u2066-\u2069\n]")
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
_BIDI_TO_EOL = re.compile("[\u202a-\u202e\u2066-\u2069][^\n]*")
_MAX_BIDI: Final = 256
_BIDI_CHARS: Final = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

# Elements whose content a reader never sees as text, and styles that hide an element.
_HIDDEN_TAGS: Final = frozenset(
    {"script", "style", "template", "noscript", "head", "title", "object", "iframe", "svg"}
)
_HIDING_STYLE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|font-size\s*:\s*0(?![.\d]*[1-9])"
    r"|color\s*:\s*(?:transparent|white|#fff(?:fff)?\b|rgba\([^)]*,\s*0\s*\))"
    r"|opacity\s*:\s*0(?![.\d]*[1-9])|(?:max-)?(?:height|width)\s*:\s*0(?![.\d]*[1-9])",
    re.IGNORECASE,
)
# Blocks whose text a reader sees as quoted or as code: never prose. Inline code and quotes
# (`<code>`, `<kbd>`, `<q>`, …) keep their text between backticks or quotes instead (see
# _MARKERS), so it cannot start a line either.
_QUOTE_OR_CODE_TAGS: Final = frozenset(
    {"blockquote", "pre", "textarea", "xmp", "listing", "plaintext"}
)
_VOID_TAGS: Final = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr", "param"}
)  # fmt: skip
_INFO_WORD = re.compile(r"[A-Za-z0-9_+.#-]{1,32}")
_TICKS = re.compile(r"`+")
_FENCE_RUNS = re.compile(r"`+|~+")


def cap(text: str) -> tuple[str, int]:
    """`text` cut to at most MAX_CHARS at its last line break, and how many characters went."""
    if len(text) <= MAX_CHARS:
        return text, 0
    cut = text.rfind("\n", 0, MAX_CHARS + 1)
    kept = text[:cut] if cut > 0 else ""
    return kept, len(text) - len(kept)


def strip_invisible(text: str) -> str:
    """Invisible characters removed and every bidi run dropped whole (line breaks kept)."""
    return _drop_bidi_runs(_INVISIBLE.sub("", text))


def strip_hidden(text: str) -> str:
    """`strip_invisible`, then HTML comments removed (an unterminated one runs to the end)
    so that none is left, not even one assembled by removing another (`<!-<!-- -->-`)."""
    return _drop_comments(strip_invisible(_LINE_END.sub("\n", text)))


def reader_text(text: str) -> str:
    """What a reader of `text` (Markdown with raw HTML) sees, as plain Markdown-like text."""
    source, dropped = _prepare(text)
    if _too_many_delimiters(source):
        return (
            f"[pairbot: withheld, this text holds more than {MAX_DELIMITERS} emphasis "
            f"delimiters (* and _) or quotes nested over {MAX_QUOTE_DEPTH} deep; too complex "
            "to read safely]"
        )
    markup = _render(source)
    if markup.count("<") > MAX_ELEMENTS:
        return (
            f"[pairbot: withheld, this text renders to more than {MAX_ELEMENTS} HTML elements; "
            "too complex to read safely]"
        )
    body = "\n".join(_Reader().read(markup)).strip("\n")
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
    stack = _Stack()
    lines: list[str] = []
    current = ""
    for tok in _tokens(capped):
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
            current += " ".join(strip_invisible(tok.text).split("\n"))
    lines.append(current)
    text = "\n".join(_MD_PUNCTUATION.sub(r"\\\g<0>", " ".join(line.split())) for line in lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


@dataclass(frozen=True)
class VisibleLines:
    """One entry per source line (CRLF, CR and LF each end one): the text a reader sees on it
    and whether it is top-level prose. Lines past the cap are empty and never prose."""

    lines: list[str]
    prose: list[bool]


def visible_lines(text: str, addressed: re.Pattern[str] | None = None) -> VisibleLines:
    """The visible text of each source line and which lines are top-level prose.

    With `addressed`, only the top-level blocks holding a line that matches it (after invisible
    characters and bidi runs are gone) are read; the other lines come back empty, never prose.
    A block with more than MAX_BLOCK_ELEMENTS elements, or a text of more than MAX_BLOCKS
    blocks, is too complex to read: none of it is prose.
    """
    normal = _LINE_END.sub("\n", text)
    total = normal.count("\n") + 1
    lines = [""] * total
    prose = [False] * total
    quiet = [False] * total
    source = _SOURCEPOS.sub("data-x-", _prepare(normal)[0])
    source_lines = source.split("\n")
    wanted = None if addressed is None else _lines_matching(addressed, source)
    if wanted == []:
        return VisibleLines(lines, prose)
    if _PLAIN.fullmatch(source) is not None:
        return _plain_lines(source_lines, wanted, total)
    if _too_many_delimiters(source):
        return VisibleLines(lines, prose)
    markup = _render(source)
    # Raw HTML can open an element in one block that hides or quotes the next blocks
    # (`<div hidden>`, a blank line, a paragraph): then every block is scanned for its tags,
    # within the same element budget, so each block is read inside what encloses it.
    raw_html = _RAW_TAG.search(source) is not None
    if raw_html and markup.count("<") > MAX_ELEMENTS:
        return VisibleLines(lines, prose)
    stack = _Stack()
    for first, end, segment in _segments(markup, len(source_lines)):
        if wanted is not None and not _any_between(wanted, first, end):
            if raw_html:
                _follow(stack, segment)
            continue
        if segment.count("<") > MAX_BLOCK_ELEMENTS:
            if raw_html:
                _follow(stack, segment)
            continue
        for line, piece, plain in _LineReader(source_lines, first, stack).read(segment):
            if line < total:
                lines[line] += piece
                prose[line] = prose[line] or plain
                quiet[line] = quiet[line] or not plain
    return VisibleLines(
        lines,
        [p and not q and bool(t.strip()) for p, q, t in zip(prose, quiet, lines, strict=True)],
    )


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


def _follow(stack: _Stack, segment: str) -> None:
    """Open and close elements as a segment does, reading none of its text."""
    for tok in _tokens(segment):
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
    capped, dropped = cap(_LINE_END.sub("\n", text))
    return strip_invisible(capped), dropped


def _drop_bidi_runs(text: str) -> str:
    """Drop each bidi run from its opening control to its matching close or the line's end.

    Unicode TR9: PDF closes the innermost embedding or override, PDI closes the innermost
    isolate and every embedding opened inside it; an unmatched close is dropped alone.
    """
    count = sum(text.count(char) for char in _BIDI_CHARS)
    if count == 0:
        return text
    if count > _MAX_BIDI:
        # So many controls are never honest text: drop each line from its first control on,
        # which removes every run and more, in one pass.
        return _BIDI_TO_EOL.sub("", text)
    out: list[str] = []
    stack: list[str] = []
    isolates = 0
    pos = 0
    for match in _BIDI_OR_BREAK.finditer(text):
        char, at = match.group(), match.start()
        if not stack:
            out.append(text[pos:at])
        pos = at + 1
        if char == "\n":
            stack.clear()
            isolates = 0
            out.append("\n")
        elif char in _EMBEDDINGS:
            stack.append(char)
        elif char in _ISOLATES:
            stack.append(char)
            isolates += 1
        elif char == _PDF:
            if stack and stack[-1] in _EMBEDDINGS:
                stack.pop()
        elif isolates:  # PDI with an open isolate
            while stack.pop() not in _ISOLATES:
                pass
            isolates -= 1
    if not stack:
        out.append(text[pos:])
    return "".join(out)


def _drop_comments(text: str) -> str:
    """Remove `<!-- … -->` (or to the end) in one pass, including comments that removing
    another assembles: the output's last three characters are checked against what follows."""
    out: list[str] = []
    tail = ""
    pos, size = 0, len(text)
    while pos < size:
        joined = tail + text[pos : pos + 3]
        assembled = joined.find("<!--")
        if 0 <= assembled < len(tail):
            drop = len(tail) - assembled
            _trim(out, drop)
            pos += 4 - drop
        else:
            start = text.find("<!--", pos)
            if start < 0:
                out.append(text[pos:])
                break
            if start > pos:
                out.append(text[pos:start])
            pos = start + 4
        end = text.find("-->", pos)
        pos = size if end < 0 else end + 3
        tail = _tail(out)
    return "".join(out)


def _trim(out: list[str], count: int) -> None:
    while count:
        last = out.pop()
        if len(last) > count:
            out.append(last[:-count])
            return
        count -= len(last)


def _tail(out: list[str]) -> str:
    tail = ""
    for chunk in reversed(out):
        tail = chunk[-3:] + tail
        if len(tail) >= 3:
            return tail[-3:]
    return tail


# -- Markdown, then HTML ------------------------------------------------------------------------
#
# cmark-gfm (GitHub's own Markdown renderer, in C, linear in its input) renders the text with
# raw HTML kept and each block's source lines in `data-sourcepos`; one linear scan of that HTML
# then keeps what a reader sees. Python's `html.parser` is not used: on Python 3.11 it takes
# seconds on 64 KB of unterminated comments or `<?`, so the scan is a tokenizer whose every
# pattern consumes what it reads (an unterminated comment, tag or quoted value runs to the end,
# as a browser drops it).

_OPTIONS: Final = Options.CMARK_OPT_UNSAFE | Options.CMARK_OPT_SOURCEPOS
# The source's own `data-sourcepos` attributes are renamed, so only cmark's place a block.
_SOURCEPOS = re.compile(r"data-sourcepos", re.IGNORECASE)
_TOKEN = re.compile(
    r"(?P<comment><!--.*?(?:-->|\Z))"
    r"|<(?P<end>/?)(?P<tag>[A-Za-z][A-Za-z0-9:-]*)"
    r"(?P<attrs>(?:\"[^\"]*(?:\"|\Z)|'[^']*(?:'|\Z)|[^'\">])*)(?:>|\Z)"
    r"|(?P<other><[!?/][^>]*(?:>|\Z))"
    r"|(?P<text>[^<]+|<)",
    re.DOTALL,
)
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s>]+)))?""")
# Elements whose text is still prose in a work-item comment; any other element quiets its text.
_PROSE_TAGS: Final = frozenset(
    {"p", "div", "span", "font", "b", "strong", "i", "em", "u", "s", "strike", "del", "ins",
     "a", "br", "small", "big", "sub", "sup", "mark", "abbr", "body", "html"}
)  # fmt: skip
_PARAGRAPH_BREAKS: Final = frozenset({"p", "div", "br", "li", "tr", "blockquote", "pre", "hr"})
_MD_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
_RAW_TAG = re.compile(r"<[A-Za-z/]")
_BLOCK_START = re.compile(r'<[a-z0-9]+ data-sourcepos="(\d+):(\d+)-(\d+):(\d+)"')
_POSITION = re.compile(r"(\d+):(\d+)-(\d+):(\d+)")
_BLOCKS: Final = frozenset(
    {"p", "div", "ul", "ol", "li", "blockquote", "pre", "table", "thead", "tbody", "tr", "hr",
     "h1", "h2", "h3", "h4", "h5", "h6", "details", "summary", "section", "article", "dl",
     "dt", "dd", "figure", "figcaption", "header", "footer", "nav", "aside", "main", "br"}
)  # fmt: skip
_SPACED: Final = frozenset(
    {"p", "pre", "table", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "div", "ul", "ol"}
)
_MARKERS: Final = {
    "em": "*", "i": "*", "strong": "**", "b": "**", "del": "~~", "s": "~~", "strike": "~~",
    "code": "`", "kbd": "`", "samp": "`", "tt": "`", "var": "`", "q": '"',
}  # fmt: skip


def _render(source: str) -> str:
    rendered: str = cmarkgfm.github_flavored_markdown_to_html(source, _OPTIONS)
    return rendered


@dataclass
class _Element:
    """One open element and what it means for the text inside it."""

    tag: str
    hidden: bool
    quiet: bool  # quoted or code: seen, but never prose


class _Tok:
    """One token of rendered HTML; a start tag's attributes are parsed only when asked for."""

    __slots__ = ("_attrs", "attrs_text", "kind", "raw", "tag", "text", "void")

    def __init__(self, kind: str, raw: str, tag: str = "", attrs_text: str = "") -> None:
        self.kind, self.raw, self.tag, self.attrs_text = kind, raw, tag, attrs_text
        self.text = html.unescape(raw) if kind == "text" and "&" in raw else raw
        self.void = kind == "start" and (tag in _VOID_TAGS or attrs_text.rstrip().endswith("/"))
        self._attrs: dict[str, str] | None = None

    @property
    def attrs(self) -> dict[str, str]:
        if self._attrs is None:
            self._attrs = {
                name.lower(): html.unescape(dq or sq or uq or "")
                for name, dq, sq, uq in _ATTR.findall(self.attrs_text)
            }
        return self._attrs


def _tokens(markup: str) -> Iterator[_Tok]:
    for match in _TOKEN.finditer(markup):
        raw = match.group()
        if match.group("text") is not None:
            yield _Tok("text", raw)
        elif match.group("tag") is not None:
            kind = "end" if match.group("end") else "start"
            yield _Tok(kind, raw, match.group("tag").lower(), match.group("attrs"))
        else:
            yield _Tok("skip", raw)


def _hides(tok: _Tok) -> bool:
    if tok.tag in _HIDDEN_TAGS:
        return True
    lowered = tok.attrs_text.lower()
    if "hidden" not in lowered and "style" not in lowered:
        return False
    attrs = tok.attrs
    return "hidden" in attrs or bool(_HIDING_STYLE.search(attrs.get("style", "")))


class _Stack:
    """The open elements; an end tag closes the innermost element of its name, if any."""

    def __init__(self) -> None:
        self.open: list[_Element] = []

    @property
    def hidden(self) -> bool:
        return bool(self.open) and self.open[-1].hidden

    @property
    def quiet(self) -> bool:
        return bool(self.open) and self.open[-1].quiet

    def push(self, tok: _Tok) -> _Element:
        parent_hidden, parent_quiet = self.hidden, self.quiet
        element = _Element(
            tok.tag, parent_hidden or _hides(tok), parent_quiet or tok.tag in _QUOTE_OR_CODE_TAGS
        )
        if not tok.void:
            self.open.append(element)
        return element

    def pop(self, tag: str) -> _Element | None:
        # Only the innermost element may close: a stray end tag inside a hidden element must
        # not uncover what follows (HTML would ignore most strays anyway).
        if self.open and self.open[-1].tag == tag:
            return self.open.pop()
        return None


class _LineReader:
    """Yields (source line, visible text, is it plain) for the top level of rendered HTML.

    Text of a top-level paragraph is placed by its `data-sourcepos` (a paragraph whose rendered
    lines do not match its source lines, because a code span or a link swallowed a line break,
    holds no prose); text of raw HTML at the top level by matching its verbatim lines forwards.
    Everything else (lists, quotes, headings, tables, code) is never prose and not read.
    """

    def __init__(self, source_lines: list[str], cursor: int, stack: _Stack) -> None:
        self._source = source_lines
        self._stack = stack
        self._cursor = cursor  # the next source line raw HTML may come from
        self._raw_at: dict[int, int] = {}

    def read(self, markup: str) -> Iterator[tuple[int, str, bool]]:
        out_lines = markup.split("\n")
        stack = self._stack
        out_line = 0
        block: tuple[int, int, int] | None = None  # (first, last source line, first out line)
        pending: list[tuple[int, str, bool]] = []
        outside = False  # inside a top-level cmark block other than a paragraph
        for tok in _tokens(markup):
            if tok.kind == "start":
                where = tok.attrs.get("data-sourcepos") if not stack.open else None
                if not stack.open and where is not None:
                    span = _span(where)
                    if tok.tag == "p" and span is not None:
                        block, pending = (span[0], span[1], out_line), []
                    else:
                        outside = True
                        if span is not None:
                            self._cursor = max(self._cursor, span[1] + 1)
                element = stack.push(tok)
                if not element.hidden and not outside and (tok.tag in _MARKERS or tok.tag == "img"):
                    yield from self._place(
                        out_line,
                        _MARKERS.get(tok.tag, "[image]"),
                        True,
                        block=block,
                        pending=pending,
                        out_lines=out_lines,
                    )
            elif tok.kind == "end":
                closed = stack.pop(tok.tag)
                if closed is not None and not closed.hidden and not outside and tok.tag in _MARKERS:
                    yield from self._place(
                        out_line,
                        _MARKERS[tok.tag],
                        True,
                        block=block,
                        pending=pending,
                        out_lines=out_lines,
                    )
                if closed is not None and not stack.open:
                    if block is not None:
                        yield from self._commit(block, pending, out_line)
                        self._cursor = max(self._cursor, block[1] + 1)
                    block, outside = None, False
            elif tok.kind == "text" and not stack.hidden and not outside:
                for offset, piece in enumerate(tok.text.split("\n")):
                    if piece:
                        yield from self._place(
                            out_line + offset,
                            piece,
                            not stack.quiet,
                            block=block,
                            pending=pending,
                            out_lines=out_lines,
                        )
            if "\n" in tok.raw:
                out_line += tok.raw.count("\n")

    def _place(
        self,
        at: int,
        piece: str,
        plain: bool,
        *,
        block: tuple[int, int, int] | None,
        pending: list[tuple[int, str, bool]],
        out_lines: list[str],
    ) -> Iterator[tuple[int, str, bool]]:
        """Text of a paragraph waits for the paragraph's end; raw HTML's is placed now."""
        if block is not None:
            pending.append((at, piece, plain))
            return
        line = self._raw_line(at, out_lines)
        if line is not None:
            yield line, piece, plain

    def _commit(
        self, block: tuple[int, int, int], pending: list[tuple[int, str, bool]], out_line: int
    ) -> Iterator[tuple[int, str, bool]]:
        first, last, start = block
        if out_line - start != last - first:
            return
        for at, piece, plain in pending:
            yield first + at - start, piece, plain

    def _raw_line(self, out_line: int, out_lines: list[str]) -> int | None:
        """The source line a line of raw HTML came from: the next one with the same text."""
        if out_line in self._raw_at:
            return self._raw_at[out_line]
        wanted = out_lines[out_line]
        for index in range(self._cursor, len(self._source)):
            if self._source[index] == wanted:
                self._cursor = index + 1
                self._raw_at[out_line] = index
                return index
        return None


def _span(where: str) -> tuple[int, int] | None:
    """`L1:C1-L2:C2` as 0-based first and last line (an end at column 0 is the line before)."""
    match = _POSITION.fullmatch(where)
    if match is None:
        return None
    first, last, end_col = int(match.group(1)) - 1, int(match.group(3)) - 1, int(match.group(4))
    if end_col == 0 and last > first:
        last -= 1
    return first, last


class _Reader:
    """Renders HTML as the text a reader sees: blocks on their own lines, lists and quotes as
    prefixes, code fenced, links with their target, hidden elements and alt text gone."""

    def __init__(self) -> None:
        self._out: list[str] = []
        self._line = ""
        self._prefixes: list[list[str]] = []  # [first-line prefix, later prefix, used]
        self._counters: list[int] = []
        self._links: list[str] = []
        self._code: list[str] | None = None  # the text of an open <code> or <pre>
        self._pre = False
        self._row: list[str] | None = None
        self._cell: str | None = None

    def read(self, markup: str) -> list[str]:
        stack = _Stack()
        for tok in _tokens(markup):
            if tok.kind == "start":
                element = stack.push(tok)
                if not element.hidden:
                    self._open(tok)
            elif tok.kind == "end":
                closed = stack.pop(tok.tag)
                if closed is not None and not closed.hidden:
                    self._close(tok.tag)
            elif tok.kind == "text" and not stack.hidden:
                self._text(tok.text)
        self._flush()
        return self._out

    def _text(self, text: str) -> None:
        if self._code is not None:
            self._code.append(text)
        elif self._cell is not None:
            self._cell += " ".join(text.split("\n"))
        elif self._pre:
            self._line += text
        else:
            parts = text.split("\n")
            self._line += parts[0]
            for part in parts[1:]:
                self._flush()
                self._line = part.lstrip()

    def _open(self, tok: _Tok) -> None:
        tag = tok.tag
        if tag in _BLOCKS:
            self._flush()
        if tag in ("ul", "ol"):
            self._counters.append(int(tok.attrs.get("start", "1") or 1) if tag == "ol" else 0)
        elif tag == "li":
            ordered = bool(self._counters) and self._counters[-1] > 0
            marker = f"{self._counters[-1]}." if ordered else "-"
            if ordered:
                self._counters[-1] += 1
            self._prefixes.append([f"{marker} ", " " * (len(marker) + 1), ""])
        elif tag == "blockquote":
            self._prefixes.append(["> ", "> ", ""])
        elif tag == "pre":
            self._code = []
            self._pre = True
        elif tag == "code" and self._code is None:
            self._code = []
        elif tag == "code":
            pass
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._line = "#" * int(tag[1]) + " "
        elif tag == "hr":
            self._line = "---"
            self._flush()
        elif tag == "a":
            self._links.append(tok.attrs.get("href", ""))
        elif tag == "img":
            self._add("[image]")
        elif tag == "input" and tok.attrs.get("type") == "checkbox":
            self._add("[x]" if "checked" in tok.attrs else "[ ]")
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""
        else:
            self._add(_MARKERS.get(tag, ""))

    def _close(self, tag: str) -> None:
        if tag == "pre" and self._code is not None:
            self._fence("".join(self._code))
            self._code, self._pre = None, False
        elif tag == "code" and self._code is not None and not self._pre:
            content = " ".join("".join(self._code).split("\n"))
            self._code = None
            self._add(_code_span(content))
        elif tag == "code":
            pass
        elif tag in ("ul", "ol") and self._counters:
            self._counters.pop()
            self._flush()
        elif tag in ("li", "blockquote") and self._prefixes:
            self._flush()
            self._prefixes.pop()
            if tag == "blockquote" and self._out and not self._out[-1].strip(" >"):
                self._out[-1] = "".join(">" for e in self._prefixes if e[0] == "> ")
        elif tag == "a" and self._links:
            href = self._links.pop()
            if href and not self._line.endswith(href):
                self._add(f" (<{href.replace('>', '%3E').replace(' ', '%20')}>)")
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(self._cell.strip().replace("|", "\\|"))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._line = "| " + " | ".join(self._row) + " |"
            self._row = None
            self._flush()
        elif tag in _BLOCKS:
            self._flush()
        else:
            self._add(_MARKERS.get(tag, ""))
        if tag in _SPACED:
            self._blank()

    def _blank(self) -> None:
        prefix = "".join(">" if entry[0] == "> " else "" for entry in self._prefixes)
        if self._out and self._out[-1].strip(" >"):
            self._out.append(prefix)

    def _add(self, text: str) -> None:
        if self._code is not None:
            if not self._pre:  # inside a code block, markup shows as nothing
                self._code.append(text)
        elif self._cell is not None:
            self._cell += text
        else:
            self._line += text

    def _fence(self, body: str) -> None:
        body = body.rstrip("\n")
        longest = max((len(run) for run in _FENCE_RUNS.findall(body)), default=0)
        fence = "`" * max(3, longest + 1)
        self._line = fence
        self._flush()
        for line in body.split("\n"):
            self._line = line
            self._flush(keep=True)
        self._line = fence
        self._flush()

    def _flush(self, *, keep: bool = False) -> None:
        line = self._line if keep else self._line.strip()
        self._line = ""
        if not line and not keep:
            return
        parts = []
        for entry in self._prefixes:
            parts.append(entry[1] if entry[2] else entry[0])
            entry[2] = "used"
        self._out.append("".join(parts) + line)


def _code_span(content: str) -> str:
    longest = max((len(run) for run in _TICKS.findall(content)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{fence}{pad}{content}{pad}{fence}"
