"""Catch-up: a scheduled tick first looks for a command whose own run never happened.

A `/pair` comment can be lost on its way to a run: GitHub cancels a pending run of a
concurrency group when a newer one queues, a run fails before the lock, Actions is down; an
Azure DevOps service hook hands its notification once, and that pipeline run can fail or be
skipped. So a tick of every batch (the schedule's, a manual one, a chained next run) first
lists the comments made since the last look — one bounded listing on the host
(`hosts.base.RecentCommentsSource`) — and handles the oldest unhandled command instead of a
plain tick, exactly as its comment's own run would have (authorization, 👀 or like, the step).
The rest wait for later runs, and the run asks for the next one while some remain.

    settings = read_catchup(env)                   PAIR_CATCHUP_WINDOW_S, PAIR_CATCHUP_GRACE_S
    since = look_from(read_cursor(state), now, settings)
    listing = await source.recent(since)          the platform's reading of the host's comments
    choice = choose(listing, handled_in(state), now, settings, cursor)

A comment is an unhandled command when the platform's reading finds a command by a person in
it (the shared intake, `app.domain.intake.intent`: pairbot's own comments and other bots are
not commands), it is older than the grace period (its own run may still be queued), and none
of these says it was handled: its key in `.pair/deliveries.json` (every comment a run handled
is remembered there, `action.run.act`), its delivery among the `command` records of any
batch's journal (`app.cycle.driver`: `comment-<id>` for a GitHub comment), or a reply of
pairbot's under the comment's own marker (`run:<comment id>`) in the same listing.

The cursor, `.pair/catchup.json` on the state branch, holds the newest `created_at` scanned
up to which nothing is left; the first look goes back `window_s` (24 hours), and no look ever
goes further back than that. Light: no host, no engine (the listing is the platform's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from action.run.settings import get
from app.errors import UserError
from hosts.errors import HostError

if TYPE_CHECKING:
    from app.domain.intake.intent import Comment

__all__ = [
    "CATCHUP_FILE",
    "CatchupSettings",
    "CatchupSource",
    "Choice",
    "Found",
    "Listing",
    "choose",
    "handled_in",
    "look",
    "look_from",
    "read_catchup",
    "read_cursor",
    "replied_ids",
    "write_cursor",
]

CATCHUP_FILE: Final = ".pair/catchup.json"  # on the state branch (`action.statefiles`)
ENV_WINDOW: Final = "PAIR_CATCHUP_WINDOW_S"
ENV_GRACE: Final = "PAIR_CATCHUP_GRACE_S"
DEFAULT_WINDOW_S: Final = 24 * 3600.0
MAX_WINDOW_S: Final = 30 * 24 * 3600.0
DEFAULT_GRACE_S: Final = 300.0
MAX_GRACE_S: Final = 24 * 3600.0
# An idle tick pushes its cursor (taking the lock) only once the listing holds this many
# comments: below it, the next look costs the same one page anyway.
PUSH_AFTER: Final = 100
_VERSION: Final = 1
# pairbot's reply to (or acknowledgement of) one comment: `<!-- pair:reply #7 run:1000001 -->`.
_ANSWERED = re.compile(r"<!-- pair:(?:reply|ack) #([0-9]+)(?: PR#[0-9]+)? run:([0-9-]+) -->")


@dataclass(frozen=True)
class CatchupSettings:
    """How far back a first look goes (0: no catch-up) and how old a comment must be."""

    window_s: float = DEFAULT_WINDOW_S
    grace_s: float = DEFAULT_GRACE_S

    @property
    def enabled(self) -> bool:
        return self.window_s > 0


@dataclass(frozen=True)
class Found:
    """One command a listing found: when it was made, its reading, and how a run records it
    (`key` in `.pair/deliveries.json`; `journal`, the delivery its comment's run journals)."""

    created: datetime
    intent: Comment
    key: str
    journal: str


@dataclass(frozen=True)
class Listing:
    """What one look found: the commands by people (oldest first), the comments pairbot
    answered (`replied_ids`), when each scanned comment was made, and whether the listing
    reached its end."""

    found: tuple[Found, ...] = ()
    replied: frozenset[str] = frozenset()
    scanned: tuple[datetime, ...] = ()
    complete: bool = True


@dataclass(frozen=True)
class Choice:
    """The command to handle now (None: none), how many wait behind it, the cursor to keep."""

    pick: Found | None
    more: int
    cursor: datetime | None
    push: bool  # whether the cursor is worth a push on its own (an idle tick)


class CatchupSource(Protocol):
    """A platform's listing of its host's recent comments, read as the comment event would."""

    async def recent(self, since: datetime) -> Listing:
        """The comments made since `since` (one bounded listing), as a `Listing`."""
        ...

    async def aclose(self) -> None:
        """Close the host's connection."""
        ...


def _seconds(env: Mapping[str, str], name: str, default: float, top: float, what: str) -> float:
    raw = get(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= top:  # NaN fails too
        raise UserError(
            f"{name}={raw!r} is not allowed; allowed: a number of seconds from 0 to {top:.0f} "
            f"({what}; default {default:.0f})"
        )
    return value


def read_catchup(env: Mapping[str, str]) -> CatchupSettings:
    """PAIR_CATCHUP_WINDOW_S and PAIR_CATCHUP_GRACE_S; `UserError` naming a bad one."""
    return CatchupSettings(
        window_s=_seconds(
            env, ENV_WINDOW, DEFAULT_WINDOW_S, MAX_WINDOW_S, "how far back a tick looks; 0: never"
        ),
        grace_s=_seconds(
            env, ENV_GRACE, DEFAULT_GRACE_S, MAX_GRACE_S, "how old a comment must be first"
        ),
    )


def _parse(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def read_cursor(root: Path) -> datetime | None:
    """The cursor under `root` (None: never looked, or a file that is not pairbot's)."""
    try:
        data = json.loads((root / CATCHUP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return None
    return _parse(data.get("cursor"))


def write_cursor(root: Path, cursor: datetime) -> None:
    """Keep `cursor` under `root` (pushed with the run-state)."""
    text = json.dumps({"version": _VERSION, "cursor": cursor.astimezone(UTC).isoformat()})
    path = root / CATCHUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")  # whole or not at all
    temporary.write_text(text + "\n", encoding="utf-8")
    temporary.replace(path)


def look_from(cursor: datetime | None, now: datetime, settings: CatchupSettings) -> datetime:
    """Where a look starts: the cursor, but never more than the window back. Pure."""
    floor = now - timedelta(seconds=settings.window_s)
    return floor if cursor is None or cursor < floor else cursor


def replied_ids(comments: Iterable[tuple[str, bool]]) -> frozenset[str]:
    """The comments pairbot answered, as `<number>:<comment id>` (Azure DevOps numbers comments
    per work item), from (body, written by pairbot) pairs. Pure."""
    ids: set[str] = set()
    for body, own in comments:
        if own and (found := _ANSWERED.match(body.lstrip())) is not None:
            ids.add(f"{found.group(1)}:{found.group(2).replace('-', '/')}")
    return frozenset(ids)


def handled_in(root: Path, deliveries_file: str) -> frozenset[str]:
    """Every key and delivery the run-state under `root` records as handled: the deliveries
    file's and each batch journal's `command` deliveries."""
    seen: set[str] = set()
    try:
        data = json.loads((root / deliveries_file).read_text(encoding="utf-8"))
        handled = data.get("handled") if isinstance(data, dict) else None
        seen.update(i for i in handled or () if isinstance(i, str))
    except (OSError, ValueError, RecursionError, TypeError):
        pass
    for journal in (root / ".pair" / "batches").glob("*/run/journal.jsonl"):
        seen.update(_commands(journal))
    return frozenset(seen)


def _commands(journal: Path) -> Iterable[str]:
    try:
        lines = journal.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ()
    out: list[str] = []
    for line in lines:
        if '"command"' not in line:  # most records are steps: skip them unparsed
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        data = record.get("data") if isinstance(record, dict) else None
        if isinstance(data, dict) and data.get("event") == "command":
            out.append(str(data.get("delivery")))
    return out


def choose(
    listing: Listing,
    handled: Callable[[Found], bool],
    now: datetime,
    settings: CatchupSettings,
    cursor: datetime | None,
) -> Choice:
    """The oldest unhandled command old enough to take, and the cursor to keep. Pure.

    The cursor never passes a command still to take (nor one within the grace period): with a
    pick, it stops at the pick (handled once this run pushes); without, it moves to the newest
    comment scanned that is older than the grace period."""
    ripe = now - timedelta(seconds=settings.grace_s)
    waiting = [
        f
        for f in listing.found
        if f.created <= ripe
        and f"{f.intent.card}:{f.intent.comment.id}" not in listing.replied
        and not handled(f)
    ]
    if waiting:
        pick = waiting[0]
        return Choice(pick, len(waiting) - 1, max(pick.created, cursor or pick.created), True)
    settled = [when for when in listing.scanned if when <= ripe]
    newest = max(settled, default=None)
    if newest is None or (cursor is not None and newest <= cursor):
        return Choice(None, 0, cursor, False)
    big = len(listing.scanned) >= PUSH_AFTER or not listing.complete
    return Choice(None, 0, newest, big)


async def look(
    source: CatchupSource,
    state: Path,
    settings: CatchupSettings,
    deliveries_file: str,
    say: Callable[[str], None],
) -> Choice | None:
    """One look through `source`, judged against the run-state under `state`; None when the
    host could not be listed (said once: the next tick looks again, nothing is lost)."""
    now = datetime.now(UTC)
    cursor = read_cursor(state)
    try:
        listing = await source.recent(look_from(cursor, now, settings))
    except HostError as err:
        say(f"pairbot: could not look for missed commands ({err}); the next tick looks again")
        return None
    finally:
        await source.aclose()
    handled = handled_in(state, deliveries_file)
    choice = choose(
        listing, lambda f: f.key in handled or f.journal in handled, now, settings, cursor
    )
    if choice.pick is not None:
        intent = choice.pick.intent
        where = f"{'PR ' if intent.is_pull else ''}#{intent.card}"
        say(
            f"pairbot: catching up on a command nobody ran: comment {intent.comment.id} by "
            f"{intent.author_login or 'someone'} on {where} ({choice.more} more waiting)"
        )
    return choice
