"""What every step is made of: the result, the injected dependencies, the journal writes, and
recording an outcome ("doing" before the effect, "done" after it).

The step kinds (change steps in `change_step`, the phase-scoped ones in `phase_steps`) spawn
their agent through `app.engine.spawn.spawn_agent` (one agent, with its failover), journal
`step-started` through `begin_step`, and all finish through `record_outcome`, which writes the
park before the outcome.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from app.domain.review.red_verdict import CONTRACT_PARK
from app.domain.review.verdict import Verdict
from app.engine import lock
from app.engine.agent import AgentLauncher, AgentUsage, LineSink
from app.engine.batch_vet_seam import WorkVetFactory
from app.engine.boundary import PrGroupBoundary
from app.engine.journal import JournalEntry, append_entry
from app.engine.outcome import EngineStepOutcome, ModelHintContext, StepState
from app.engine.runstate import Park, RunLocus, read_parks, write_parks
from app.engine.work_line import WorkTree
from app.settings import AgentStage, ResolvedSettings

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock (injected everywhere else)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class StepResult:
    """The public result of one step (`pairbot batch apply --json` prints it)."""

    state: StepState
    change: str
    transition: str
    blocker: str | None = None
    approval_request: str | None = None
    message: str | None = None
    journal_refs: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape (docs/cli.md)."""
        data: dict[str, Any] = {
            "state": self.state,
            "change": self.change,
            "transition": self.transition,
        }
        if self.blocker is not None:
            data["blocker"] = self.blocker
        if self.approval_request is not None:
            data["approvalRequest"] = self.approval_request
        if self.message is not None:
            data["message"] = self.message
        if self.journal_refs:
            data["journalRefs"] = list(self.journal_refs)
        return data


@dataclass(frozen=True)
class PrRequest:
    """What the code host is asked to open for one PR group."""

    batch: str
    key: str
    base_branch: str
    head_branch: str
    title: str
    body: str
    boundary: PrGroupBoundary | None


class PrOpener(Protocol):
    """Opens one pull request through a code host; returns its URL or number."""

    async def open_pr(self, request: PrRequest) -> str:
        """Open (or find the already-open) PR for `request` and return a reference to it."""
        ...


@dataclass
class EngineDeps:
    """Everything the shell touches, injected so tests supply fakes at the edge."""

    launcher: AgentLauncher  # one per process: it says each permission warning once
    env: Mapping[str, str] = field(default_factory=dict)
    clock: Clock = utc_now
    on_line: LineSink = lambda _line: None
    pr_opener: PrOpener | None = None
    # Records a plain batch's work per change and builds its PR group branches; without it
    # change steps record nothing and the PR step hands the opener branches as they are.
    work: WorkTree | None = None
    # Vets a plain batch's step (the converge gate of card steps) before its outcome and its
    # work are recorded (app/engine/batch_vet_seam.py); without it a batch step is recorded as it
    # ends.
    work_vet: WorkVetFactory | None = None
    pairbot_bin_dir: str = field(default_factory=lambda: str(Path(sys.executable).parent))

    def pairbot(self, settings: ResolvedSettings) -> str:
        """How the step's agent runs pairbot (its PAIRBOT, the prompt's report commands)."""
        return agent_pairbot(self.pairbot_bin_dir, settings.locus)


def agent_pairbot(bin_dir: str, locus: str) -> str:
    """pairbot for an agent in `locus`: a local agent gets this installation's console script
    by absolute path, which no login shell's PATH reset can hide (Debian's /etc/profile sets a
    PATH of its own); a container or a server runs the `pairbot` on its own PATH."""
    return str(Path(bin_dir) / "pairbot") if locus == "local" else "pairbot"


# ---------------------------------------------------------------- shared helpers


def iso_now(clock: Clock) -> str:
    return clock().isoformat(timespec="milliseconds")


def journal_event(locus: RunLocus, clock: Clock, **fields: Any) -> int:
    return append_entry(locus.journal, JournalEntry(at=iso_now(clock), **fields))


def usage_record(usage: AgentUsage | None) -> dict[str, Any] | None:
    """Tokens and cost for the journal; an unknown figure is recorded as null, never zero."""
    if usage is None:
        return None
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "costUsd": usage.cost_usd,
    }


