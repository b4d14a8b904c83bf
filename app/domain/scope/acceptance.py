"""Acceptance criteria in a card body: find them, and rewrite one in place. Pure.

`extend-current-card` (docs/cycle.md) rewrites the AC a maintainer approved in
the card's ACTUAL body. Only the adopted formats are read, and nothing else of the card is ever
touched: everything outside the criterion's text span stays byte-identical.

Grammar (lines end at `\\n`; a trailing `\\r` is part of the line ending, not of the text)::

    id          AC-<digits>, case-insensitive; AC-1, AC-01 and ac-001 are the same id
    bullet      - | * | + | <1-9 digits>. | <1-9 digits>)      then spaces or tabs
    box         [ ] | [x] | [X]                                  then spaces or tabs

    colon       [indent] [bullet [box]] ( id ":" | **id** ":" | **id:** ) text
                 i.e.  AC-1: text · - **AC-1**: text · * AC-1: text · - **AC-1:** text
                       · 1. AC-1: text · - [ ] AC-1: text        (blanks around ":" allowed)
    checkbox    [indent] bullet box **id: Title** text     - [ ] **AC-01: Title.** Description.
                [indent] bullet box **id** text            - [x] **AC-01** Description.
    given-when-then
                header, then (after optional blank lines) clause lines:
      header    [ ≤3 spaces ] #{1,6} id [sep title] [#…]        ### AC-1 — Login works
                [ ≤3 spaces ] **id** [sep title]                 **AC-1**: Login works
                [ ≤3 spaces ] **id sep title**                   **AC-1: Login works**
                (sep is `:`, `.`, `-`, an en or em dash, or whitespace; the title may be empty)
      clause    [indent] [bullet] **Kw** text | **Kw:** text | **Kw**: text
                Kw is Given, When, Then, And or But (any case). Clauses may be separated by
                blank lines; a non-blank line directly under a clause that does not start a
                Markdown block (heading, list item, quote, fence, HTML, rule, another AC) is
                the clause's continuation. The keywords must read as one or more scenarios:
                Given+ When+ Then+ (And/But continue the keyword before them).

A line is read as a Given/When/Then header first (only when a valid block follows it, so
`**AC-1**: Login` above clause lines is a header and otherwise a colon criterion), then as a
checkbox, then as a colon criterion.

Bulleted colon and checkbox criteria take their continuation lines too: non-blank lines right
under them, indented deeper than the bullet, that do not start a Markdown block. A criterion
inside a fenced code block or a multi-line HTML comment is an example, not a criterion.

`Criterion.text` is always `body[span[0]:span[1]]`: for colon and checkbox the description (no
bullet, box, id or title; trailing blanks excluded), for Given/When/Then every clause line from
the first clause's indentation to the end of the last one.

`rewrite_criterion(body, ac_id, new_text)` replaces only that span:

- colon / checkbox: `new_text` (stripped) must be one non-empty line; the bullet, checkbox
  state, id spelling and title stay. Continuation lines are replaced by the single line.
- Given/When/Then: `new_text` must be clause lines (`Given …`, `**When** …`, `- And …`; any
  case, bold or not) that read as scenarios; they are written in the style of the block's first
  clause (indentation, bullet or renumbered ordered marker, bold keyword and its colon) and
  separated like the old block (blank lines or not), with the card's own line ending.

Refusals are `AcceptanceError(code, message)`, user-facing (rendered into the reply to the
maintainer), each naming the id and the remedy:

    invalid-ac-id            the id is not AC-<n>
    unsupported-card-format  the card states no criterion in an adopted format (no edit),
                             whether or not the id appears in its text
    ac-id-unresolvable       the card speaks an adopted format but has no such id; a parser
                             miss is never taken as proof the AC is new (no append)
    ambiguous-ac-id          the id is defined more than once, in one format or across two
    invalid-ac-text          the new text does not fit the criterion's format
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from app.errors import UserError

AcFormat = Literal["colon", "checkbox", "given-when-then"]
AcErrorCode = Literal[
    "invalid-ac-id",
    "unsupported-card-format",
    "ac-id-unresolvable",
    "ambiguous-ac-id",
    "invalid-ac-text",
]

ADOPTED_FORMATS: Final = (
    "colon (`AC-1: text` or `- **AC-1**: text`), checkbox (`- [ ] **AC-1: Title.** "
    "Description.`) or Given/When/Then (`### AC-1` followed by `**Given** …`, `**When** …`, "
    "`**Then** …` lines)"
)
_REMEDY = "restate the AC section in an adopted format, or use new-card"

_FLAGS = re.IGNORECASE | re.ASCII
_ID = r"(?P<id>AC-(?P<num>[0-9]+))"
_BULLET = r"(?:[-*+]|[0-9]{1,9}[.)])"
_AC_ID = re.compile(r"AC-(?P<num>[0-9]+)", _FLAGS)

_CHECKBOX = re.compile(
    rf"^(?P<indent>[ \t]*){_BULLET}[ \t]+\[[ xX]\][ \t]+"
    rf"\*\*{_ID}(?:[ \t]*:[ \t]*(?P<title>[^*\s].*?))?[ \t]*\*\*(?=[ \t]|$)"
    r"[ \t]*(?P<text>.*)$",
    _FLAGS,
)
_COLON = re.compile(
    rf"^(?P<indent>[ \t]*)(?P<bullet>{_BULLET}[ \t]+(?:\[[ xX]\][ \t]+)?)?"
    rf"(?P<bold>\*\*)?{_ID}(?(bold)(?:\*\*[ \t]*:|[ \t]*:\*\*)|[ \t]*:)"
    r"[ \t]*(?P<text>.*)$",
    _FLAGS,
)
_SEP = r"(?:[ \t]*[:.\u2013\u2014-][ \t]*|[ \t]+)"
_GWT_HEAD = re.compile(
    r"^ {0,3}(?P<hashes>#{1,6}[ \t]+)?"
    rf"(?:\*\*{_ID}(?:{_SEP}(?P<inner>[^*]*?))?[ \t]*\*\*(?P<after>.*)"
    r"|(?P<bare>AC-[0-9]+)(?P<bare_after>.*))$",
    _FLAGS,
)
_TITLE_AFTER = re.compile(rf"^(?:{_SEP}(?P<title>.*))?$", re.ASCII)
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$|^#+[ \t]*$")
_CLAUSE = re.compile(
    r"^(?P<indent>[ \t]*)(?:(?P<marker>[-*+]|(?P<num>[0-9]{1,9})(?P<delim>[.)]))(?P<gap>[ \t]+))?"
    r"\*\*(?P<kw>given|when|then|and|but)(?P<inner>:?)\*\*(?P<outer>:?)(?:[ \t]+(?P<rest>.*))?$",
    _FLAGS,
)
_LOOSE_CLAUSE = re.compile(
    r"^[ \t]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?(?:\*\*)?(?P<kw>given|when|then|and|but)"
    r"(?:\*\*:?|:\*\*|:)?(?:[ \t]+(?P<rest>.*))?$",
    _FLAGS,
)
_BLOCK_START = re.compile(
    r"^[ \t]*(?:#|>|<|```|~~~|[-*+](?:[ \t]|$)|[0-9]{1,9}[.)](?:[ \t]|$))"
    r"|^[ \t]*(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$"
)
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_KEYWORDS = {"given": "Given", "when": "When", "then": "Then", "and": "And", "but": "But"}


class AcceptanceError(UserError):
    """A refused AC rewrite; `code` is one of `AcErrorCode`, `message` names the id and remedy."""

    def __init__(self, code: AcErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: AcErrorCode = code
        self.message = message


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion as the card states it.

    `id` is spelled as in the card (`AC-01`); `number` is what ids are compared by. `text` is
    exactly `body[span[0]:span[1]]`; `line` is the 1-based line that holds the id.
    """

    id: str
    format: AcFormat
    title: str | None
    text: str
    span: tuple[int, int]
    line: int

    @property
    def number(self) -> int:
        """The numeric id: AC-1 and AC-01 are both 1."""
        return ac_number(self.id)


