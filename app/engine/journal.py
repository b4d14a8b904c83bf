"""The run journal: typed entries over the append-only JSONL file, and the one fold over them.

Every fact the engine derives status from is an entry here: what agents reported (progress,
blocker, needs-input, completion), what humans said (answer, feedback, approval, retry), what
the engine concluded about each step (outcome), and proof-of-work verdicts with their
append-only invalidation markers. `fold_journal` reads them once, in order, into the per-key
facts that transition derivation and selection need, so status over a 100k-entry journal costs
one pass.

Keys: a change's entries use the change name; a decomposition uses the phase name; a PR step
uses `pr:<batch>[:<group>]`; proof-of-work entries carry the phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from app.engine import jsonl

EntryKind = Literal[
    "progress",
    "blocker",
    "needs-input",
    "completion",
    "answer",
    "feedback",
    "approval",
    "retry",
    "step-started",
    "outcome",
    "proof-of-work",
    "proof-of-work-invalidated",
    "cycle",
]
REPORT_KINDS: tuple[EntryKind, ...] = ("progress", "blocker", "needs-input", "completion")
ACCEPTED_STATES: frozenset[str] = frozenset({"advanced", "awaiting-approval"})


@dataclass(frozen=True)
class JournalEntry:
    """One journal line. Optional fields are omitted from the file when unset."""

    kind: str
    key: str
    at: str
    transition: str | None = None
    message: str = ""
    session: str | None = None
    state: str | None = None
    verdict: Mapping[str, Any] | None = None
    findings: Mapping[str, Any] | None = None
    # Where the findings file lay in the agent's tree (relative, POSIX), when it lay there: the
    # report's medium, which the engine takes out of the tree (app.engine.findings_files).
    findings_file: str | None = None
    proof: Mapping[str, Any] | None = None
    usage: Mapping[str, Any] | None = None
    data: Mapping[str, Any] | None = None  # `cycle` entries: what the card cycle published

    def to_record(self) -> dict[str, Any]:
        """The JSON object written to the file."""
        record: dict[str, Any] = {"kind": self.kind, "key": self.key, "at": self.at}
        for name in (
            "transition",
            "session",
            "state",
            "verdict",
            "findings",
            "proof",
            "usage",
            "data",
        ):
            value = getattr(self, name)
            if value is not None:
                record[name] = value
        if self.findings_file is not None:
            record["findingsFile"] = self.findings_file
        if self.message:
            record["message"] = self.message
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> JournalEntry:
        """Build from a parsed line; unknown keys (from a newer pairbot) are ignored."""
        return cls(
            kind=str(record.get("kind", "")),
            key=str(record.get("key", "")),
            at=str(record.get("at", "")),
            transition=_opt_str(record.get("transition")),
            message=str(record.get("message", "")),
            session=_opt_str(record.get("session")),
            state=_opt_str(record.get("state")),
            verdict=_opt_map(record.get("verdict")),
            findings=_opt_map(record.get("findings")),
            findings_file=_opt_str(record.get("findingsFile")),
            proof=_opt_map(record.get("proof")),
            usage=_opt_map(record.get("usage")),
            data=_opt_map(record.get("data")),
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_map(value: Any) -> Mapping[str, Any] | None:
    return cast("Mapping[str, Any]", value) if isinstance(value, Mapping) else None


def read_journal(path: Path, start: int = 0) -> list[JournalEntry]:
    """Entries from index `start` on (a torn last line dropped; mid-file corruption raises)."""
    return [JournalEntry.from_record(record) for record in jsonl.read_records(path, start)]


def append_entry(path: Path, entry: JournalEntry) -> int:
    """Append one entry; returns its 0-based index."""
    return jsonl.append_record(path, entry.to_record())


# ---------------------------------------------------------------- the fold


@dataclass(frozen=True)
class Accepted:
    """A transition the engine accepted (outcome advanced or awaiting-approval)."""

    transition: str
    index: int
    converged: bool | None = None  # verify only
    findings: Mapping[str, Any] | None = None  # verify only, when a findings file was given


@dataclass
class KeyHistory:
    """What the journal says about one key (a change, a phase's decomposition, a PR group)."""

    accepted: list[Accepted] = field(default_factory=list)
    last_outcome: int = -1
    last_outcome_state: str | None = None
    feedback: tuple[str, str] | None = None  # (transition, text) recorded after the last outcome
    answers: list[str] = field(default_factory=list)  # recorded after the last outcome
    entries: int = 0

    def accepted_count(self, transition: str) -> int:
        """How many times `transition` was accepted for this key."""
        return sum(1 for a in self.accepted if a.transition == transition)


@dataclass(frozen=True)
class JournalIndex:
    """The single fold of a journal: per-key histories and per-phase proof records."""

    keys: Mapping[str, KeyHistory]
    proofs: Mapping[str, Mapping[str, Any]]
    size: int

    def history(self, key: str) -> KeyHistory:
        """The key's history (empty if the journal never mentions it)."""
        return self.keys.get(key) or KeyHistory()

    def accepted_keys(self, transition: str) -> frozenset[str]:
        """Keys with at least one accepted `transition` (e.g. the opened PR groups)."""
        return frozenset(
            key
            for key, h in self.keys.items()
            if any(a.transition == transition for a in h.accepted)
        )


def fold_journal(entries: Sequence[JournalEntry]) -> JournalIndex:
    """The fold over typed entries (tests and callers that already hold entries)."""
    return fold_records([entry.to_record() for entry in entries])


def read_index(path: Path) -> JournalIndex:
    """Read and fold a journal file in one pass, straight from the parsed lines."""
    return fold_records(jsonl.read_records(path))


def fold_records(records: Sequence[Mapping[str, Any]]) -> JournalIndex:
    """One pass over the journal's records into the facts derivation and selection read.

    It reads the parsed dicts directly instead of building a `JournalEntry` per line: status
    over a 100k-entry journal is dominated by this loop, and object construction doubled it.
    """
    keys: dict[str, KeyHistory] = {}
    proofs: dict[str, Mapping[str, Any]] = {}
    for index, record in enumerate(records):
        kind = record.get("kind")
        key = str(record.get("key", ""))
        if kind == "proof-of-work":
            proof = _opt_map(record.get("proof"))
            if proof is not None:
                proofs[key] = proof
            continue
        if kind == "proof-of-work-invalidated":
            # Append-only: the record stays in the file for the audit trail; the marker only
            # removes it from the fold, so the next apply re-runs the proof.
            proofs.pop(key, None)
            continue
        history = keys.get(key)
        if history is None:
            history = keys[key] = KeyHistory()
        history.entries += 1
        if kind == "outcome":
            state = _opt_str(record.get("state"))
            transition = _opt_str(record.get("transition"))
            history.last_outcome = index
            history.last_outcome_state = state
            history.feedback = None
            history.answers = []
            if state in ACCEPTED_STATES and transition:
                verdict = _opt_map(record.get("verdict"))
                converged = verdict.get("converged") if verdict else None
                history.accepted.append(
                    Accepted(
                        transition=transition,
                        index=index,
                        converged=bool(converged) if converged is not None else None,
                        findings=_opt_map(record.get("findings")),
                    )
                )
        elif kind == "feedback" and record.get("transition"):
            history.feedback = (str(record["transition"]), str(record.get("message", "")))
        elif kind == "answer":
            history.answers.append(str(record.get("message", "")))
    return JournalIndex(keys=keys, proofs=proofs, size=len(records))


def session_entries(entries: Iterable[JournalEntry], key: str) -> list[JournalEntry]:
    """The agent reports for `key` among `entries` (a session's delta of the journal)."""
    return [e for e in entries if e.key == key and e.kind in REPORT_KINDS]
