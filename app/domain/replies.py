"""pairbot's answer to a comment it could not act on, and the marker that keeps it one. Pure.

    inline_code(text)                         `text` as inline code that never formats
    comment_reply_marker(number, comment, …)  `<!-- pair:reply #<n> run:<comment id> -->`
    could_not_run(line, reason)               "pairbot could not run `/pair approve`: <reason>"
    failed_tracking_body(line, author)        the card's tracking comment after that

A comment gets at most ONE reply from pairbot — a refusal, its usage, help, or why what it
asked for could not run — upserted under the marker of that comment, so a retried job or a
redelivered event edits the reply instead of posting a second one. The App's worker
(`app.web.handling`) and the Action (`action/__main__.py`) answer with the same text under the
same marker.

The reason is either a `UserError`'s own text (written by pairbot for the person, with the
remedy) or a short sentence the caller chose for a failure on pairbot's side; it is rendered
as literal prose (`mdtext.inline`: no HTML, no pings, no hidden text, one line), because it may
quote what the person typed.
"""

from __future__ import annotations

import re
from typing import Final

from app.domain import mdtext
from hosts.markers import make_marker

REASON_LIMIT: Final = 1_000  # a reason is a sentence or two; anything longer is cut visibly


def inline_code(text: str) -> str:
    """`text` as Markdown inline code, whatever backticks it holds (an echo never formats)."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded.replace(chr(10), ' ')}{fence}"


def comment_reply_marker(number: int, comment_id: str, fallback: str) -> str:
    """The marker of the one reply the comment `comment_id` on #`number` can get.

    A comment id may be any host's (a number, `thread/comment`, a URL): what a marker cannot
    hold becomes `-`. Without an id (an Azure Boards notification names none) `fallback`
    identifies the comment instead.
    """

    def safe(text: str) -> str:
        return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-" for ch in text)

    return make_marker("reply", number, run=safe(comment_id) or safe(fallback) or "comment")


def could_not_run(line: str | None, reason: str) -> str:
    """The reply to a command (`line`, e.g. `/pair approve`) or, without a line, to a scope
    decision that stopped with `reason`."""
    what = f"run {inline_code(line)}" if line else "apply this scope decision"
    return f"pairbot could not {what}: {mdtext.inline(reason, REASON_LIMIT)}"


def failed_tracking_body(line: str, author: str) -> str:
    """The card's tracking comment once the command it announced ("queued … runs next", the
    App's acknowledgement) failed for good: it no longer announces a run that will not come.
    The reply to the comment says why; the card's next step rewrites this."""
    by = f" (requested by **{mdtext.inline(author, 100)}**)" if author else ""
    return f"{inline_code(line)}{by} could not run; the reply to that comment says why."
