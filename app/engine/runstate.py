"""Where a batch's (or a standalone change's) run-state lives, and its parks in `state.json`.

    .pair/batches/<batch>/run/      journal.jsonl, state.json, step.lock     (batch steps)
    .pair/changes/<change>/.run/    journal.jsonl, state.json                (headless verbs)
    <either>/live/<session>.log     the last agent step's output (app.engine.livelog)

`state.json` holds the parked steps (blocked, needs-input, awaiting-approval, and
awaiting-human after a budget was exceeded) and the workflow that wrote it; it is
written atomically, so a crash leaves either the old or the new file, never half of one:

    {"version": 1,                                   the file's schema (STATE_VERSION)
     "workflow": {"version": "1.0",                  the workflow that wrote it (WORKFLOW_VERSION)
                  "inputsDigest": "sha256:…"},       the effective inputs of its last step
     "parks": {<key>: {state, transition, reason, at}}}

A run-state this pairbot cannot resume is *incompatible*: a schema newer than STATE_VERSION, or
a workflow whose major is not one of RESUMABLE_MAJORS (a newer pairbot's, or one too old to
carry on). Reading or writing it raises `IncompatibleRunStateError`, naming both versions and
what to do; nothing in the run directory is changed. A file without `workflow` was written
before workflows were stamped, by workflow 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from app.engine.atomic import read_json, write_json_atomic
from app.errors import OperatorError, StateCorruptError

if TYPE_CHECKING:
    # Only a type here: reading parks (`batch status`) needs no lock machinery (secrets, socket).
    from app.engine.lock import LockProof

STATE_VERSION = 1
# The card cycle's and the engine's step semantics. The major changes when a run-state written
# by one pairbot cannot be carried on by another; the minor when it can.
WORKFLOW_VERSION = "1.0"
RESUMABLE_MAJORS: frozenset[int] = frozenset({1})
_UNSTAMPED = "1.0"  # what wrote a state.json with no `workflow`
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


class IncompatibleRunStateError(OperatorError):
    """A run-state written by a workflow (or a state schema) this pairbot cannot resume."""


@dataclass(frozen=True)
class Workflow:
    """The workflow a run-state was written by, and the inputs digest of its last step."""

    version: str
    inputs_digest: str | None = None

    @property
    def major(self) -> int | None:
        """The version's major, None when the version is not `<major>.<minor>`."""
        head = self.version.split(".", 1)[0]
        return int(head) if head.isdigit() else None


def _incompatible(locus: RunLocus, wrote: str) -> IncompatibleRunStateError:
    batch = locus.directory.parent.name
    resumable = ", ".join(f"{major}.x" for major in sorted(RESUMABLE_MAJORS))
    return IncompatibleRunStateError(
        f"incompatible run-state: {locus.state} was written by {wrote}; this pairbot runs "
        f"workflow {WORKFLOW_VERSION} (state schema {STATE_VERSION}) and resumes only workflow "
        f"{resumable}. Nothing was read or changed. Carry the run on with the pairbot that "
        f"wrote it, or start a fresh run: `pairbot clean {batch} --archive-run` moves this run "
        "aside (its journal kept) and the next command starts a new one"
    )


def _document(locus: RunLocus) -> dict[str, Any]:
    """`state.json` as stored, checked resumable (an absent file is an empty run-state)."""
    data: Any = read_json(locus.state, {})
    if not isinstance(data, dict):
        raise StateCorruptError(f"{locus.state}: not a JSON object")
    schema = data.get("version", STATE_VERSION)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise StateCorruptError(f"{locus.state}: `version` is {schema!r}, not a schema number")
    workflow = _workflow_of(locus, data)
    if schema > STATE_VERSION:
        raise _incompatible(locus, f"state schema {schema} (workflow {workflow.version})")
    if workflow.major not in RESUMABLE_MAJORS:
        raise _incompatible(locus, f"workflow {workflow.version} (state schema {schema})")
    return data


def _workflow_of(locus: RunLocus, data: Mapping[str, Any]) -> Workflow:
    raw = data.get("workflow")
    if raw is None:
        return Workflow(_UNSTAMPED)
    version = raw.get("version") if isinstance(raw, dict) else None
    digest = raw.get("inputsDigest") if isinstance(raw, dict) else None
    if not isinstance(version, str) or not isinstance(digest, str | None):
        raise StateCorruptError(f"{locus.state}: `workflow` is malformed: {raw!r}")
    return Workflow(version, digest)


def read_workflow(locus: RunLocus) -> Workflow:
    """The workflow that wrote the run-state and its last inputs digest (checked resumable)."""
    return _workflow_of(locus, _document(locus))


def resumable(locus: RunLocus) -> bool:
    """Whether this pairbot can carry the run on (a damaged file is for its readers to say)."""
    try:
        _document(locus)
    except IncompatibleRunStateError:
        return False
    except StateCorruptError:
        return True
    return True


def read_parks(locus: RunLocus) -> dict[str, Park]:
    """The parked steps, by key (an incompatible run-state raises, see the module doc)."""
    return _parks_of(locus, _document(locus))


def _parks_of(locus: RunLocus, data: Mapping[str, Any]) -> dict[str, Park]:
    raw = data.get("parks", {})
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
    """Replace the parks atomically, keeping the inputs digest. Batch steps pass their lock
    proof; headless steps None. An incompatible run-state is never overwritten."""
    del proof  # the parameter exists so a batch caller cannot forget to hold the lock
    _write(locus, parks, _workflow_of(locus, _document(locus)).inputs_digest)


def stamp_inputs(locus: RunLocus, inputs_digest: str, proof: LockProof | None) -> bool:
    """Record this workflow and the effective inputs of the step about to run; the parks are
    kept. Returns whether the file changed (an unchanged stamp is not rewritten)."""
    del proof
    data = _document(locus)
    stamped = Workflow(WORKFLOW_VERSION, inputs_digest)
    if locus.state.exists() and _workflow_of(locus, data) == stamped:
        return False
    _write(locus, _parks_of(locus, data), inputs_digest)
    return True


def _write(locus: RunLocus, parks: Mapping[str, Park], inputs_digest: str | None) -> None:
    data: dict[str, Any] = {
        "version": STATE_VERSION,
        "workflow": {"version": WORKFLOW_VERSION, "inputsDigest": inputs_digest},
        "parks": {key: asdict(park) for key, park in sorted(parks.items())},
    }
    write_json_atomic(locus.state, data)