@dataclass(frozen=True)
class _Line:
    start: int  # offset of the first character
    end: int  # offset after the last character of the text (before `\r\n` / `\n`)
    next: int  # offset of the next line
    text: str

    @property
    def blank(self) -> bool:
        return not self.text.strip(" \t")


def parse_ac_id(value: str) -> int | None:
    """The number of an `AC-<n>` id (any case, surrounding whitespace ignored), else None."""
    match = _AC_ID.fullmatch(value.strip())
    return int(match.group("num")) if match else None


def ac_number(ac_id: str) -> int:
    """The number of an `AC-<n>` id; `invalid-ac-id` when it is not one."""
    number = parse_ac_id(ac_id)
    if number is None:
        raise AcceptanceError(
            "invalid-ac-id",
            f"{ac_id!r} is not an acceptance-criterion id; name it as AC-<n>, e.g. AC-3",
        )
    return number


# ---------------------------------------------------------------- reading


def _split_lines(body: str) -> list[_Line]:
    lines: list[_Line] = []
    pos = 0
    while pos < len(body):
        newline = body.find("\n", pos)
        nxt = len(body) if newline == -1 else newline + 1
        end = nxt if newline == -1 else newline
        if end > pos and body[end - 1] == "\r" and newline != -1:
            end -= 1
        lines.append(_Line(start=pos, end=end, next=nxt, text=body[pos:end]))
        pos = nxt
    return lines


