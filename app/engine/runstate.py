"""Where a batch's (or a standalone change's) run-state lives, and its parks in `state.json`.

    .pair/batches/<batch>/run/      journal.jsonl, state.json, step.lock     (batch steps)
    .pair/changes/<change>/.run/    journal.jsonl, state.json                (headless verbs)
    <either>/live/<session>.log     the last agent step's output (app.engine.livelog)

`state.json` holds only the parked steps (blocked, needs-input, awaiting-approval, and
awaiting-human after a budget was exceeded); it is
written atomically, so a crash leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from app.engine.atomic import read_json, write_json_atomic
from app.errors import StateCorruptError

if TYPE_CHECKING:
    # Only a type here: reading parks (`batch status`) needs no lock machinery (secrets, socket).
    from app.engine.lock import LockProof

STATE_VERSION = 1
# `awaiting-human`: an accepted step took the change (or its batch) over its budget.
ParkState = Literal["blocked", "needs-input", "awaiting-approval", "awaiting-human"]
_PARK_STATES = ("blocked", "needs-input", "awaiting-approval", "awaiting-human")


@dataclass(frozen=True)
class Park:
    """A step waiting for a human, as recorded in `state.json` (selection reads it too)."""

    state: ParkState
    transition: str
    reason: str
    at: str = ""


@dataclass(frozen=True)
class RunLocus:
    """The run directory and its three files."""

    directory: Path

    @property
    def journal(self) -> Path:
        """Append-only journal."""
        return self.directory / "journal.jsonl"

    @property
    def state(self) -> Path:
        """Parked steps."""
        return self.directory / "state.json"

    @property
    def lock(self) -> Path:
        """The per-batch step lock."""
        return self.directory / "step.lock"

    @classmethod
    def for_batch(cls, root: Path, batch: str) -> RunLocus:
        """`.pair/batches/<batch>/run/`."""
        return cls(root / ".pair" / "batches" / batch / "run")

    @classmethod
    def for_change(cls, root: Path, change: str) -> RunLocus:
        """`.pair/changes/<change>/.run/` (headless verbs: no batch, no lock)."""
        return cls(root / ".pair" / "changes" / change / ".run")


def read_parks(locus: RunLocus) -> dict[str, Park]:
    """The parked steps, by key."""
    data: Any = read_json(locus.state, {})
    raw = data.get("parks", {}) if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        raise StateCorruptError(f"{locus.state}: `parks` is not an object")
    parks: dict[str, Park] = {}
    for key, value in raw.items():
        if not isinstance(value, dict) or value.get("state") not in _PARK_STATES:
            raise StateCorruptError(f"{locus.state}: park {key!r} is malformed: {value!r}")
        parks[str(key)] = Park(
            state=value["state"],
            transition=str(value.get("transition", "")),
            reason=str(value.get("reason", "")),
            at=str(value.get("at", "")),
        )
    return parks


def write_parks(locus: RunLocus, parks: Mapping[str, Park], proof: LockProof | None) -> None:
    """Replace the parks atomically. Batch steps pass their lock proof; headless steps None."""
    del proof  # the parameter exists so a batch caller cannot forget to hold the lock
    data: dict[str, Any] = {
        "version": STATE_VERSION,
        "parks": {key: asdict(park) for key, park in sorted(parks.items())},
    }
    write_json_atomic(locus.state, data)
