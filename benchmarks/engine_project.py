"""The projects benchmarks/engine_scale.py measures: a batch of N changes in 10 phases, its
plans on disk, and a journal of exactly M records with a realistic mix of steps.

Not run on its own; `python benchmarks/engine_scale.py` builds one project per case with
`build_project`, and tests/packaging and tests/cli build small ones to check what is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from app.engine import jsonl
from app.engine.runstate import RunLocus

BATCH = "scale"
PHASES = 10
# The journal of a step: step-started, completion, outcome (progress reports come on top).
STEP_FIXED = 3
START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Shape:
    """One benchmark case."""

    changes: int
    entries: int


def change_names(count: int) -> list[str]:
    """`c0000`, `c0001`, … in batch order."""
    return [f"c{i:04d}" for i in range(count)]


def phases_of(names: Sequence[str]) -> list[list[str]]:
    """The changes split into (up to) `PHASES` consecutive phases."""
    size = -(-len(names) // PHASES)
    return [list(names[i : i + size]) for i in range(0, len(names), size)]


def manifest(names: Sequence[str]) -> dict[str, Any]:
    """The batch manifest: 10 phases, each with a proof-of-work, some changes depending."""
    phases = []
    for p, members in enumerate(phases_of(names)):
        changes: list[Any] = []
        for i, name in enumerate(members):
            # Every fifth change waits for its predecessor in the phase.
            changes.append({"name": name, "dependsOn": [members[i - 1]]} if i % 5 == 4 else name)
        phases.append(
            {
                "name": f"phase-{p}",
                "goal": f"phase {p} of the scale benchmark",
                "proofOfWork": {"run": "echo ok", "pass": "exit 0"},
                "changes": changes,
            }
        )
    return {"gate": "voluntary", "phases": phases}


@dataclass(frozen=True)
class History:
    """Which changes the journal has taken how far."""

    done: list[str]  # proposed, applied and verified (some after a red/fix round)
    proposed: list[str]  # proposed only: plan.md with unchecked tasks
    running: str  # the change whose apply is running right now (no outcome yet)


def plan_history(names: Sequence[str], entries: int) -> History:
    """Touch as many changes as the entry budget affords, up to 60% of the batch."""
    # A done change costs ~4 steps of ≥ 4 entries each; keep ≥ 1 progress report per step.
    touched = max(2, min(int(len(names) * 0.6), entries // 24))
    done = max(1, touched * 3 // 4)
    return History(
        done=list(names[:done]), proposed=list(names[done:touched]), running=names[touched - 1]
    )


def _verify_findings(rnd: int, blocking: bool) -> dict[str, Any]:
    return {
        "acTests": {"AC-1": "tests/test_it.py::test_ac_1", "AC-2": "tests/test_it.py::test_ac_2"},
        "findings": [
            {
                "id": "r1-1",
                "kind": "defect",
                "severity": "major",
                "blocking": True,
                "transition": "open" if blocking else "resolved",
                "ac": "AC-2",
                "summary": "off by one at the page boundary",
                "reproducer": "pytest tests/test_it.py -k boundary",
            }
        ]
        if rnd > 1 or blocking
        else [],
    }


class JournalWriter:
    """Builds the journal's records in order, with realistic fields."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._clock = 0

    def _at(self) -> str:
        self._clock += 1
        return (START + timedelta(seconds=7 * self._clock)).isoformat(timespec="milliseconds")

    def step(
        self,
        key: str,
        transition: str,
        progress: int,
        *,
        verdict: tuple[int, bool] | None = None,
        finish: bool = True,
    ) -> None:
        """One step: started, progress reports, completion, outcome (unless still running)."""
        session = f"{len(self.records):012x}"
        self.records.append(
            {
                "kind": "step-started",
                "key": key,
                "at": self._at(),
                "transition": transition,
                "session": session,
            }
        )
        for n in range(progress):
            self.records.append(
                {
                    "kind": "progress",
                    "key": key,
                    "at": self._at(),
                    "transition": transition,
                    "session": session,
                    "message": f"{transition} {key}: working on task {n % 7 + 1} "
                    f"(edited src/{key}/module_{n % 13}.py, ran 42 tests)",
                }
            )
        if not finish:
            return
        findings = None
        verdict_record = None
        message = f"{transition} done for {key}"
        if verdict is not None:
            rnd, blocking = verdict
            findings = _verify_findings(rnd, blocking)
            message = "1 critical issue(s) found" if blocking else "Ready for archive"
            verdict_record = {
                "converged": not blocking,
                "blocking": 1 if blocking else 0,
                "source": "findings",
                "pendingScope": 0,
            }
        completion: dict[str, Any] = {
            "kind": "completion",
            "key": key,
            "at": self._at(),
            "transition": transition,
            "session": session,
            "message": message,
        }
        if findings is not None:
            completion["findings"] = findings
        self.records.append(completion)
        outcome: dict[str, Any] = {
            "kind": "outcome",
            "key": key,
            "at": self._at(),
            "transition": transition,
            "session": session,
            "state": "advanced",
            "message": message,
        }
        if verdict_record is not None:
            outcome["verdict"] = verdict_record
            outcome["findings"] = findings
        self.records.append(outcome)

    def proof(self, phase: str) -> None:
        """A phase's proof-of-work: started, then its record."""
        self.records.append(
            {"kind": "step-started", "key": phase, "at": self._at(), "transition": "proof-of-work"}
        )
        at = self._at()
        self.records.append(
            {
                "kind": "proof-of-work",
                "key": phase,
                "at": at,
                "proof": {
                    "phase": phase,
                    "kind": "integration",
                    "command": "echo ok",
                    "passed": True,
                    "gatePassed": True,
                    "policy": "hard-gate",
                    "exitCode": 0,
                    "detail": "exit 0",
                    "at": at,
                },
            }
        )


