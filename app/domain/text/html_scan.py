"""Rendered HTML read token by token: cmark-gfm's rendering, a linear tokenizer, and the stack
of open elements that says whether text inside them is hidden or quoted. Pure.

cmark-gfm (GitHub's own Markdown renderer, in C, linear in its input) renders the text with
raw HTML kept and each block's source lines in `data-sourcepos`; one linear scan of that HTML
then keeps what a reader sees. Python's `html.parser` is not used: on Python 3.11 it takes
seconds on 64 KB of unterminated comments or `<?`, so the scan is a tokenizer whose every
pattern consumes what it reads (an unterminated comment, tag or quoted value runs to the end,
as a browser drops it).

Every text and attribute value is decoded (`html.unescape`: named, decimal and hex references)
and then stripped of invisible characters, so one a reader never sees cannot arrive spelled as
an entity (`&#xE0053;`, `&ZeroWidthSpace;`) either; cmark-gfm decodes the references of
Markdown text itself, and its output goes through the same pass here. A text token keeps its
bidi controls (`&#x202E;`): a run goes on past the token, so each reading drops the runs of its
whole lines with `strip_invisible` (attribute values are whole, and are stripped here).

Inline styles: a `Stack` reads them (`app.domain.text.css_hide`: white or transparent text,
tiny fonts, off-screen, clipped, …) when the host renders them (`styles=True`, Azure DevOps);
GitHub strips `style` and `<font>` before rendering, so its reading may pass `styles=False`.
The `hidden` attribute and the elements that never render (`<script>`, …) hide on every host.
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

from app.domain.text.css_hide import PAGE, Look, look_of
from app.domain.text.invisible import drop_format_chars, strip_invisible

# Elements whose content a reader never sees as text, and styles that hide an element.
_HIDDEN_TAGS: Final = frozenset(
    {"script", "style", "template", "noscript", "head", "title", "object", "iframe", "svg"}
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
    look: Look = PAGE  # what its inline style passes on to its content


class Tok:
    """One token of rendered HTML; a start tag's attributes are parsed only when asked for."""

    __slots__ = ("_attrs", "attrs_text", "kind", "raw", "tag", "text", "void")

    def __init__(self, kind: str, raw: str, tag: str = "", attrs_text: str = "") -> None:
        self.kind, self.raw, self.tag, self.attrs_text = kind, raw, tag, attrs_text
        # Decoded first, then stripped: an entity can spell an invisible character. Bidi
        # controls stay for the reading's final pass (`strip_invisible` of the whole line),
        # since a run opened here goes on past this token.
        decoded = html.unescape(raw) if kind == "text" and "&" in raw else raw
        self.text = drop_format_chars(decoded) if kind == "text" else raw
        self.void = kind == "start" and (tag in _VOID_TAGS or attrs_text.rstrip().endswith("/"))
        self._attrs: dict[str, str] | None = None

    @property
    def attrs(self) -> dict[str, str]:
        if self._attrs is None:
            self._attrs = {
                name.lower(): strip_invisible(html.unescape(dq or sq or uq or ""))
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


def _hides(tok: Tok, parent: Look, styles: bool) -> tuple[bool, Look]:
    """Whether `tok` hides its content, and the look its content inherits."""
    if tok.tag in _HIDDEN_TAGS:
        return True, parent
    lowered = tok.attrs_text.lower()
    if "hidden" not in lowered and "style" not in lowered and "color" not in lowered:
        return False, parent
    attrs = tok.attrs
    if "hidden" in attrs:
        return True, parent
    if not styles:
        return False, parent
    font_color = attrs.get("color") if tok.tag == "font" else None
    return look_of(attrs.get("style", ""), font_color, parent)


class Stack:
    """The open elements; an end tag closes the innermost element of its name, if any."""

    def __init__(self, *, styles: bool = True) -> None:
        self.open: list[Element] = []
        self.styles = styles  # whether the host renders inline styles (GitHub does not)

    @property
    def hidden(self) -> bool:
        return bool(self.open) and self.open[-1].hidden

    @property
    def quiet(self) -> bool:
        return bool(self.open) and self.open[-1].quiet

    def push(self, tok: Tok) -> Element:
        parent_hidden, parent_quiet = self.hidden, self.quiet
        parent_look = self.open[-1].look if self.open else PAGE
        hides, look = _hides(tok, parent_look, self.styles)
        element = Element(
            tok.tag, parent_hidden or hides, parent_quiet or tok.tag in _QUOTE_OR_CODE_TAGS, look
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