def _visible(lines: Sequence[_Line]) -> list[bool]:
    """False for lines inside (or opening/closing) fenced code blocks and multi-line comments."""
    visible: list[bool] = []
    fence: str | None = None
    in_comment = False
    for line in lines:
        if fence is not None:
            match = _FENCE.match(line.text)
            if (
                match is not None
                and match.group("fence")[0] == fence[0]
                and len(match.group("fence")) >= len(fence)
                and not match.group("info").strip()
            ):
                fence = None
            visible.append(False)
            continue
        if in_comment:
            in_comment = "-->" not in line.text
            visible.append(False)
            continue
        match = _FENCE.match(line.text)
        if match is not None and not (
            match.group("fence")[0] == "`" and "`" in match.group("info")
        ):
            fence = match.group("fence")
            visible.append(False)
            continue
        stripped = line.text.lstrip(" \t")
        if stripped.startswith("<!--") and "-->" not in stripped[4:]:
            in_comment = True
            visible.append(False)
            continue
        visible.append(True)
    return visible


def _indent_width(text: str) -> int:
    """The indentation's width, a tab advancing to the next multiple of 4 (CommonMark)."""
    return len(text[: len(text) - len(text.lstrip(" \t"))].expandtabs(4))


def _header(text: str) -> tuple[str, str | None] | None:
    """(id, title) when the line is a Given/When/Then header, else None."""
    match = _GWT_HEAD.match(text)
    if match is None:
        return None
    if match.group("bare") is not None:
        if match.group("hashes") is None:
            return None  # a bare `AC-1 …` line is a header only as a Markdown heading
        ac_id, after = match.group("bare"), match.group("bare_after")
    else:
        ac_id, after = match.group("id"), match.group("after")
    if match.group("hashes") is not None:
        after = _CLOSING_HASHES.sub("", after)
    inner = (match.group("inner") or "").strip()
    if inner:
        if after.strip():
            return None  # `**AC-1: Title** more` is not a header line
        return ac_id, inner
    tail = _TITLE_AFTER.match(after)
    if tail is None:
        return None  # `AC-12x`: the id runs into other text
    title = (tail.group("title") or "").strip()
    return ac_id, title or None


def _starts_block(text: str) -> bool:
    return bool(
        _BLOCK_START.match(text)
        or _COLON.match(text)
        or _CHECKBOX.match(text)
        or _header(text) is not None
    )


def _scenarios_ok(keywords: Sequence[str]) -> bool:
    """Given+ When+ Then+, repeated; And/But continue the keyword before them."""
    state = "start"
    for keyword in keywords:
        if keyword in ("and", "but"):
            if state == "start":
                return False
        elif keyword == "given":
            if state not in ("start", "given", "then"):
                return False
            state = "given"
        elif keyword == "when":
            if state not in ("given", "when"):
                return False
            state = "when"
        elif state in ("when", "then"):  # then
            state = "then"
        else:
            return False
    return state == "then"


