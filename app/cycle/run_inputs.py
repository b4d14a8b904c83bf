"""The workflow version and effective-inputs digest a card's step runs under, recorded.

Seed 004: every stage receives the workflow version, the policy and the effective-inputs
digest, so each handoff records which coordinator, policy and inputs produced it. Here, before
a card's step runs (under its lock):

- the digest is `sha256:` over the canonical JSON of the workflow version
  (`app.engine.runstate.WORKFLOW_VERSION`), the policy (`.pair/config.yaml` as pairbot read
  it, every default filled in) and the card's run inputs (its run id and the options of its
  latest command: mode, until, merge, prepare, agent). The card's text is not in it: a card
  edit is the review's business (a delta re-review), not a new set of inputs;
- `state.json` is stamped with the workflow and the digest (`runstate.stamp_inputs`);
- when the digest differs from the card's last `inputs` entry, a `cycle` entry
  `{event: "inputs", workflowVersion, inputsDigest}` is journaled, so every outcome after it in
  the journal was produced under those inputs, and the books (`app.cycle.books`) show them.

A run-state this pairbot cannot resume was already refused when the step read its parks
(`runstate.IncompatibleRunStateError`): nothing here overwrites one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.cycle.books import last_inputs
from app.cycle.records import CycleRecord
from app.cycle.state import CardState, read_card
from app.engine.manifest import ProjectConfig
from app.engine.runstate import WORKFLOW_VERSION, stamp_inputs


def effective_inputs(project: ProjectConfig, rec: CycleRecord) -> dict[str, Any]:
    """What the digest covers (see the module doc)."""
    return {
        "workflowVersion": WORKFLOW_VERSION,
        "policy": project.model_dump(mode="json", by_alias=True),
        "run": {
            "id": rec.run_id,
            "mode": rec.mode,
            "until": rec.until,
            "merge": rec.merge,
            "prepare": rec.prepare,
            "agent": rec.agent,
        },
    }


def inputs_digest(project: ProjectConfig, rec: CycleRecord) -> str:
    """`sha256:<hex>` of the effective inputs' canonical JSON."""
    text = json.dumps(
        effective_inputs(project, rec), sort_keys=True, separators=(",", ":"), default=str
    )
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def record_inputs(state: CardState) -> str:
    """Stamp the run-state and journal the inputs when they changed; returns the digest."""
    digest = inputs_digest(state.project, state.rec)
    stamp_inputs(state.locus, digest, state.held)
    last = last_inputs(state.records, state.key)
    if last != {"version": WORKFLOW_VERSION, "inputsDigest": digest}:
        state.pub.record("inputs", workflowVersion=WORKFLOW_VERSION, inputsDigest=digest)
        state.records, state.history, state.rec = read_card(state.locus, state.key)
    return digest
