"""The propose metadata stamp: `.pair/changes/<change>/.pair.yaml`, beside the plan it describes.

Seed 001 stamps the change's metadata after a completed propose, before its outcome is
journaled (`.ratchet.yaml` there). Here, when a card's propose is accepted, the vet writes the
stamp into the worktree before it commits the plan, so the stamp travels with the plan on the
card's branch and says which run, agent and inputs produced it:

    # pairbot's record of who proposed this plan; rewritten by each accepted propose.
    schema: 1
    change: card-42
    run: r-1a2b3c
    proposedAt: '2026-12-04T12:00:00.000+00:00'   the propose step's start, from the journal
    session: 9f8e7d6c5b4a
    agent: claude
    model: opus                                   only when the stage names one
    pairbot: 0.9.0
    workflowVersion: '1.0'
    inputsDigest: sha256:…                        its inputs (app.cycle.run_inputs)

Everything but the pairbot version comes from the card's journal, so the same journal stamps
the same bytes. The engine's derivation reads only `plan.md`; the stamp changes no status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from app import __version__
from app.cycle.books import last_inputs
from app.engine.runstate import WORKFLOW_VERSION

STAMP = ".pair.yaml"
_HEAD = "# pairbot's record of who proposed this plan; rewritten by each accepted propose.\n"


def stamp_data(records: Sequence[Mapping[str, Any]], key: str, run: str | None) -> dict[str, Any]:
    """The stamp's fields from the card's journal (its last `propose` start and inputs)."""
    started: Mapping[str, Any] = {}
    for record in records:
        if (
            record.get("kind") == "step-started"
            and record.get("key") == key
            and record.get("transition") == "propose"
        ):
            started = record
    data = started.get("data") if isinstance(started.get("data"), Mapping) else {}
    inputs = last_inputs(records, key) or {}
    stamp: dict[str, Any] = {
        "schema": 1,
        "change": key,
        "run": run,
        "proposedAt": started.get("at"),
        "session": started.get("session"),
        "agent": data.get("agent") if isinstance(data, Mapping) else None,
    }
    model = data.get("model") if isinstance(data, Mapping) else None
    if isinstance(model, str) and model:
        stamp["model"] = model
    stamp |= {
        "pairbot": __version__,
        "workflowVersion": inputs.get("version") or WORKFLOW_VERSION,
        "inputsDigest": inputs.get("inputsDigest"),
    }
    return stamp


def write_stamp(
    tree: Path, records: Sequence[Mapping[str, Any]], key: str, run: str | None
) -> Path:
    """Write `.pair/changes/<key>/.pair.yaml` in the worktree `tree`; returns its path."""
    path = tree / ".pair" / "changes" / key / STAMP
    path.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(stamp_data(records, key, run), sort_keys=False, allow_unicode=True)
    path.write_text(_HEAD + body, encoding="utf-8")
    return path
