"""Which batches a scheduled tick would look at, decided from the run-state files alone.

    tick_candidates(root)   [(journal's last `at`, batch), ...]: every plain batch, and every
                            card batch that is not parked, abandoned or waiting for a person

`app.cycle.driver.tick` walks these, oldest first. It is its own module, importing only the
journal reader and the run-state's file layout, so that a surface can learn that a tick has
nothing to do without building hosts or loading the manifest's models: the Action answers an
idle scheduled run from it (`action/run/locked.py`), and a tick with work takes the full path.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.cycle.records import fold_cycle
from app.engine import jsonl
from app.engine.runstate import RunLocus, read_parks, resumable
from hosts.labels import PrState

__all__ = [
    "CARD_BATCH",
    "IDLE_MESSAGE",
    "PASSIVE",
    "card_batches",
    "card_key",
    "card_of",
    "tick_candidates",
]

CARD_BATCH = re.compile(r"^card-(?P<n>[1-9][0-9]{0,9})$")
IDLE_MESSAGE = "nothing to do: every batch waits for a person or is done"

# A card whose label is one of these waits for a person or is finished: a scheduled tick
# leaves it alone (no API call); a command or a head-moved event wakes it explicitly.
PASSIVE: frozenset[str] = frozenset(
    s.value
    for s in (
        PrState.AWAITING_APPROVAL,
        PrState.BLOCKED,
        PrState.NEEDS_INPUT,
        PrState.AWAITING_SCOPE_DECISION,
        PrState.AWAITING_HUMAN,
        PrState.ESCALATED,
        PrState.READY_FOR_MERGE,
        PrState.MERGED,
        PrState.FAILED_PREPARATION,
        PrState.FAILED_IMPLEMENT,
        PrState.TARGET_READY,
        PrState.ESCALATE,
        PrState.FAILED_CONTRACT,
        PrState.FAILED_SEAL,
        PrState.FAILED_CUSTODY,
        PrState.FAILED_RESUME,
        PrState.INCOMPATIBLE,
        PrState.FAILED_FIX,
        PrState.FAILED_VERIFY,
        PrState.INTERRUPTED,
        PrState.ABANDONED,
    )
)


def card_of(batch: str) -> int | None:
    """The card number of a card batch name, None for any other batch."""
    match = CARD_BATCH.match(batch)
    return int(match.group("n")) if match else None


def card_key(card: int) -> str:
    """`card-<n>`: the batch and its single change share the name."""
    if card < 1:
        raise ValueError(f"a card number is a positive integer, got {card}")
    return f"card-{card}"


def card_batches(root: Path) -> list[int]:
    """The card batches recorded under `root`, by card number."""
    directory = root / ".pair" / "batches"
    if not directory.is_dir():
        return []
    found = (card_of(p.parent.name) for p in directory.glob("card-*/batch.yaml"))
    return sorted(n for n in found if n is not None)


def tick_candidates(root: Path) -> list[tuple[str, str]]:
    """(the journal's last `at`, batch) for every batch a tick may run a step of, unsorted.

    Every batch with a manifest (`.pair/batches/<name>/batch.yaml`) counts, except a card batch
    whose cycle was abandoned, whose label says it waits for a person or is finished, or that
    has a parked step, or whose run-state is incompatible: those only a command or a pull request
    event wakes.
    """
    directory = root / ".pair" / "batches"
    names = (
        sorted(p.parent.name for p in directory.glob("*/batch.yaml")) if directory.is_dir() else []
    )
    waiting: list[tuple[str, str]] = []
    for name in names:
        locus = RunLocus.for_batch(root, name)
        records = jsonl.read_records(locus.journal)
        last = str(records[-1].get("at", "")) if records else ""
        if card_of(name) is not None:
            rec = fold_cycle(records, name)
            # An incompatible run-state waits for a person too: a command says why, and
            # `pairbot clean --archive-run` sets it aside; the other cards keep their ticks.
            if not resumable(locus) or rec.abandoned or rec.label in PASSIVE or read_parks(locus):
                continue
        waiting.append((last, name))
    return waiting
