"""pairbot's answer to a comment it could not act on, and the marker that keeps it one. Pure.

    inline_code(text)                         `text` as inline code that never formats
    comment_reply_marker(number, comment, …)  `<!-- pair:reply #<n> run:<comment id> -->`
    answer_comment(decision, …)               the reply a comment gets instead of a run:
                                              refusal, usage or help (or None: it runs)
    usage_reply(error)                        "pairbot did not run `<line>`: <what>. Usage: …"
    could_not_run(line, reason)               "pairbot could not run `/pair approve`: <reason>"
    failed_tracking_body(line, author)        the card's tracking comment after that

A comment gets at most ONE reply from pairbot — a refusal, its usage, help, or why what it
asked for could not run — upserted under the marker of that comment, so a retried job or a
redelivered event edits the reply instead of posting a second one. This is the only rendering
of each: the App (`app.web.handling`) and the Action (`action/comments.py`,
`action/__main__.py`) answer with the same text under the same marker, whichever of them
received the comment (tests/domain/intake/test_intake_equivalence.py holds them together).

Everything a person (or a host, for a person) wrote is echoed one way on both surfaces: a
command line as inert inline code, a reason, an error message or an author's name as literal
prose. The reason is either a `UserError`'s own text (written by pairbot for the person, with the
remedy) or a short sentence the caller chose for a failure on pairbot's side; it is rendered
as literal prose (`mdtext.inline`: no HTML, no pings, no hidden text, one line), because it may
quote what the person typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from app.domain.intake.comment_commands import CommandError, Decision, help_text
from app.domain.text import mdtext
from hosts.markers import make_marker

REASON_LIMIT: Final = 1_000  # a reason is a sentence or two; anything longer is cut visibly
LINE_LIMIT: Final = 200  # an echoed command line; a longer one is cut visibly


@dataclass(frozen=True)
class Reply:
    """The one reply to a comment: upsert `text` under `marker`. `kind` is for the log."""

    marker: str
    text: str
    kind: Literal["refusal", "usage", "help"]


def inline_code(text: str) -> str:
    """`text` as Markdown inline code, whatever backticks it holds (an echo never formats)."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded.replace(chr(10), ' ')}{fence}"


# What a marker's run id cannot hold (each such character becomes `-`): one pass in C, where a
# character-by-character test took a quarter of a command job's CPU in the App's worker.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def comment_reply_marker(number: int, comment_id: str, fallback: str) -> str:
    """The marker of the one reply the comment `comment_id` on #`number` can get.

    A comment id may be any host's (a number, `thread/comment`, a URL): what a marker cannot
    hold becomes `-`. Without an id (an Azure Boards notification names none) `fallback`
    identifies the comment instead.
    """

    run = _UNSAFE.sub("-", comment_id) or _UNSAFE.sub("-", fallback) or "comment"
    return make_marker("reply", number, run=run)


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


def usage_reply(error: CommandError) -> str:
    """The reply to a line addressed to pairbot that runs nothing: the line (inert code),
    what was wrong (literal prose: it may quote what the person typed), then the usage."""
    line = mdtext.code(error.raw, in_table=False, limit=LINE_LIMIT)
    what = mdtext.inline(error.message.rstrip(". "), REASON_LIMIT)
    usage = error.usage if "\n" in error.usage else f"Usage: {inline_code(error.usage)}"
    return f"pairbot did not run {line}: {what}.\n\n{usage}"


def answer_comment(
    decision: Decision,
    *,
    number: int,
    comment_id: str,
    fallback: str,
    error: CommandError | None,
    verb: str | None,
    trigger: str,
) -> Reply | None:
    """The reply a comment's command gets instead of a run, or None (it runs, or — when
    `decision.silent` — nothing happens at all).

    In order: a silently ignored author gets nothing; a refused one gets the refusal; an
    allowed author's malformed line gets its usage (`error`); `help` gets the help. `number`
    is the issue or pull request the comment sits on; `fallback` identifies the comment when
    the host names no id (see `comment_reply_marker`).
    """
    if decision.silent:
        return None
    marker = comment_reply_marker(number, comment_id, fallback)
    if not decision.allowed:
        # The refusal names the author as the host spelled them (an Azure DevOps display
        # name may hold Markdown or a ping): literal prose like every echo.
        return Reply(marker, mdtext.inline(decision.reason, REASON_LIMIT), "refusal")
    if error is not None:
        return Reply(marker, usage_reply(error), "usage")
    if verb == "help":
        return Reply(marker, help_text(trigger), "help")
    return None
