"""cohort_of: which journals it reads under each checkout, and each card's final status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.cycle.cohort_journals import card_figures, cohort_of


def write_journal(root: Path, batch: str, records: list[dict[str, Any]]) -> None:
    path = root / ".pair" / "batches" / batch / "run" / "journal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def cycle(key: str, event: str, **data: Any) -> dict[str, Any]:
    return {
        "kind": "cycle",
        "key": key,
        "at": "2026-12-01T00:00:00+00:00",
        "data": {"event": event, **data},
    }


def test_status_comes_from_the_latest_cycle_events() -> None:
    key = "card-3"
    assert card_figures(3, []).status == "unknown"
    labelled = [
        cycle(key, "bound", card=3, run="r1"),
        cycle(key, "label", state="pr-state:blocked"),
    ]
    assert card_figures(3, labelled).status == "blocked"
    merged = [*labelled, cycle(key, "merged", head="a", sha="b")]
    assert card_figures(3, merged).status == "merged"
    assert card_figures(3, [*merged, cycle(key, "abandoned")]).status == "abandoned"
    # Another key's records in the same file are not this card's.
    assert card_figures(4, merged).status == "unknown"


def test_every_checkout_is_read_and_a_card_found_twice_counts_once(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    write_journal(one, "card-1", [cycle("card-1", "label", state="pr-state:ready-for-merge")])
    write_journal(
        two,
        "card-1",
        [
            cycle("card-1", "label", state="pr-state:ready-for-merge"),
            cycle("card-1", "merged", head="a", sha="b"),
        ],
    )
    write_journal(two, "card-2", [cycle("card-2", "label", state="pr-state:needs-input")])
    write_journal(two, "nightly", [cycle("nightly", "label", state="pr-state:merged")])
    (two / ".pair" / "batches" / "card-9").mkdir()  # a card batch with no journal yet
    write_journal(two, "card-x", [cycle("card-x", "label", state="pr-state:merged")])
    three = tmp_path / "three"  # an older copy of card 1, read last: the longer journal stays
    write_journal(three, "card-1", [cycle("card-1", "label", state="pr-state:blocked")])
    cohort = cohort_of([one, two, three, tmp_path / "absent"])
    assert [(c.card, c.status) for c in cohort.cards] == [(1, "merged"), (2, "needs-input")]
    assert cohort_of([]).cards == ()
