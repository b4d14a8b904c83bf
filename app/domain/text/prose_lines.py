"""Which lines of a top-level block are prose, in the source's numbering: the reading behind
`app.domain.text.sanitize.visible_lines`. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterator

from app.domain.text.html_scan import MARKERS, Stack, tokens

_POSITION = re.compile(r"(\d+):(\d+)-(\d+):(\d+)")


class LineReader:
    """Yields (source line, visible text, is it plain) for the top level of rendered HTML.

    Text of a top-level paragraph is placed by its `data-sourcepos` (a paragraph whose rendered
    lines do not match its source lines, because a code span or a link swallowed a line break,
    holds no prose); text of raw HTML at the top level by matching its verbatim lines forwards.
    Everything else (lists, quotes, headings, tables, code) is never prose and not read.
    """

    def __init__(self, source_lines: list[str], cursor: int, stack: Stack) -> None:
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
        for tok in tokens(markup):
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
                if not element.hidden and not outside and (tok.tag in MARKERS or tok.tag == "img"):
                    yield from self._place(
                        out_line,
                        MARKERS.get(tok.tag, "[image]"),
                        True,
                        block=block,
                        pending=pending,
                        out_lines=out_lines,
                    )
            elif tok.kind == "end":
                closed = stack.pop(tok.tag)
                if closed is not None and not closed.hidden and not outside and tok.tag in MARKERS:
                    yield from self._place(
                        out_line,
                        MARKERS[tok.tag],
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
