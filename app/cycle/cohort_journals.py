"""The cohort report's thin shell: every card's journal under one or more checkouts, reduced.

`cohort_of(roots)` reads each card batch's journal (`.pair/batches/card-<n>/run/journal.jsonl`)
under every root given — the CLI passes its checkout, the App passes each checkout it keeps —
derives one `app.domain.reports.cohort.CardFigures` per card and hands them to the pure
`reduce_cohort`. It only reads files: no host call, no lock (a journal is append-only, so a
step running meanwhile costs at most its own last line, which the next report counts).

The status page can call it directly:

    from app.cycle.cohort_journals import cohort_of
    report = cohort_of([checkout_a, checkout_b])   # app.domain.reports.cohort.Cohort
    report.to_json()                                # the keys `pairbot report cohort --json` prints
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from app.cycle.records import fold_cycle
from app.cycle.schedule import card_key, card_of
from app.domain.reports.cohort import CardFigures, Cohort, reduce_cohort
from app.domain.reports.metrics import reduce_metrics
from app.engine import jsonl
from app.engine.journal import ACCEPTED_STATES
from app.engine.manifest import batches_dir
from app.engine.runstate import RunLocus

_PREFIX = "pr-state:"


def card_figures(card: int, records: Sequence[Mapping[str, Any]]) -> CardFigures:
    """One card's figures from its journal records (file order)."""
    key = card_key(card)
    mine = [r for r in records if r.get("key") == key]
    rec = fold_cycle(mine, key)
    if rec.abandoned:
        status = "abandoned"
    elif rec.merged_sha is not None:
        status = "merged"
    elif rec.label:
        status = rec.label.removeprefix(_PREFIX)
    else:
        status = "unknown"
    metrics = reduce_metrics(mine, as_of="")
    fixes = sum(
        1
        for r in mine
        if r.get("kind") == "outcome"
        and r.get("transition") == "fix"
        and r.get("state") in ACCEPTED_STATES
    )
    return CardFigures(
        card=card,
        status=status,
        cycles=metrics.cycles,
        fix_rounds=fixes,
        reviews=metrics.review_executions,
        tokens=metrics.tokens,
        cost_usd=metrics.cost_usd,
    )


def card_journals(root: Path) -> Iterable[tuple[int, list[dict[str, Any]]]]:
    """(card, journal records) of every card batch with a journal under `root`."""
    directory = batches_dir(root)
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("card-*/run/journal.jsonl")):
        card = card_of(path.parent.parent.name)
        if card is None:
            continue
        yield card, jsonl.read_records(RunLocus(path.parent).journal)


def cohort_of(roots: Sequence[Path]) -> Cohort:
    """The cohort report over every card under each of `roots` (a card found under two
    checkouts is one card: the journal with more records wins, it is the later copy)."""
    found: dict[int, list[dict[str, Any]]] = {}
    for root in roots:
        for card, records in card_journals(root):
            if len(records) >= len(found.get(card, [])):
                found[card] = records
    return reduce_cohort([card_figures(card, records) for card, records in found.items()])
