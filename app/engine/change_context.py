"""What a change step is given: `ChangeStepContext`, a step with its transition already decided.

`app.engine.runner` builds one for a batch's change (under the batch lock) and for the headless
verbs; the card cycle (`app.cycle.agent_step`) builds one for a card's step, with its vet, its
card text, its evidence and its review panel. `app.engine.change_step.run_change_step` runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from app.domain.card.budget import Budget
from app.domain.reports.lesson import Lesson
from app.domain.review.verdict import DEFAULT_FLOOR, Severity
from app.engine.gates import Gate
from app.engine.instructions import Quoted
from app.engine.journal import KeyHistory
from app.engine.manifest import Phase, TestsConfig
from app.engine.outcome import EngineStepOutcome
from app.engine.runstate import RunLocus
from app.engine.transition import Transition
from app.settings import AgentChoice, ResolvedSettings


@dataclass(frozen=True)
class ChangeStepContext:
    """A change step with its transition already decided (forced)."""

    root: Path
    locus: RunLocus
    change: str
    transition: Transition
    settings: ResolvedSettings
    gate: Gate
    batch: str | None
    phase: Phase | None
    max_fix_rounds: int
    guidance: str | None = None
    card: tuple[Quoted, ...] = ()  # the card's text as of its accepted command, attributed
    notes: tuple[str, ...] = ()  # pairbot's own notes for the agent
    # Earlier cards' lessons on this change's files, selected and capped; propose shows them.
    lessons: tuple[Lesson, ...] = ()
    history: KeyHistory | None = None  # already folded under the lock; read when absent
    # The card cycle's check of an accepted result (tests, sealed files, push) before it is
    # recorded; it may turn the outcome into `sent-back` or `failed`.
    vet: Callable[[EngineStepOutcome], Awaitable[EngineStepOutcome]] | None = None
    state_root: Path | None = None  # where run-state lives when the agent works elsewhere
    # A plain batch's step in the project checkout: snapshot its work on the batch's work line
    # (deps.work) so its PR group carries it. Card cycles commit their own worktrees instead.
    record_work: bool = False
    # `budget:` of the project (each change / card) and of the batch's manifest: an accepted
    # step that takes either over a limit parks the change `awaiting-human`.
    card_budget: Budget | None = None
    batch_budget: Budget | None = None
    # The project's `tests:`, which deps.work_vet holds a recorded step to.
    tests: TestsConfig | None = None
    # Checks others reported on the head that did not pass, quoted for the agent (the card
    # cycle reads them before a verify), and the failing required ones among them: a verify
    # does not converge while one stands, whatever its verdict says.
    evidence: tuple[Quoted, ...] = ()
    external_blocking: tuple[str, ...] = ()
    # `review.panel`: a verify runs each `(slug, agent)` in turn on the same head, and
    # converges only when every one does; `between_reviewers` puts the tree back between two.
    panel: tuple[tuple[str, AgentChoice], ...] = ()
    between_reviewers: Callable[[], Awaitable[None]] | None = None
    # `review.severityFloor`: a finding's `blocking` is re-checked against it.
    severity_floor: Severity = DEFAULT_FLOOR
    # Lines the verifier reads beside its command (the card's required findings).
    review_notes: tuple[str, ...] = ()
