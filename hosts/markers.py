"""Marker-keyed comments: find pairbot's own comment and plan an idempotent write. Pure.

Every comment pairbot writes opens with a hidden marker and closes its owned section:

    <!-- pair:<kind> #<card> PR#<n> run:<runId> -->
    …pairbot's text…
    <!-- /pair -->
    …anything a human adds after this line survives every update…

`plan_upsert` decides create / update / unchanged from the comments a host returned. A marker
counts only on a comment authored by pairbot's own identity (a human's pasted copy is never
edited); when several of pairbot's comments carry it, the oldest is kept and the others are
reported as duplicates (a host never deletes on its own initiative).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hosts.models import Author, Comment, Upserted

END_MARKER = "<!-- /pair -->"
MAX_BODY = 65_536
_KIND = re.compile(r"^[a-z][a-z0-9-]*$")
_RUN = re.compile(r"^[A-Za-z0-9._-]+$")


def make_marker(kind: str, card: int, pr: int | None = None, run: str | None = None) -> str:
    """`<!-- pair:<kind> #<card>[ PR#<n>][ run:<runId>] -->`; parts are validated."""
    if not _KIND.match(kind):
        raise ValueError(f"marker kind {kind!r} must be lowercase letters, digits and '-'")
    if run is not None and not _RUN.match(run):
        raise ValueError(f"run id {run!r} must be letters, digits, '.', '_' or '-'")
    parts = [f"pair:{kind}", f"#{card}"]
    if pr is not None:
        parts.append(f"PR#{pr}")
    if run is not None:
        parts.append(f"run:{run}")
    return f"<!-- {' '.join(parts)} -->"


def is_own(author: Author, identity: Author) -> bool:
    """Authored by pairbot's identity: by stable id when both have one, else by login."""
    if author.id and identity.id:
        return author.id == identity.id
    return author.login.lower() == identity.login.lower()


def render(marker: str, body: str, tail: str = "") -> str:
    """The full comment text: marker, owned body (truncated to fit), end marker, human tail."""
    frame = len(marker) + len(END_MARKER) + len(tail) + 2
    room = MAX_BODY - frame
    if len(body) > room:
        notice = f"\n\n… (truncated by pairbot: {{}} characters omitted to fit {MAX_BODY})"
        keep = max(0, room - len(notice.format(len(body))))
        body = body[:keep] + notice.format(len(body) - keep)
    return f"{marker}\n{body}\n{END_MARKER}{tail}"


def human_tail(text: str) -> str:
    """What follows pairbot's owned section (kept verbatim on update)."""
    index = text.find(END_MARKER)
    return "" if index < 0 else text[index + len(END_MARKER) :]


@dataclass(frozen=True)
class UpsertPlan:
    """What to do: create, update `comment_id` to `body`, or nothing."""

    action: Upserted
    body: str
    comment_id: str | None = None
    duplicates: tuple[str, ...] = ()


def owned_comments(comments: Sequence[Comment], marker: str, identity: Author) -> list[Comment]:
    """pairbot's comments carrying `marker`, oldest first (stable for equal timestamps)."""
    mine = [c for c in comments if is_own(c.author, identity) and c.body.startswith(marker)]
    return sorted(mine, key=lambda c: c.created_at)


def plan_upsert(
    comments: Sequence[Comment], marker: str, body: str, identity: Author
) -> UpsertPlan:
    """Decide the idempotent write of `body` under `marker` among `comments`."""
    mine = owned_comments(comments, marker, identity)
    if not mine:
        return UpsertPlan(Upserted.CREATED, render(marker, body))
    keeper, *rest = mine
    wanted = render(marker, body, human_tail(keeper.body))
    duplicates = tuple(c.id for c in rest)
    if keeper.body == wanted:
        return UpsertPlan(Upserted.UNCHANGED, wanted, keeper.id, duplicates)
    return UpsertPlan(Upserted.UPDATED, wanted, keeper.id, duplicates)
