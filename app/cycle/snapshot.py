"""The card as it was when its command was accepted: the only card text an agent is given.

    record(pm, clock, locus, card, ...)        read the card and its comments once, keep what
                                               existed when the command was posted, journal it
    quotes(snapshot)                           the snapshot as attributed, quoted pieces

The snapshot is taken when pairbot accepts a command that runs the cycle (implement, refine,
answer, feedback, retry, approve) and stored in the card's journal (`cycle` entry `snapshot`);
every later step of the cycle reuses the latest one, so nothing written afterwards reaches the
agent until a maintainer's next command. The cut-off is the moment the command's comment was
created (the moment pairbot accepted it, for a command from the CLI or a pull request):

- a comment created after the cut-off is left out;
- a comment edited after the cut-off by an author without write access is left out (its text
  then is not the text that stood when the command was given);
- pairbot's own comments and other bots' are left out (they are pairbot's record, not the card);
- each text is capped (`app.domain.text.invisible.cap`), and at most MAX_COMMENTS comments are kept,
  the latest ones.

Each piece carries its author's login and role: the card's author or a commenter, with or
without write access to the repository (the host's permission, read once per author).
The card's own title and body are read when the command is accepted: a host keeps no history of
them that pairbot could read, so an edit between the command and its acceptance (seconds in the
Action and the App) is the one window left.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from app.cycle.schedule import card_key
from app.domain.text.invisible import cap
from app.engine.instructions import Quoted
from app.engine.runstate import RunLocus
from app.engine.step import Clock, journal_event
from hosts.base import Host
from hosts.errors import HostError
from hosts.models import WRITE_PERMISSIONS, Author, Target

MAX_COMMENTS = 50
_OWN_MARKER = "<!-- pair:"


async def record(
    pm: Host, clock: Clock, locus: RunLocus, card: int, *, trigger_comment: str | None
) -> dict[str, Any]:
    """Read the card and its comments, keep what stood at the command, journal it."""
    found = await pm.get_card(card)
    comments = await pm.list_comments(Target("card", card))
    now = clock()
    trigger = next((c for c in comments if trigger_comment and c.id == trigger_comment), None)
    cutoff = _when(trigger.created_at) if trigger is not None else None
    cutoff = cutoff or (now if now.tzinfo else now.replace(tzinfo=UTC))
    writers: dict[str, bool] = {}

    async def writes(author: Author) -> bool:
        if author.login not in writers:
            writers[author.login] = False
            with contextlib.suppress(HostError):
                writers[author.login] = await pm.permission(author.login) in WRITE_PERMISSIONS
        return writers[author.login]

    kept: list[dict[str, Any]] = []
    for comment in comments:
        if comment.author.is_bot or comment.body.lstrip().startswith(_OWN_MARKER):
            continue
        created = _when(comment.created_at)
        if created is not None and created > cutoff:
            continue
        writer = await writes(comment.author)
        edited = _when(comment.updated_at)
        if edited is not None and edited > cutoff and not writer:
            continue
        kept.append(
            {
                "id": comment.id,
                "author": comment.author.login,
                "writes": writer,
                "createdAt": comment.created_at,
                "body": cap(comment.body)[0],
            }
        )
    author = found.author
    snapshot: dict[str, Any] = {
        "event": "snapshot",
        "at": cutoff.isoformat(),
        "card": card,
        "title": cap(found.title)[0],
        "body": cap(found.body)[0],
        "author": author.login if author is not None else None,
        "authorWrites": (await writes(author)) if author is not None else None,
        "comments": kept[-MAX_COMMENTS:],
    }
    journal_event(locus, clock, kind="cycle", key=card_key(card), data=snapshot)
    return snapshot


def quotes(snapshot: dict[str, Any]) -> tuple[Quoted, ...]:
    """The snapshot as the agent reads it: title, body, then each comment, attributed."""
    number = snapshot.get("card")
    writes = snapshot.get("authorWrites")
    access = ""
    if writes is not None:
        access = ", with write access" if writes else ", without write access"
    role = f"the card's author{access}"
    author = snapshot.get("author")
    pieces = [
        Quoted(f"Card #{number}: its title", author, role, str(snapshot.get("title", ""))),
        Quoted(f"Card #{number}: its body", author, role, str(snapshot.get("body", ""))),
    ]
    for comment in snapshot.get("comments") or ():
        commenter = (
            "a maintainer with write access"
            if comment.get("writes")
            else "a commenter without write access"
        )
        if comment.get("author") == author and author is not None:
            commenter = f"{role} ({commenter})"
        pieces.append(
            Quoted(
                f"A comment on card #{number} ({comment.get('createdAt') or 'undated'})",
                comment.get("author"),
                commenter,
                str(comment.get("body", "")),
            )
        )
    return tuple(pieces)


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
