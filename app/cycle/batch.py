"""The one-card batch `card-<n>` that `/pair implement` makes, and where its files live.

A card batch is an ordinary batch manifest (`.pair/batches/card-<n>/batch.yaml`: gate
`voluntary`, `prGrouping: per-change`, one phase `card`, one change `card-<n>` bound to the
card) written next to the run-state — locally in the project's `.pair/`, in the Action on the
`pair-state` branch — and never committed to the default branch. Its per-card options
(`until`, `merge`, `prepare`, `agent`) are `bound` cycle entries in the journal, so the latest
`/pair implement` always wins and the history says who changed what.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# The card-batch name rule lives with the tick's candidates (files only, no yaml).
from app.cycle.schedule import card_key
from app.engine.atomic import write_bytes_atomic
from app.engine.manifest import manifest_path

PHASE = "card"


def card_branch(card: int) -> str:
    """The branch a card's work lives on."""
    return f"pair/{card_key(card)}"


def manifest_for(card: int, agent: str | None = None) -> dict[str, Any]:
    """The card batch's manifest as data."""
    key = card_key(card)
    manifest: dict[str, Any] = {
        "gate": "voluntary",
        "prGrouping": "per-change",
        "phases": [{"name": PHASE, "changes": [{"name": key, "card": card}]}],
    }
    if agent:
        manifest["settings"] = {"agent": agent}
    return manifest


def write_manifest(root: Path, card: int, agent: str | None = None) -> Path:
    """Write (or rewrite) the card batch's manifest atomically; returns its path."""
    path = manifest_path(root, card_key(card))
    text = yaml.safe_dump(manifest_for(card, agent), sort_keys=False)
    write_bytes_atomic(path, text.encode("utf-8"))
    return path
