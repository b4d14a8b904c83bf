"""`HostAdapter`: the cross-host algorithms, written once over the few primitives an adapter gives.

Every adapter (GitHub, Azure DevOps, the local forge) subclasses `HostAdapter`. The base owns
what must behave the same on every host; the adapter only translates single requests:

    the base writes             over the primitives the adapter provides
    upsert_comment              _marker_candidates (default: list_comments), _post_comment,
                                _edit_comment, _fetch_comment (default: found in list_comments),
                                _known_comment / _remember_comment (default: nothing kept)
    set_state_label             _read_labels, _write_labels
    find_comment (marker)       _known_comment, _marker_candidates, _remember_comment
    card_hash                   get_card
    read_scope_decision         list_comments (an adapter may read a referenced comment itself)
    all of them                 identity; _settle (default: one read), _pause (default:
                                asyncio.sleep), _exclusive (default: nothing beyond this instance)

The guarantees, the union of what each adapter used to give on its own:

- **One publication of a marker at a time.** Upserts of one (target, marker), and label changes
  of one target, are serialised in this instance; `_exclusive(target)` adds whatever else must
  be excluded (the local forge: other processes on the same directory). A concurrent upsert of
  one marker leaves exactly one comment.
- **A failed create is reconciled, never re-posted.** A create whose outcome is unknown (a 5xx,
  a timeout) is looked for by marker until that is settled (`_settle`: the host's read backoff,
  as its listing may lag its writes); a comment that landed is adopted (and brought up to date
  if someone else's write changed it meanwhile), one that did not is the original error.
- **A failed edit counts if it landed.** The comment is read until it shows the edit or the
  reads say it does not; then the original error.
- **Every write is read back.** The comment must be visible with the text written (up to line
  endings and trailing whitespace); otherwise `HostUnavailable`.
- **Exactly one `pr-state:*` label.** Other state labels are removed before the new one is
  added (`LabelPlan`: a failure part-way leaves at most one), then the labels are read again and
  planned again; a write with an unknown outcome, or refused because the labels moved under it,
  is settled the same way, for `LABEL_ROUNDS` rounds with a backoff. What still differs after
  that is the error.

Which comment is pairbot's, and what a label change must do, are the pure plans of
`hosts.markers` and `hosts.labels`; this module only runs them against a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

from hosts.cardhash import card_hash as compute_card_hash
from hosts.decisions import scope_decision_in
from hosts.errors import Conflict, HostError, HostUnavailable
from hosts.labels import LabelPlan, PrState, plan_state_labels
from hosts.markers import UpsertPlan, check_marker, owned_comments, plan_upsert, same_text
from hosts.models import Author, Card, Comment, MergeMethod, Target, Upserted, UpsertResult
from hosts.vocabulary import GITHUB, Vocabulary

log = logging.getLogger(__name__)

T = TypeVar("T")

# How many times a state-label change is read back and finished after a failed write.
LABEL_ROUNDS = 3
LABEL_BACKOFF_S = 1.0


@dataclass(frozen=True)
class Labels:
    """A target's labels as read, and the version the host stamped them with (Azure DevOps'
    work-item revision, which a write can be made conditional on; None where there is none)."""

    names: tuple[str, ...]
    version: int | str | None = None


class KeyedLocks:
    """One `asyncio.Lock` per key, kept only while someone holds or waits for it.

    It waits rather than skips: two publications of one marker must both happen, in order, so
    the later text wins; each holds it for a few requests. Forgetting idle keys keeps the map
    small and binds no lock to an event loop for longer than one contended use.
    """

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold the lock of `key` for the body of the `async with`."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


class HostAdapter(ABC):
    """The shared half of every `hosts.base.Host` adapter (see the module docstring).

    A subclass implements the rest of `Host` and the abstract primitives below; it may refine
    the optional ones. It calls `super().__init__()`.
    """

    name: str
    # What this host calls cards, labels, acknowledgements… in the messages users read
    # (`hosts.vocabulary`); an adapter of another host sets its own.
    vocabulary: Vocabulary = GITHUB

    def __init__(self) -> None:
        self._publishing = KeyedLocks()

    # -- how a card's pull request names the card ---------------------------------------------

    def closing_reference(self, card: int) -> str:
        """The sentence a card's pull request description opens with, in this host's syntax
        (GitHub: `Closes #7.`, which closes the issue on merge)."""
        return self.vocabulary.closing_reference(card)

    async def link_card(self, pull: int, card: int) -> None:
        """Link pull request `pull` to card `card` of the same host, where the host links
        them through its API (Azure DevOps: the work item's Pull Request artifact link).

        Default: nothing, the description's closing reference does it (GitHub) or there is
        nothing to link (the local forge). Idempotent."""
        return None

    # -- primitives every adapter provides ---------------------------------------------------

    @abstractmethod
    async def identity(self) -> Author:
        """pairbot's own identity on this host (markers count only on its comments)."""

    @abstractmethod
    async def get_card(self, number: int) -> Card:
        """A card by number (NotFound when there is none)."""

    @abstractmethod
    async def list_comments(self, target: Target) -> list[Comment]:
        """Every comment on a card or pull, oldest first (NotFound for an unknown target)."""

    @abstractmethod
    async def _post_comment(self, target: Target, text: str) -> str:
        """Create one comment holding exactly `text`; its id. Never retried by the adapter."""

    @abstractmethod
    async def _edit_comment(self, target: Target, comment_id: str, text: str) -> None:
        """Replace the text of comment `comment_id` on `target` with `text`."""

    @abstractmethod
    async def _read_labels(self, target: Target) -> Labels:
        """The labels (tags) of `target` as the host has them now."""

    @abstractmethod
    async def _write_labels(self, target: Target, current: Labels, plan: LabelPlan) -> None:
        """Apply `plan` to `target`, whose labels were read as `current`: remove before add.

        Each part must be idempotent (removing an absent label, adding a present one changes
        nothing); a write conditional on `current.version` raises Conflict when it moved."""

    # -- primitives an adapter may refine ----------------------------------------------------

    async def _marker_candidates(self, target: Target) -> list[Comment]:
        """The comments a marker may open, oldest first (Azure DevOps: each PR thread's first)."""
        return await self.list_comments(target)

    async def _fetch_comment(self, target: Target, comment_id: str) -> Comment | None:
        """Comment `comment_id` on `target` as it reads now; None when it is not (yet) visible."""
        return next((c for c in await self.list_comments(target) if c.id == comment_id), None)

    async def _known_comment(self, target: Target, marker: str, me: Author) -> Comment | None:
        """The comment `_remember_comment` kept for (`target`, `marker`), as it reads now, if it
        still is pairbot's and opens with `marker`; None sends the caller to the listing. An
        adapter whose listing costs more than one read refines this (GitHub: a long issue's
        pages); the default keeps nothing."""
        return None

    def _remember_comment(self, target: Target, marker: str, comment_id: str) -> None:
        """Keep the id of pairbot's comment opened by `marker` on `target`: the oldest one a
        listing showed, so every writer settles on the same keeper. Default: nothing kept."""
        return None

    async def _settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        """Read with `find` until what a write of unknown outcome left behind is settled.

        The default reads once: a host whose reads never lag its writes knows at once. A remote
        adapter reads again with its read backoff (`hosts.calls.Calls.settle`)."""
        return await find()

    async def _pause(self, seconds: float) -> None:
        """Wait between label rounds (an adapter passes its injected sleep)."""
        await asyncio.sleep(seconds)

    def _exclusive(self, target: Target) -> contextlib.AbstractAsyncContextManager[None]:
        """What must exclude a publication on `target` beyond this instance (default: nothing;
        the local forge: other processes on the same directory)."""
        return contextlib.nullcontext()

    # -- marker lookup -----------------------------------------------------------------------

    async def find_comment(self, target: Target, marker: str) -> Comment | None:
        """pairbot's comment opened by `marker` on `target` (the oldest of them), or None."""
        me = await self.identity()
        known = await self._known_comment(target, check_marker(marker), me)
        if known is not None:
            return known
        found = owned_comments(await self._marker_candidates(target), marker, me)
        if not found:
            return None
        self._remember_comment(target, marker, found[0].id)
        return found[0]

    # -- comments ----------------------------------------------------------------------------

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        """Create, update or leave the comment keyed by `marker`; read back to confirm."""
        check_marker(marker)
        me = await self.identity()
        async with self._publishing.hold(("comment", target, marker)), self._exclusive(target):
            known = await self._known_comment(target, marker, me)
            comments = [known] if known is not None else await self._marker_candidates(target)
            plan = plan_upsert(comments, marker, body, me)
            if plan.action is Upserted.UNCHANGED:
                keeper = next(c for c in comments if c.id == plan.comment_id)
                self._remember_comment(target, marker, keeper.id)
                return UpsertResult(Upserted.UNCHANGED, keeper, plan.duplicates)
            if plan.action is Upserted.CREATED:
                plan = await self._create(target, marker, body, plan, me)
            else:
                await self._edit(target, _keeper_id(plan), plan.body)
            confirmed = await self._confirm(target, _keeper_id(plan), plan.body)
            # Not a comment this upsert created: another writer's may be older, and only a
            # listing says which one every writer keeps (the next upsert reads it).
            if plan.action is Upserted.UPDATED:
                self._remember_comment(target, marker, confirmed.id)
            return UpsertResult(plan.action, confirmed, plan.duplicates)

    async def _create(
        self, target: Target, marker: str, body: str, plan: UpsertPlan, me: Author
    ) -> UpsertPlan:
        """Post `plan.body`; the plan with the new comment's id. A create whose outcome is
        unknown is looked for by marker until settled: adopted if it landed (and brought up to
        date when another writer changed it), else the original error."""
        op = f"comment on {target.kind} #{target.number}"
        try:
            comment_id = await self._post_comment(target, plan.body)
        except HostUnavailable:

            async def landed() -> list[Comment] | None:
                comments = await self._marker_candidates(target)
                return comments if owned_comments(comments, marker, me) else None

            comments = await self._settle(op, landed)
            if comments is None:
                raise
            again = plan_upsert(comments, marker, body, me)
            log.warning("%s: failed after storing comment %s; keeping it", op, again.comment_id)
            if again.action is Upserted.UPDATED:
                await self._edit(target, _keeper_id(again), again.body)
            return UpsertPlan(Upserted.CREATED, again.body, again.comment_id, again.duplicates)
        return UpsertPlan(Upserted.CREATED, plan.body, comment_id, plan.duplicates)

    async def _edit(self, target: Target, comment_id: str, text: str) -> None:
        """Edit a comment; an edit that failed counts when the comment reads back with it."""
        try:
            await self._edit_comment(target, comment_id, text)
        except HostUnavailable:

            async def landed() -> Comment | None:
                stored = await self._fetch_comment(target, comment_id)
                return stored if stored is not None and same_text(stored.body, text) else None

            if await self._settle(f"edit comment {comment_id}", landed) is None:
                raise
            log.warning("edit of comment %s failed after it was stored; it counts", comment_id)

    async def _confirm(self, target: Target, comment_id: str, text: str) -> Comment:
        """The comment as it reads back, which must be `text` (up to what hosts rewrite)."""
        where = f"comment {comment_id} on {target.kind} #{target.number}"

        async def visible() -> Comment | None:
            return await self._fetch_comment(target, comment_id)

        stored = await self._settle(f"read back {where}", visible)
        if stored is None:
            raise HostUnavailable(f"{self.name}: {where} did not read back: it is not visible")
        if not same_text(stored.body, text):
            raise HostUnavailable(f"{self.name}: {where} did not read back as written")
        return stored

    # -- state labels ------------------------------------------------------------------------

    async def set_state_label(self, target: Target, state: PrState) -> bool:
        """Converge `target` on `state` as its one `pr-state:*` label; True when it wrote.

        Read, plan, write, then read again until the plan is empty. A write that failed with an
        unknown outcome (HostUnavailable) or against labels that moved (Conflict) is settled by
        reading and finishing, for `LABEL_ROUNDS` rounds with a backoff; what still differs
        after that is the error.
        """
        wrote = False
        failure: HostError | None = None
        where = f"{target.kind} #{target.number}"
        async with self._publishing.hold(("labels", target)), self._exclusive(target):
            for attempt in range(LABEL_ROUNDS + 1):
                current = await self._read_labels(target)
                plan = plan_state_labels(current.names, state)
                if plan.noop:
                    return wrote
                if attempt == LABEL_ROUNDS:
                    break
                if failure is not None:
                    await self._pause(LABEL_BACKOFF_S * 2 ** (attempt - 1))
                wrote = True
                try:
                    await self._write_labels(target, current, plan)
                except (HostUnavailable, Conflict) as error:
                    log.warning("%s: %s; reading the labels again to finish", where, error)
                    failure = error
        if failure is not None:
            raise failure
        raise Conflict(f"{where} reads back labels that still need {plan}")

    # -- reads every host answers the same way -----------------------------------------------

    async def merge_methods(self) -> frozenset[MergeMethod] | None:
        """None: this host does not say which merge methods the repository accepts (an
        adapter whose host does overrides this), so the configured or preferred one is tried."""
        return None

    async def card_hash(self, number: int) -> str:
        """The card hash (hosts.cardhash) of the card as it is now."""
        card = await self.get_card(number)
        return compute_card_hash(card.title, card.body)

    async def read_scope_decision(
        self,
        pull: int,
        comment_ref: str | None = None,
        *,
        prefer: Callable[[Comment], bool] | None = None,
    ) -> Comment | None:
        """The referenced comment, or the newest one holding a fenced scope-decision JSON
        (the newest `prefer` accepts, when it accepts any); pairbot's own packet is never the
        maintainer's answer (`hosts.decisions`)."""
        me = await self.identity()
        comments = await self.list_comments(Target("pull", pull))
        return scope_decision_in(comments, comment_ref, identity=me, prefer=prefer)


def _keeper_id(plan: UpsertPlan) -> str:
    """The id of the comment a plan writes to (set once the comment exists)."""
    if plan.comment_id is None:
        raise HostError("upsert: no comment id to write to")  # unreachable: a plan bug
    return plan.comment_id
