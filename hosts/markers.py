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

Two guarantees keep a republish a no-op: `render` is deterministic (the same body and tail give
the same text, never more than `MAX_BODY` characters), and an `END_MARKER` inside pairbot's body
is neutralised so the human tail is always found after the real one. Line endings and trailing
whitespace do not count as a change (a browser edit turns every newline into CRLF).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hosts.models import Author, Comment, Upserted

END_MARKER = "<!-- /pair -->"
# What an END_MARKER quoted inside pairbot's own body becomes: still invisible, no longer a close.
QUOTED_END_MARKER = "<!-- /pair (quoted) -->"
MAX_BODY = 65_536
_KIND = re.compile(r"[a-z][a-z0-9-]*")
_RUN = re.compile(r"[A-Za-z0-9._-]+")
# Any marker `make_marker` can produce (and a few hand-written ones): one line, closed, no `>`.
_MARKER = re.compile(r"<!-- pair:[a-z][a-z0-9-]*(?: [#A-Za-z0-9:._-]+)* -->")
_NOTICE = "\n\n… (truncated by pairbot: {} characters omitted to fit {})"


def make_marker(kind: str, card: int, pr: int | None = None, run: str | None = None) -> str:
    """`<!-- pair:<kind> #<card>[ PR#<n>][ run:<runId>] -->`; parts are validated."""
    if not _KIND.fullmatch(kind):
        raise ValueError(f"marker kind {kind!r} must be lowercase letters, digits and '-'")
    if run is not None and not _RUN.fullmatch(run):
        raise ValueError(f"run id {run!r} must be letters, digits, '.', '_' or '-'")
    parts = [f"pair:{kind}", f"#{card}"]
    if pr is not None:
        parts.append(f"PR#{pr}")
    if run is not None:
        parts.append(f"run:{run}")
    return f"<!-- {' '.join(parts)} -->"


def check_marker(marker: str) -> str:
    """`marker` if it is a well-formed pair marker, else ValueError.

    An empty or unclosed marker would be a prefix of every comment pairbot ever wrote, and
    `plan_upsert` would edit the wrong one.
    """
    if not _MARKER.fullmatch(marker):
        raise ValueError(f"{marker!r} is not a pair marker (<!-- pair:<kind> #<card> … -->)")
    return marker


def is_own(author: Author, identity: Author) -> bool:
    """Authored by pairbot's identity: by stable id when both have one, else by login."""
    if author.id and identity.id:
        return author.id == identity.id
    return bool(identity.login) and author.login.lower() == identity.login.lower()


def _notice(length: int) -> str:
    """The visible truncation notice for a text of `length` characters (its longest form)."""
    return _NOTICE.format(length, MAX_BODY)


def _cut(text: str, room: int) -> str:
    """`text` if it fits in `room`, else its start plus a visible notice, within `room`.

    Callers guarantee `room >= len(_notice(len(text)))` whenever `text` does not fit.
    """
    if len(text) <= room:
        return text
    keep = max(0, room - len(_notice(len(text))))
    return text[:keep] + _NOTICE.format(len(text) - keep, MAX_BODY)


def render(marker: str, body: str, tail: str = "") -> str:
    """The full comment text: marker, owned body (truncated to fit), end marker, human tail.

    Never longer than `MAX_BODY`. pairbot's body is cut first; a human tail is cut (with its
    own notice) only when it alone leaves no room for the body's notice.
    """
    body = body.replace(END_MARKER, QUOTED_END_MARKER)
    frame = len(marker) + len(END_MARKER) + 2
    if frame + len(body) + len(tail) > MAX_BODY:
        body_floor = min(len(body), len(_notice(len(body))))
        tail = _cut(tail, MAX_BODY - frame - body_floor)
        body = _cut(body, MAX_BODY - frame - len(tail))
    return f"{marker}\n{body}\n{END_MARKER}{tail}"


def same_text(stored: str, wanted: str) -> bool:
    """Equal up to line endings and trailing whitespace (what hosts and browsers rewrite)."""

    def canonical(text: str) -> str:
        return text.replace("\r\n", "\n").rstrip()

    return canonical(stored) == canonical(wanted)


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
    mine = owned_comments(comments, check_marker(marker), identity)
    if not mine:
        return UpsertPlan(Upserted.CREATED, render(marker, body))
    keeper, *rest = mine
    wanted = render(marker, body, human_tail(keeper.body))
    duplicates = tuple(c.id for c in rest)
    if same_text(keeper.body, wanted):
        return UpsertPlan(Upserted.UNCHANGED, wanted, keeper.id, duplicates)
    return UpsertPlan(Upserted.UPDATED, wanted, keeper.id, duplicates)