def begin_step(
    locus: RunLocus,
    clock: Clock,
    *,
    key: str,
    transition: str,
    data: Mapping[str, Any] | None = None,
) -> tuple[str, int]:
    """Journal `step-started` ("doing", before any effect); returns the session id and index.

    `data` says what runs the step: `{agent, model}` for an agent step (`model` only when the
    stage names one)."""
    session = uuid.uuid4().hex[:12]
    index = journal_event(
        locus,
        clock,
        kind="step-started",
        key=key,
        transition=transition,
        session=session,
        data=data,
    )
    return session, index


def record_outcome(
    locus: RunLocus,
    deps: EngineDeps,
    *,
    key: str,
    transition: str,
    session: str,
    outcome: EngineStepOutcome,
    proof: lock.LockProof | None,
    verdict: Verdict | None = None,
    findings: Mapping[str, Any] | None = None,
    usage: AgentUsage | None = None,
    budget_park: str | None = None,
    contract_park: str | None = None,
) -> int:
    """Persist (or clear) the park, then journal the outcome: 'done' after the effect.

    `budget_park` is why an accepted step parks `awaiting-human`: it took the change (or its
    batch) over a budget (`app.domain.card.budget`). `contract_park` is why an accepted
    `verify-red` parks the change `blocked` (transition `contract`): its refusal of red's
    contract is the third in a row (`app.domain.review.red_verdict`); a retry runs red again.
    """
    verdict_record = None
    if verdict is not None:
        verdict_record = {
            "converged": verdict.converged,
            "blocking": verdict.blocking,
            "source": verdict.source,
            "pendingScope": verdict.pending_scope,
        }
    # The park is written before the outcome is journaled: a crash between the two leaves a
    # park with no accepted transition, which re-runs the step once cleared. The other order
    # could journal an awaiting-approval completion with no park, and skip the human gate.
    parks = read_parks(locus)
    accepted = outcome.state in ("advanced", "awaiting-approval")
    if accepted and budget_park is not None:
        # Over budget wins over a gate's approval park: one approval clears both, and the
        # maintainer sees the figures before anything more is spent.
        parks[key] = Park(
            state="awaiting-human",
            transition=transition,
            reason=budget_park,
            at=iso_now(deps.clock),
        )
    elif accepted and contract_park is not None:
        parks[key] = Park(
            state="blocked", transition=CONTRACT_PARK, reason=contract_park, at=iso_now(deps.clock)
        )
    elif outcome.state in ("blocked", "failed", "awaiting-approval"):
        state: Literal["blocked", "needs-input", "awaiting-approval"] = (
            "awaiting-approval"
            if outcome.state == "awaiting-approval"
            else "needs-input"
            if outcome.needs_input
            else "blocked"
        )
        parks[key] = Park(
            state=state, transition=transition, reason=outcome.message, at=iso_now(deps.clock)
        )
    else:
        parks.pop(key, None)
    write_parks(locus, parks, proof)
    return journal_event(
        locus,
        deps.clock,
        kind="outcome",
        key=key,
        transition=transition,
        session=session,
        state=outcome.state,
        message=outcome.message,
        verdict=verdict_record,
        findings=findings,
        usage=usage_record(usage),
    )


def to_result(
    outcome: EngineStepOutcome, key: str, transition: str, refs: tuple[int, ...]
) -> StepResult:
    return StepResult(
        state=outcome.public_state,
        change=key,
        transition=transition,
        blocker=outcome.blocker if outcome.public_state == "blocked" else None,
        approval_request=outcome.approval_request,
        message=outcome.message,
        journal_refs=refs,
    )


def model_context(stage: AgentStage, settings: ResolvedSettings) -> ModelHintContext | None:
    """Which explicit model the stage's agent was given, for the model-failure hint."""
    choice = settings.agent_for(stage)
    if choice.model is None:
        return None
    return ModelHintContext(stage=stage, agent=choice.name, model=choice.model, scope=choice.scope)


def parked_result(key: str, park: Park) -> StepResult:
    if park.state in ("awaiting-approval", "awaiting-human"):
        return StepResult(
            state="awaiting-approval",
            change=key,
            transition=park.transition,
            approval_request=park.reason,
            message=park.reason,
        )
    return StepResult(
        state="blocked",
        change=key,
        transition=park.transition,
        blocker=park.reason,
        message=park.reason,
    )
