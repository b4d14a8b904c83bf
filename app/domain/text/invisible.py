"""Characters a reader never sees, removed: invisible format characters, bidi runs, HTML comments;
and the cap on how much untrusted text is read at all. Pure; one pass each.

    cap(text)              at most MAX_CHARS characters, cut at a line break
    strip_invisible(text)  zero-width / invisible format characters removed and every bidi
                           embedding, override or isolate run dropped whole: from its opening
                           control (U+202A-U+202E, U+2066-U+2068) to its matching PDF / PDI or
                           the end of the line; line breaks are kept
    strip_percent_encoded(text)
                           every run of %XX escapes that decodes (as UTF-8) to one of those
                           characters re-encoded without it: a link target cannot carry them
    strip_hidden(text)     strip_invisible, then HTML comments removed in one pass so that no
                           `<!--` is left; for short plain fields (titles, goals) and for text
                           pairbot re-escapes itself

What is removed: the Unicode tag characters (U+E0000-U+E007F, invisible ASCII look-alikes),
zero-width and invisible format characters (U+200B-U+200D, U+2060-U+2064, U+FEFF, U+00AD,
U+034F, U+180E), the bidi marks (U+200E, U+200F, U+061C), the bidi embeddings, overrides and
isolates with their runs, and every variation selector (U+FE00-U+FE0F, U+E0100-U+E01EF). The
rule for variation selectors is the simple safe one: all of them go from text that reaches a
prompt, a command or a decision, even U+FE0F after a visible emoji (❤️ becomes ❤, the same
character in its text presentation), because a run of them is a channel that carries bytes
no reader sees. Text pairbot shows a person keeps them only where it never passes through here.

These passes run on the final decoded text: `app.domain.text.html_scan` decodes every HTML
reference (named, decimal, hex) and strips after decoding, and `reader_text` strips its final
text again, so no entity spelling (`&#xE0053;`, `&#x202E;`, `&ZeroWidthSpace;`) gets through.
`strip_invisible` is idempotent (`strip(strip(x)) == strip(x)`), and what it leaves holds none
of these characters, so decoding it again cannot re-create one from a removed character; text
that spells a reference (`&#x200B;` shown as such) is visible to a reader and stays text.

The Markdown / HTML reading built on these is `app.domain.text.sanitize`.
"""

from __future__ import annotations

import re
from typing import Final

MAX_CHARS: Final = 65_536

LINE_END = re.compile(r"\r\n?")
# Zero-width and invisible formatting characters: none of them renders as a visible glyph.
# U+E0000-U+E007F are the "tag" characters, invisible ASCII look-alikes used to smuggle text.
# Variation selectors (U+FE00-U+FE0F, U+E0100-U+E01EF) only pick a glyph's presentation; a run
# of them is a channel for hidden bytes, so all of them go (see the module docstring).
_INVISIBLE = re.compile(
    "[\u200b\u200c\u200d\u2060-\u2064\ufeff\u00ad\u034f\u180e\u200e\u200f\u061c"
    "\U000e0000-\U000e007f\ufe00-\ufe0f\U000e0100-\U000e01ef]"
)
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_EMBEDDINGS: Final = frozenset("\u202a\u202b\u202d\u202e")  # closed by PDF U+202C
_ISOLATES: Final = frozenset("\u2066\u2067\u2068")  # closed by PDI U+2069
_PDF: Final = "\u202c"
_PDI: Final = "\u2069"
_BIDI_OR_BREAK = re.compile("[\u202a-\u202e\u2066-\u2069\n]")
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
_BIDI_TO_EOL = re.compile("[\u202a-\u202e\u2066-\u2069][^\n]*")
_MAX_BIDI: Final = 256
_BIDI_CHARS: Final = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def cap(text: str) -> tuple[str, int]:
    """`text` cut to at most MAX_CHARS at its last line break, and how many characters went."""
    if len(text) <= MAX_CHARS:
        return text, 0
    cut = text.rfind("\n", 0, MAX_CHARS + 1)
    kept = text[:cut] if cut > 0 else ""
    return kept, len(text) - len(kept)


def drop_format_chars(text: str) -> str:
    """The invisible characters removed, bidi controls kept: for a piece of a longer text whose
    bidi runs are dropped when it is whole (a run may go on past the piece)."""
    return _INVISIBLE.sub("", text)


def strip_invisible(text: str) -> str:
    """Invisible characters removed and every bidi run dropped whole (line breaks kept)."""
    if text.isascii():  # O(1) in CPython; every character removed here is outside ASCII
        return text
    return _drop_bidi_runs(_INVISIBLE.sub("", text))


def strip_percent_encoded(text: str) -> str:
    """Each run of %XX escapes that decodes to an invisible character, re-encoded without it
    (bytes that are not UTF-8 kept as they were). Linear: each run is decoded once."""
    if "%" not in text:
        return text
    return _PERCENT_RUN.sub(_clean_run, text)


def _clean_run(match: re.Match[str]) -> str:
    run = match.group()
    decoded = bytes.fromhex(run.replace("%", "")).decode("utf-8", "surrogateescape")
    cleaned = strip_invisible(decoded)
    if cleaned == decoded:
        return run
    return "".join(f"%{byte:02X}" for byte in cleaned.encode("utf-8", "surrogateescape"))


def strip_hidden(text: str) -> str:
    """`strip_invisible`, then HTML comments removed (an unterminated one runs to the end)
    so that none is left, not even one assembled by removing another (`<!-<!-- -->-`)."""
    return _drop_comments(strip_invisible(LINE_END.sub("\n", text)))


def _drop_bidi_runs(text: str) -> str:
    """Drop each bidi run from its opening control to its matching close or the line's end.

    Unicode TR9: PDF closes the innermost embedding or override, PDI closes the innermost
    isolate and every embedding opened inside it; an unmatched close is dropped alone. A run
    closed mid-line becomes one space (`_closed`).
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
                _closed(stack, out)
        elif isolates:  # PDI with an open isolate
            while stack.pop() not in _ISOLATES:
                pass
            isolates -= 1
            _closed(stack, out)
    if not stack:
        out.append(text[pos:])
    return "".join(out)


def _closed(stack: list[str], out: list[str]) -> None:
    """A run closed mid-line leaves a space where it was: the text on its two sides is never
    joined into a word the reader did not see (`/pa<U+202E>zz<U+202C>ir` shows `/pazzir`,
    and must not read `/pair`)."""
    if not stack:
        out.append(" ")


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
