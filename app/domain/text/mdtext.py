"""Put untrusted text (card titles, agent notes, reproducers) into pairbot's Markdown safely. Pure.

Everything pairbot publishes on a card or PR (the tracking comment, the review comment, the
`/pair status` reply) quotes text that a user or an agent wrote. That text must not be able to:

- hide anything from the reader (HTML comments, zero-width and bidi characters);
- forge a pair marker (`<!-- pair:…`), which would make pairbot edit the wrong comment;
- break the table or the layout it sits in (`|`, newlines, an unclosed code span);
- inject HTML, links or images, or ping people with an `@mention`.

`clean` removes hidden content in one linear pass (`app.domain.text.invisible.strip_hidden`), which
leaves no `<!--` at all, not even one that removing a zero-width character or a comment
assembles (`<!\u200b--`, `<!<!-- x -->--`). `inline`, `cell` and `code` then render that clean
text as one line of Markdown.
"""

from __future__ import annotations

import re
from typing import Final

from app.domain.text.invisible import strip_hidden

EMPTY: Final = "—"
# Other C0/C1 control characters: never meaningful in a comment, some terminals act on them.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Markdown and HTML punctuation that can start markup inside a line. `\` first, so the
# escapes added for the others are not escaped again.
_MARKUP = re.compile(r"([\\`*_\[\]<>|~&#!])")
# An @mention pings its target; a zero-width space after `@` keeps the text and drops the ping
# (the way GitHub's own Dependabot quotes release notes).
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_BACKTICKS = re.compile(r"`+")
# A link target pairbot will write: http(s), a host, then only characters that cannot end the
# link, split a table cell or open markup (no spaces, parentheses, brackets, quotes, `<>|\`).
_SAFE_URL = re.compile(
    r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:[/?#][A-Za-z0-9._~!$&*+,;=:@%/?#-]*)?"
)


def clean(text: str) -> str:
    """`text` with hidden content removed (none is left) and control characters dropped."""
    return strip_hidden(_CONTROL.sub("", text))


def one_line(text: str, limit: int | None = None) -> str:
    """`clean(text)` with every run of whitespace (newlines too) made one space, and bounded."""
    flat = " ".join(clean(text).split())
    if limit is not None and len(flat) > limit:
        return flat[: max(0, limit - 1)].rstrip() + "…"
    return flat


def inline(text: str, limit: int | None = None) -> str:
    """Untrusted text as one line of literal Markdown prose (also safe in a table cell)."""
    escaped = _MARKUP.sub(r"\\\1", one_line(text, limit))
    return _MENTION.sub("@\u200b", escaped)


def cell(text: str | None, limit: int | None = 200) -> str:
    """A table cell: `inline(text)`, or an em dash when there is nothing to show."""
    if text is None or not one_line(text):
        return EMPTY
    return inline(text, limit)


def code(text: str, *, in_table: bool = True, limit: int | None = 200) -> str:
    """Untrusted text as one inline code span (CommonMark: a fence longer than any run inside).

    In a GFM table a `|` splits the cell even inside a code span unless written `\\|`, which
    the table then shows as `|`; outside a table `\\|` would show literally, so say which.
    """
    body = one_line(text, limit)
    if not body:
        return EMPTY
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`"):
        body = f" {body} "
    if in_table:
        body = body.replace("|", "\\|")
    return f"{fence}{body}{fence}"


def fenced(text: str, info: str = "") -> str:
    """Untrusted multi-line text as a fenced code block that nothing inside can close."""
    body = clean(text).replace("\r\n", "\n").replace("\r", "\n")
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body.rstrip()}\n{fence}"


def safe_url(url: str | None) -> str | None:
    """`url` if it is an http(s) URL that is safe as a Markdown link target, else None."""
    if url is None:
        return None
    url = url.strip()
    return url if _SAFE_URL.fullmatch(url) else None


def link(text: str, url: str | None) -> str:
    """`[text](url)` with the text escaped; just the escaped text when the URL is not safe."""
    target = safe_url(url)
    label = inline(text)
    return f"[{label}]({target})" if target is not None else label
