"""Rendered HTML read token by token: cmark-gfm's rendering, a linear tokenizer, and the stack
of open elements that says whether text inside them is hidden or quoted. Pure.

cmark-gfm (GitHub's own Markdown renderer, in C, linear in its input) renders the text with
raw HTML kept and each block's source lines in `data-sourcepos`; one linear scan of that HTML
then keeps what a reader sees. Python's `html.parser` is not used: on Python 3.11 it takes
seconds on 64 KB of unterminated comments or `<?`, so the scan is a tokenizer whose every
pattern consumes what it reads (an unterminated comment, tag or quoted value runs to the end,
as a browser drops it).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

# cmarkgfm ships no type information; its two entry points are typed where they are used.
import cmarkgfm  # type: ignore[import-untyped]
from cmarkgfm.cmark import Options  # type: ignore[import-untyped]

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
# MARKERS), so it cannot start a line either.
_QUOTE_OR_CODE_TAGS: Final = frozenset(
    {"blockquote", "pre", "textarea", "xmp", "listing", "plaintext"}
)
_VOID_TAGS: Final = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr", "param"}
)  # fmt: skip
_OPTIONS: Final = Options.CMARK_OPT_UNSAFE | Options.CMARK_OPT_SOURCEPOS
_TOKEN = re.compile(
    r"(?P<comment><!--.*?(?:-->|\Z))"
    r"|<(?P<end>/?)(?P<tag>[A-Za-z][A-Za-z0-9:-]*)"
    r"(?P<attrs>(?:\"[^\"]*(?:\"|\Z)|'[^']*(?:'|\Z)|[^'\">])*)(?:>|\Z)"
    r"|(?P<other><[!?/][^>]*(?:>|\Z))"
    r"|(?P<text>[^<]+|<)",
    re.DOTALL,
)
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s>]+)))?""")
MARKERS: Final = {
    "em": "*", "i": "*", "strong": "**", "b": "**", "del": "~~", "s": "~~", "strike": "~~",
    "code": "`", "kbd": "`", "samp": "`", "tt": "`", "var": "`", "q": '"',
}  # fmt: skip


def render(source: str) -> str:
    rendered: str = cmarkgfm.github_flavored_markdown_to_html(source, _OPTIONS)
    return rendered


@dataclass
class Element:
    """One open element and what it means for the text inside it."""

    tag: str
    hidden: bool
    quiet: bool  # quoted or code: seen, but never prose


class Tok:
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


def tokens(markup: str) -> Iterator[Tok]:
    for match in _TOKEN.finditer(markup):
        raw = match.group()
        if match.group("text") is not None:
            yield Tok("text", raw)
        elif match.group("tag") is not None:
            kind = "end" if match.group("end") else "start"
            yield Tok(kind, raw, match.group("tag").lower(), match.group("attrs"))
        else:
            yield Tok("skip", raw)


def _hides(tok: Tok) -> bool:
    if tok.tag in _HIDDEN_TAGS:
        return True
    lowered = tok.attrs_text.lower()
    if "hidden" not in lowered and "style" not in lowered:
        return False
    attrs = tok.attrs
    return "hidden" in attrs or bool(_HIDING_STYLE.search(attrs.get("style", "")))


class Stack:
    """The open elements; an end tag closes the innermost element of its name, if any."""

    def __init__(self) -> None:
        self.open: list[Element] = []

    @property
    def hidden(self) -> bool:
        return bool(self.open) and self.open[-1].hidden

    @property
    def quiet(self) -> bool:
        return bool(self.open) and self.open[-1].quiet

    def push(self, tok: Tok) -> Element:
        parent_hidden, parent_quiet = self.hidden, self.quiet
        element = Element(
            tok.tag, parent_hidden or _hides(tok), parent_quiet or tok.tag in _QUOTE_OR_CODE_TAGS
        )
        if not tok.void:
            self.open.append(element)
        return element

    def pop(self, tag: str) -> Element | None:
        # Only the innermost element may close: a stray end tag inside a hidden element must
        # not uncover what follows (HTML would ignore most strays anyway).
        if self.open and self.open[-1].tag == tag:
            return self.open.pop()
        return None