def _gwt_at(
    body: str, lines: Sequence[_Line], visible: Sequence[bool], index: int
) -> tuple[Criterion, int] | None:
    head = _header(lines[index].text)
    if head is None:
        return None
    j = index + 1
    while j < len(lines) and visible[j] and lines[j].blank:
        j += 1
    first = j
    keywords: list[str] = []
    last = -1
    while j < len(lines) and visible[j]:
        line = lines[j]
        clause = _CLAUSE.match(line.text)
        if clause is not None:
            keywords.append(clause.group("kw").lower())
            last = j
        elif line.blank:
            pass
        elif last == j - 1 and not _starts_block(line.text):
            last = j  # a continuation of the clause right above
        else:
            break
        j += 1
    if not keywords or not _scenarios_ok(keywords):
        return None
    start, end = lines[first].start, lines[last].end
    criterion = Criterion(
        id=head[0],
        format="given-when-then",
        title=head[1],
        text=body[start:end],
        span=(start, end),
        line=index + 1,
    )
    return criterion, last + 1


def _line_end(line: _Line) -> int:
    return line.start + len(line.text.rstrip(" \t"))


def _single_at(
    body: str, lines: Sequence[_Line], visible: Sequence[bool], index: int
) -> tuple[Criterion, int] | None:
    line = lines[index]
    fmt: AcFormat
    title: str | None = None
    match = _CHECKBOX.match(line.text)
    if match is not None:
        fmt, bulleted = "checkbox", True
        title = (match.group("title") or "").strip() or None
    else:
        match = _COLON.match(line.text)
        if match is None:
            return None
        fmt, bulleted = "colon", match.group("bullet") is not None
    start = line.start + match.start("text")
    end = max(start, _line_end(line))
    last = index
    if bulleted:
        indent = _indent_width(line.text)
        j = index + 1
        while (
            j < len(lines)
            and visible[j]
            and not lines[j].blank
            and _indent_width(lines[j].text) > indent
            and not _starts_block(lines[j].text)
        ):
            last = j
            j += 1
        if last > index:
            end = _line_end(lines[last])
    criterion = Criterion(
        id=match.group("id"),
        format=fmt,
        title=title,
        text=body[start:end],
        span=(start, end),
        line=index + 1,
    )
    return criterion, last + 1


def parse_criteria(body: str) -> list[Criterion]:
    """Every criterion the card states in an adopted format, in order (duplicates included)."""
    lines = _split_lines(body)
    visible = _visible(lines)
    found: list[Criterion] = []
    index = 0
    while index < len(lines):
        if not visible[index]:
            index += 1
            continue
        hit = _gwt_at(body, lines, visible, index) or _single_at(body, lines, visible, index)
        if hit is None:
            index += 1
            continue
        found.append(hit[0])
        index = hit[1]
    return found


# ---------------------------------------------------------------- rewriting


def _describe(criteria: Sequence[Criterion]) -> str:
    return ", ".join(f"{c.id} ({c.format}, line {c.line})" for c in criteria)


def resolve_criterion(body: str, ac_id: str) -> Criterion:
    """The one criterion `ac_id` names in the card, or the refusal that says why not."""
    number = ac_number(ac_id)
    criteria = parse_criteria(body)
    if not criteria:
        mention = re.search(rf"(?<![A-Za-z0-9])AC-0*{number}(?![0-9])", body, _FLAGS)
        seen = (
            f"; {ac_id} appears in its text, but not as a criterion in an adopted format"
            if mention
            else ""
        )
        raise AcceptanceError(
            "unsupported-card-format",
            f"the card states no acceptance criteria in an adopted format — {ADOPTED_FORMATS} "
            f"— so {ac_id} cannot be rewritten{seen}. Nothing was changed: {_REMEDY}.",
        )
    matches = [c for c in criteria if c.number == number]
    if not matches:
        raise AcceptanceError(
            "ac-id-unresolvable",
            f"the card's acceptance criteria are {_describe(criteria)}; none of them is "
            f"{ac_id}, and a criterion pairbot cannot find is never taken to be a new one. "
            f"Nothing was changed: state {ac_id} in the card in an adopted format, or use "
            "new-card.",
        )
    if len(matches) > 1:
        raise AcceptanceError(
            "ambiguous-ac-id",
            f"{ac_id} is defined {len(matches)} times in the card: {_describe(matches)}; "
            f"pairbot will not guess which one to rewrite. Nothing was changed: give {ac_id} "
            "one definition in the card, or use new-card.",
        )
    return matches[0]


