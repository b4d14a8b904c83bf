"""The seam through which a plain batch's change step is vetted before its outcome is recorded.

A card's steps are vetted by the card cycle (`ChangeStepContext.vet`, app/cycle/card_vet.py). A
plain batch's steps edit the project checkout and are snapshotted on the batch's work line
(app/engine/work_line.py); the same converge gate holds them through this seam, injected as
`EngineDeps.work_vet` (the surfaces pass `app.cycle.batch_vet.batch_vetter`):

    vet = deps.work_vet(WorkVetRequest(...))   one per step, before the agent runs
    await vet.before()                         the tests on the tree the step starts from
    ... the agent runs; its work is snapshotted ...
    await vet.vet(outcome, snapshot)           an accepted outcome: kept, or sent back with the
                                               snapshot discarded (the checkout restored)

A discarded snapshot is never journaled, so no PR group carries refused work. Without a
`work_vet` (or outside a git checkout) a batch step is recorded as it ends, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.engine.agent import AgentLauncher
from app.engine.manifest import TestsConfig
from app.engine.outcome import EngineStepOutcome
from app.engine.work_line import Snapshot


@dataclass(frozen=True)
class WorkVetRequest:
    """One plain batch step to vet: where, which change and transition, and the tests config."""

    root: Path
    batch: str
    change: str
    transition: str
    tests: TestsConfig
    journal: Path  # the batch's journal: how many times in a row this step was sent back
    branch: str  # the batch's work line
    env: Mapping[str, str]  # the agent's environment, which the tests run with
    launcher: AgentLauncher  # runs the tests as the agent runs (isolated)


@dataclass(frozen=True)
class VettedWork:
    """The outcome to record, and whether the step's snapshot stays the change's work."""

    outcome: EngineStepOutcome
    keep: bool


class WorkVet(Protocol):
    """One step's vet (app/cycle/batch_vet.py)."""

    async def before(self) -> None:
        """Measure what the vet compares against (the tests), before the agent runs."""
        ...

    async def vet(self, outcome: EngineStepOutcome, snap: Snapshot) -> VettedWork:
        """Check an accepted outcome's work; a refusal discards the snapshot."""
        ...


WorkVetFactory = Callable[[WorkVetRequest], WorkVet]
