"""Strip what a reader of a comment or card cannot see before the text reaches an agent.

Hidden content is how a prompt injection hides in plain sight: HTML comments render as nothing,
zero-width characters and bidi controls reorder or conceal text. The agent only ever gets what
a person reading the card would have seen.
"""

from __future__ import annotations

import re

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# Zero-width and invisible formatting characters, and the bidi embedding/override/isolate
# controls (Unicode TR9): none of them renders as a visible glyph.
_INVISIBLE = re.compile(
    "[\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"
)


def strip_invisible(text: str) -> str:
    """Remove only the invisible and bidi characters (HTML comments stay)."""
    return _INVISIBLE.sub("", text)


def strip_hidden(text: str) -> str:
    """Remove HTML comments (an unterminated one runs to the end), invisible and bidi chars.

    Repeated until nothing changes: removing one layer can assemble another
    (`<!\u200b-- … -->` becomes a comment once the zero-width space is gone, and
    `<!-<!-- -->- … -->` once the inner comment is).
    """
    while True:
        stripped = _HTML_COMMENT.sub("", _INVISIBLE.sub("", text))
        if stripped == text:
            return stripped
        text = stripped