def _single_line_text(criterion: Criterion, new_text: str) -> str:
    text = new_text.strip()
    if not text or "\n" in text or "\r" in text:
        problem = "is empty" if not text else "spans several lines"
        raise AcceptanceError(
            "invalid-ac-text",
            f"{criterion.id} is a one-line {criterion.format} criterion (line "
            f"{criterion.line}) and the new text {problem}; approve one non-empty line of "
            f"text for {criterion.id}, or use new-card.",
        )
    return text


def _gwt_text(body: str, criterion: Criterion, new_text: str) -> str:
    raw = [part for part in re.split(r"\r\n|\r|\n", new_text.strip()) if part.strip()]
    clauses: list[tuple[str, str]] = []
    for part in raw:
        match = _LOOSE_CLAUSE.match(part)
        if match is None:
            raise AcceptanceError(
                "invalid-ac-text",
                f"{criterion.id} is a Given/When/Then criterion (line {criterion.line}) and "
                f"the new text line {part.strip()!r} is not a Given, When, Then, And or But "
                f"clause; approve clause lines such as 'Given …' / 'When …' / 'Then …' for "
                f"{criterion.id}, or use new-card.",
            )
        clauses.append((match.group("kw").lower(), (match.group("rest") or "").strip()))
    if not _scenarios_ok([kw for kw, _ in clauses]):
        raise AcceptanceError(
            "invalid-ac-text",
            f"{criterion.id} is a Given/When/Then criterion (line {criterion.line}) and the new "
            "text does not read as Given … When … Then … (And/But may follow any of them); "
            f"approve complete scenarios for {criterion.id}, or use new-card.",
        )
    start, end = criterion.span
    old = body[start:end]
    first_line = old.split("\n", 1)[0].removesuffix("\r")
    style = _CLAUSE.match(first_line)
    if style is None:  # pragma: no cover - a parsed block always opens with a clause line
        raise ValueError(f"{criterion.id}: the block does not open with a clause")
    eol = "\r\n" if body[start + len(first_line) : start + len(first_line) + 2] == "\r\n" else "\n"
    gap = eol * 2 if any(not ln.strip(" \t\r") for ln in old.split("\n")) else eol
    rendered: list[str] = []
    for offset, (kw, rest) in enumerate(clauses):
        marker = ""
        if style.group("num") is not None:
            marker = f"{int(style.group('num')) + offset}{style.group('delim')}{style.group('gap')}"
        elif style.group("marker") is not None:
            marker = f"{style.group('marker')}{style.group('gap')}"
        keyword = f"**{_KEYWORDS[kw]}{style.group('inner')}**{style.group('outer')}"
        rendered.append(f"{style.group('indent')}{marker}{keyword}" + (f" {rest}" if rest else ""))
    return gap.join(rendered)


def rewrite_criterion(body: str, ac_id: str, new_text: str) -> str:
    """`body` with the criterion `ac_id` restated as `new_text`, and nothing else changed."""
    target = resolve_criterion(body, ac_id)
    start, end = target.span
    if target.format == "given-when-then":
        replacement = _gwt_text(body, target, new_text)
        expected = replacement
    else:
        expected = _single_line_text(target, new_text)
        separated = start > 0 and body[start - 1] not in " \t"
        replacement = f" {expected}" if separated else expected
    result = body[:start] + replacement + body[end:]
    # Read-back guard: the rewrite must read as the same card with only this criterion's text
    # changed. The grammar makes a failure unreachable today (a criterion's text never starts a
    # line, rendered clauses are clause lines); the guard keeps a future grammar change from
    # silently corrupting a card, so it stays even though no test can reach it.
    before = [(c.number, c.format) for c in parse_criteria(body)]
    after = parse_criteria(result)
    rewritten = [c for c in after if c.number == target.number]
    if (
        [(c.number, c.format) for c in after] != before
        or len(rewritten) != 1
        or rewritten[0].text != expected
    ):  # pragma: no cover
        raise AcceptanceError(
            "invalid-ac-text",
            f"the new text for {target.id} would change how the card's criteria read (another "
            f"criterion or format would appear); approve plain text for {target.id}, or use "
            "new-card.",
        )
    return result
