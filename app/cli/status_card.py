"""`pairbot batch status card-<n>`: a card's batch shows the card's own status.

The entry routes every batch named card-<n> here (`app.cli.entry.command_of`), so a plain
batch's status never loads the card cycle's status modules; a card-<n> batch that is no card's
gets the plain status of `app.cli.status`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path

from app.cli.status import print_batch_status, without_collector
from app.cycle.card_status import read_card_status
from app.engine.manifest import load_manifest


def _print_status(root: Path, name: str, *, as_json: bool) -> int:
    manifest = load_manifest(root, name)  # validates; an unknown batch is a clear error
    card = read_card_status(root, name)
    if card is None:
        return print_batch_status(root, name, manifest, as_json=as_json)
    print(json.dumps(card.to_json()) if as_json else card.to_text())
    return 0


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`batch status` of a batch named card-<n>."""
    return without_collector(lambda: _print_status(root, args.name, as_json=args.json))