def _steps_of(index: int) -> list[tuple[str, tuple[int, bool] | None]]:
    """A done change's steps; every third review blocks once and goes through red and fix."""
    if index % 3 == 2:
        return [
            ("propose", None),
            ("apply", None),
            ("verify", (1, True)),
            ("red", None),
            ("fix", None),
            ("verify", (2, False)),
        ]
    return [("propose", None), ("apply", None), ("verify", (1, False))]


def build_journal(names: Sequence[str], history: History, entries: int) -> list[dict[str, Any]]:
    """Exactly `entries` records telling `history`, in batch order, progress spread evenly."""
    steps: list[tuple[str, str, tuple[int, bool] | None]] = []
    for i, name in enumerate(history.done):
        steps += [(name, t, v) for t, v in _steps_of(i)]
    steps += [(name, "propose", None) for name in history.proposed]
    done = set(history.done)
    proven = [
        f"phase-{p}"
        for p, members in enumerate(phases_of(names))
        if all(name in done for name in members)
    ]
    fixed = len(steps) * STEP_FIXED + 2 * len(proven) + 1  # +1: the running step's start
    spare = entries - fixed
    if spare < len(steps):
        raise ValueError(f"{entries} entries cannot tell a history of {len(steps)} steps")
    per_step, rest = divmod(spare, len(steps) + 1)
    writer = JournalWriter()
    phase_of = {name: p for p, members in enumerate(phases_of(names)) for name in members}
    for n, (name, transition, verdict) in enumerate(steps):
        writer.step(name, transition, per_step, verdict=verdict)
        following = steps[n + 1][0] if n + 1 < len(steps) else history.running
        # A phase's proof runs once its last change is done, before the next phase's first step.
        phase = phase_of[name]
        if f"phase-{phase}" in proven and phase_of[following] != phase:
            writer.proof(f"phase-{phase}")
    writer.step(history.running, "apply", per_step + rest, finish=False)
    assert len(writer.records) == entries, (len(writer.records), entries)
    return writer.records


PLAN_OPEN = (
    "# {name}\n\n## Acceptance criteria\nAC-1: it works\nAC-2: pages have no gaps\n\n"
    "## Tasks\n- [ ] write the failing test\n- [ ] implement it\n- [ ] update the docs\n"
)


def build_project(root: Path, shape: Shape) -> Path:
    """A project with the batch, plans on disk and a journal of `shape.entries`; its journal."""
    names = change_names(shape.changes)
    history = plan_history(names, shape.entries)
    pair = root / ".pair"
    (pair / "batches" / BATCH).mkdir(parents=True)
    (pair / "config.yaml").write_text(
        yaml.safe_dump({"batch": {"agent": "claude"}, "cycle": {"maxFixRounds": 3}})
    )
    (pair / "batches" / BATCH / "batch.yaml").write_text(
        yaml.safe_dump(manifest(names), sort_keys=False)
    )
    for name in [*history.done, *history.proposed]:
        plan = PLAN_OPEN.format(name=name)
        if name in history.done:
            plan = plan.replace("- [ ]", "- [x]")
        (pair / "changes" / name).mkdir(parents=True)
        (pair / "changes" / name / "plan.md").write_text(plan)
    journal = RunLocus.for_batch(root, BATCH).journal
    jsonl.append_records(journal, build_journal(names, history, shape.entries))
    return journal
