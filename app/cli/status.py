"""`pairbot batch status NAME` of a plain batch: only what reading a status needs.

No step machinery: the manifest's models, the journal and selection (app.engine.status). A
card's batch (card-<n>) is `app.cli.status_card`, which shows the card's own status and falls
back to this one.
"""

from __future__ import annotations

import argparse
import gc
import json
from collections.abc import Callable, Mapping
from pathlib import Path

from app.engine import render
from app.engine.manifest import BatchManifest, load_manifest
from app.engine.status import batch_status


def without_collector(read: Callable[[], int]) -> int:
    """`read()` with the cyclic collector off, then back as it was.

    A read-only command whose garbage (parsed journal lines, frozen dataclasses) is freed by
    reference counting: the cyclic collector only costs time here, about 5% of the command on
    a 100k-entry journal (its passes over every parsed line as the heap grows).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return read()
    finally:
        if collecting:  # `run` is also called in-process (tests, the demo): leave GC as it was
            gc.enable()


def print_batch_status(root: Path, name: str, manifest: BatchManifest, *, as_json: bool) -> int:
    """The batch's derived status and its next step, on stdout."""
    status = batch_status(root, name, manifest)
    print(json.dumps(render.status_json(status)) if as_json else render.status_text(status))
    return 0


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`batch status` of a plain batch (an unknown one is a clear error from the manifest)."""
    return without_collector(
        lambda: print_batch_status(
            root, args.name, load_manifest(root, args.name), as_json=args.json
        )
    )
