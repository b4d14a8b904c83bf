"""A card's status as every view shows it: the CLI, the App's page, and the tracking comment.

    card_status(records, key, parks) -> CardStatus   pure: a card batch's journal and parks
    read_card_status(root, batch) -> CardStatus | None   the same, read from a checkout

The tracking comment is where a card's status is written: each time the cycle publishes it,
the status, the next step and the reason it shows are journaled with it (`tracking` records,
`app.cycle.records`). Every other view reads them back through `card_status` instead of
deriving a status of its own, so `pairbot batch status card-7`, the status page and the
comment on the card never disagree. (The engine's derivation of a plain batch cannot stand in:
a card's plan and work live on its branch, not in the checkout, and its end of cycle — review
read back, scope decision, synthesis, merge gate — is the cycle's, not the engine's.)

What the cycle recorded after the last publication still counts, because it is the truth the
next publication will show: a park (`blocked`, `needs-input`, `awaiting-approval`, or a failed
step's `failed-<stage>`), an abandonment, or a step found left unfinished by a dead run. A step
running right now is shown as the comment shows it until it ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.cycle.records import fold_cycle
from app.cycle.schedule import card_of
from app.cycle.state import park_status
from app.domain.reports.explain import NEXT_TEXT
from app.engine import jsonl
from app.engine.runstate import Park, RunLocus, read_parks
from hosts.labels import PREFIX, PrState

# Where the card's cycle is over, or waits for the maintainer's merge: `done` in batch terms.
_DONE = frozenset({"ready-for-merge", "merged", "abandoned"})


@dataclass(frozen=True)
class CardStatus:
    """What one card's views say: its `pr-state` status, the step that runs next, and why."""

    card: int
    status: str  # a `pr-state` status name: "awaiting-approval"
    next: str | None  # a step name ("publish"), None when nothing runs on its own
    why: str

    @property
    def label(self) -> str:
        """The `pr-state:*` label."""
        return PREFIX + self.status

    @property
    def done(self) -> bool:
        """The cycle is over, or only the maintainer's merge is left."""
        return self.status in _DONE

    @property
    def next_text(self) -> str:
        """`publish: publish the synthesis comment and read it back`, or `none`."""
        if self.next is None:
            return "none"
        return f"{self.next}: {NEXT_TEXT.get(self.next, self.next)}"

    def to_text(self) -> str:
        """`pairbot batch status card-N` for people: the tracking comment's own lines."""
        lines = [f"card #{self.card}: {self.status} ({self.label})", f"next: {self.next_text}"]
        if self.why:
            lines.append(f"why: {self.why}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """`pairbot batch status card-N --json`: the batch status shape, with the card's."""
        key = f"card-{self.card}"
        change: dict[str, Any] = {"status": self.status, "phase": "card", "next": self.next}
        if self.why:
            change["reason"] = self.why
        return {
            "batch": key,
            "done": self.done,
            "next": (
                {"kind": "change", "phase": "card", "change": key, "transition": self.next}
                if self.next is not None
                else None
            ),
            "why": self.why or None,
            "changes": {key: change},
            "phases": {"card": {"gated": False, "proofRequired": False, "proof": None}},
            "card": {
                "number": self.card,
                "status": self.status,
                "label": self.label,
                "next": self.next,
                "why": self.why,
            },
        }


def card_status(
    records: Sequence[Mapping[str, Any]], key: str, parks: Mapping[str, Park]
) -> CardStatus:
    """The card's status from its batch journal and parks; see the module docstring."""
    card = card_of(key)
    if card is None:
        raise ValueError(f"{key!r} is not a card batch (card-<n>)")
    rec = fold_cycle(records, key)
    shown = rec.shown_status
    if rec.abandoned:
        why = rec.shown_why if shown == "abandoned" else "the cycle was abandoned"
        return CardStatus(card, "abandoned", None, why)
    park = parks.get(key)
    if park is not None:
        status = park_status(park, records, key).value.removeprefix(PREFIX)
        if shown == status:
            return CardStatus(card, status, rec.shown_next, rec.shown_why)
        return CardStatus(card, status, None, park.reason)
    if rec.interrupted is not None:
        if shown == "interrupted":
            return CardStatus(card, "interrupted", None, rec.shown_why)
        step = rec.interrupted.get("transition") or "?"
        why = f"the run stopped during `{step}` before it recorded an outcome"
        return CardStatus(card, "interrupted", None, why)
    if shown is not None:
        return CardStatus(card, shown, rec.shown_next, rec.shown_why)
    if rec.label is not None:  # recorded before the comment said more than its label
        return CardStatus(card, rec.label.removeprefix(PREFIX), None, "")
    return CardStatus(card, PrState.READY.value.removeprefix(PREFIX), None, "nothing has run yet")


def read_card_status(root: Path, batch: str) -> CardStatus | None:
    """The status of card batch `batch` under the checkout `root`; None for a plain batch.

    A read only: the journal and the parks, no lock, no host.
    """
    if card_of(batch) is None:
        return None
    locus = RunLocus.for_batch(root, batch)
    records = [dict(r) for r in jsonl.read_records(locus.journal)]
    return card_status(records, batch, read_parks(locus))
