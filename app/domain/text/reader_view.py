"""Rendered HTML as the text a reader sees: blocks on their own lines, lists and quotes as
prefixes, code fenced, links with their target, hidden elements and alt text gone. Pure; the
reading behind `app.domain.text.sanitize.reader_text`."""

from __future__ import annotations

import re
from typing import Final

from app.domain.text.html_scan import MARKERS, Stack, Tok, tokens
from app.domain.text.invisible import strip_percent_encoded

_TICKS = re.compile(r"`+")
_FENCE_RUNS = re.compile(r"`+|~+")
_BLOCKS: Final = frozenset(
    {"p", "div", "ul", "ol", "li", "blockquote", "pre", "table", "thead", "tbody", "tr", "hr",
     "h1", "h2", "h3", "h4", "h5", "h6", "details", "summary", "section", "article", "dl",
     "dt", "dd", "figure", "figcaption", "header", "footer", "nav", "aside", "main", "br"}
)  # fmt: skip
_SPACED: Final = frozenset(
    {"p", "pre", "table", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "div", "ul", "ol"}
)


class Reader:
    """Renders HTML as the text a reader sees: blocks on their own lines, lists and quotes as
    prefixes, code fenced, links with their target, hidden elements and alt text gone."""

    def __init__(self, *, styles: bool = True) -> None:
        self._styles = styles  # whether inline styles hide text (Azure DevOps), see html_scan
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
        stack = Stack(styles=self._styles)
        for tok in tokens(markup):
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

    def _open(self, tok: Tok) -> None:
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
            # Decoded and stripped by html_scan; its %XX escapes may spell invisible ones too.
            self._links.append(strip_percent_encoded(tok.attrs.get("href", "")))
        elif tag == "img":
            self._add("[image]")
        elif tag == "input" and tok.attrs.get("type") == "checkbox":
            self._add("[x]" if "checked" in tok.attrs else "[ ]")
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""
        else:
            self._add(MARKERS.get(tag, ""))

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
            self._add(MARKERS.get(tag, ""))
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
