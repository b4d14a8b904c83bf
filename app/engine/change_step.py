"""The change-scoped core of a step: exactly one agent (or one review panel) for a transition.

    run_change_step    spawn the agent the transition names (a verify with a review panel
                       spawns each reviewer in turn: `app.engine.panel_review`), snapshot the
                       journal delta and the disk, read the review's verdict
                       (`app.engine.review_verdict`), take the verifiers' findings files out
                       of the tree (`app.engine.findings_files`), map the session to an
                       outcome, vet it, journal it and persist the park

It never re-derives the transition: `app.engine.runner` decides it under the batch lock (and
the headless verbs force it); the card cycle calls it with its own vet. A plain batch's step
records its work on the batch's work line (`app.engine.work_journal`) and answers to the
batch's vet (`deps.work_vet`) before its outcome is journaled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from app.domain.card.budget import check_budget, park_reason
from app.domain.review.red_verdict import contract_park_reason, refusals_in_a_row
from app.domain.review.verdict import Verdict
from app.engine import jsonl, lock
from app.engine.agent import AgentUsage
from app.engine.batch_vet_seam import WorkVet, WorkVetRequest
from app.engine.change_context import ChangeStepContext
from app.engine.findings_files import REPORTING_STEPS, remove_reported_findings
from app.engine.instructions import InstructionContext, build_instructions
from app.engine.journal import KeyHistory, read_index
from app.engine.manifest import TestsConfig
from app.engine.outcome import EngineStepOutcome, SessionEvidence, map_session_to_outcome
from app.engine.panel_review import PanelReview, panel_review
from app.engine.review_verdict import open_findings, red_contract_verdict, verify_verdict
from app.engine.spawn import Session, spawn_agent
from app.engine.step import (
    EngineDeps,
    StepResult,
    model_context,
    record_outcome,
    to_result,
    usage_record,
)
from app.engine.transition import ChangeDisk, derive_change, read_change_disk
from app.engine.work_journal import journal_work, prepare_work
from app.engine.work_line import Snapshot, WorkTree, work_branch

_ACCEPTED = ("advanced", "awaiting-approval")


class Instructions(Protocol):
    """What the agent named `agent` (and a panel's `reviewer`) is told."""

    def __call__(self, agent: str, reviewer: str | None = None) -> str: ...


@dataclass(frozen=True)
class _WorkLine:
    """A plain batch's step on its work line: where its snapshot goes, and its vet."""

    work: WorkTree
    batch: str
    last: str
    vetter: WorkVet | None


@dataclass(frozen=True)
class _Review:
    """What the step's review said: its verdict, the problems that fail it closed, and the
    findings as reported."""

    verdict: Verdict | None = None
    problems: tuple[str, ...] = ()
    findings: Mapping[str, Any] | None = None


async def run_change_step(
    ctx: ChangeStepContext, deps: EngineDeps, proof: lock.LockProof | None
) -> StepResult:
    """The change-scoped core: exactly one agent for `ctx.transition`; never re-derives it."""
    history = (
        ctx.history
        if ctx.history is not None
        else read_index(ctx.locus.journal).history(ctx.change)
    )
    before = read_change_disk(ctx.root, ctx.change)
    review_round = derive_change(before, history, ctx.max_fix_rounds).review_round
    instructions_for = _instructions(ctx, deps, history, review_round)
    instructions = instructions_for(ctx.settings.agent_for(ctx.transition).name)
    line = await _start_work(ctx, deps)
    # Reports since the key's last outcome: this step's, and an earlier attempt's that died
    # before its outcome (its findings file may still lie in the tree).
    reported_from = history.last_outcome + 1
    panel: PanelReview | None = None
    if ctx.transition == "verify" and ctx.panel:
        panel = await panel_review(ctx, deps, history, review_round, instructions_for)
        spawned = panel.session
    else:
        spawned = await spawn_agent(
            root=ctx.root,
            locus=ctx.locus,
            deps=deps,
            settings=ctx.settings,
            stage=ctx.transition,
            key=ctx.change,
            batch=ctx.batch,
            instructions=instructions,
            state_root=ctx.state_root,
            instructions_for=instructions_for,
        )
    if ctx.transition in REPORTING_STEPS:
        remove_reported_findings(ctx.root, ctx.locus.journal, ctx.change, reported_from)
    snap: Snapshot | None = None
    if line is not None:
        snap = await line.work.snapshot(
            work_branch(line.batch), line.last, f"{line.batch}: {ctx.transition} {ctx.change}"
        )
    after = read_change_disk(ctx.root, ctx.change)
    review = _review(ctx, spawned, panel, history, review_round)
    outcome = _outcome(ctx, spawned, before, after, review)
    if ctx.vet is not None and outcome.state in _ACCEPTED:
        outcome = await ctx.vet(outcome)
    keep = True
    vetter = line.vetter if line is not None else None
    if vetter is not None and snap is not None and outcome.state in _ACCEPTED:
        vetted = await vetter.vet(outcome, snap)
        outcome, keep = vetted.outcome, vetted.keep
    return _record(
        ctx, deps, proof, spawned, outcome=outcome, review=review, kept=snap if keep else None
    )


def _instructions(
    ctx: ChangeStepContext, deps: EngineDeps, history: KeyHistory, review_round: int
) -> Instructions:
    """What the step's agent is told, built for the agent that runs it (a fallback agent or
    a panel's reviewer gets its own)."""

    def instructions_for(agent: str, reviewer: str | None = None) -> str:
        return build_instructions(
            InstructionContext(
                transition=ctx.transition,
                key=ctx.change,
                batch=ctx.batch,
                phase=ctx.phase,
                agent=agent,
                review_round=review_round,
                guidance=ctx.guidance,
                card=ctx.card,
                notes=ctx.notes,
                answers=tuple(history.answers),
                feedback=history.feedback[1] if history.feedback else None,
                open_findings=open_findings(history)
                if ctx.transition in ("red", "verify-red", "fix")
                else (),
                lessons=ctx.lessons if ctx.transition == "propose" else (),
                evidence=ctx.evidence,
                reviewer=reviewer,
                panel=tuple(slug for slug, _ in ctx.panel),
                severity_floor=ctx.severity_floor,
                review_notes=ctx.review_notes,
                pairbot=deps.pairbot(ctx.settings),
            ),
            deps.launcher.delegate,
        )

    return instructions_for


async def _start_work(ctx: ChangeStepContext, deps: EngineDeps) -> _WorkLine | None:
    """A plain batch's step in a git checkout: the snapshot its work goes on, and its vet
    (which measures before the agent runs). None when the step records no work."""
    work = deps.work if ctx.record_work else None
    if work is None or ctx.batch is None:
        return None
    last = await prepare_work(ctx.locus, deps, work, ctx.batch)
    if last is None:
        return None
    vetter: WorkVet | None = None
    if deps.work_vet is not None:
        vetter = deps.work_vet(
            WorkVetRequest(
                root=ctx.root,
                batch=ctx.batch,
                change=ctx.change,
                transition=ctx.transition,
                tests=ctx.tests or TestsConfig(),
                journal=ctx.locus.journal,
                branch=work_branch(ctx.batch),
                env=deps.env,
                launcher=deps.launcher,
            )
        )
        await vetter.before()
    return _WorkLine(work, ctx.batch, last, vetter)


def _review(
    ctx: ChangeStepContext,
    spawned: Session,
    panel: PanelReview | None,
    history: KeyHistory,
    review_round: int,
) -> _Review:
    """A verify's verdict (the panel's, or the lone reviewer's); a failing required check
    others reported on the head keeps it from converging. A verify-red's contract verdict
    (converged: the contract accepted). Nothing for other transitions."""
    if panel is not None:
        return _Review(panel.verdict, tuple(panel.problems), panel.findings)
    if ctx.transition == "verify-red":
        verdict, problems, findings = red_contract_verdict(spawned.entries)
        return _Review(verdict, tuple(problems), findings)
    if ctx.transition != "verify":
        return _Review()
    verdict, problems, findings = verify_verdict(
        spawned.entries, history, review_round, ctx.severity_floor
    )
    if verdict is not None and ctx.external_blocking:
        verdict = dataclasses.replace(
            verdict,
            converged=False,
            blocking=verdict.blocking + len(ctx.external_blocking),
        )
    return _Review(verdict, tuple(problems), findings)


def _outcome(
    ctx: ChangeStepContext,
    spawned: Session,
    before: ChangeDisk,
    after: ChangeDisk,
    review: _Review,
) -> EngineStepOutcome:
    return map_session_to_outcome(
        SessionEvidence(
            transition=ctx.transition,
            entries=spawned.entries,
            exit_code=spawned.exit_code,
            signal=spawned.signal,
            stderr=spawned.stderr,
            reason=spawned.reason,
            before=before,
            after=after,
            gate=ctx.gate,
            model=model_context(ctx.transition, spawned.settings or ctx.settings)
            if spawned.spawned
            else None,
            verdict=review.verdict,
            verdict_problems=list(review.problems),
        )
    )


def _record(
    ctx: ChangeStepContext,
    deps: EngineDeps,
    proof: lock.LockProof | None,
    spawned: Session,
    *,
    outcome: EngineStepOutcome,
    review: _Review,
    kept: Snapshot | None,
) -> StepResult:
    """Journal the work the step kept, then the park and the outcome ("done")."""
    if ctx.batch is not None and kept is not None and kept.files:
        # Before the outcome: a crash in between leaves the step unaccepted, so it runs again
        # for the same change, and its next snapshot still belongs to that change. A refused
        # step's snapshot was discarded with its work, and belongs to nothing.
        journal_work(
            ctx.locus, deps, ctx.batch, change=ctx.change, transition=ctx.transition, snap=kept
        )
    # Spending counts once the step is accepted, after the vet: a refused step parks nothing.
    accepted = outcome.state in _ACCEPTED
    budget_park = _budget_park(ctx, spawned.session, spawned.usage) if accepted else None
    contract_park = _contract_park(ctx, review) if accepted else None
    ref = record_outcome(
        ctx.locus,
        deps,
        key=ctx.change,
        transition=ctx.transition,
        session=spawned.session,
        usage=spawned.usage,
        outcome=outcome,
        proof=proof,
        verdict=review.verdict if accepted else None,
        findings=review.findings,
        budget_park=budget_park,
        contract_park=contract_park,
    )
    if budget_park is not None:
        return StepResult(
            state="awaiting-approval",
            change=ctx.change,
            transition=ctx.transition,
            approval_request=budget_park,
            message=budget_park,
            journal_refs=(spawned.started, ref),
        )
    return to_result(outcome, ctx.change, ctx.transition, (spawned.started, ref))


def _contract_park(ctx: ChangeStepContext, review: _Review) -> str | None:
    """Why this accepted verify-red parks the change: its refusal of red's contract is the
    third in a row (`app.domain.review.red_verdict`). None for anything else."""
    if ctx.transition != "verify-red" or review.verdict is None or review.verdict.converged:
        return None
    refusals = refusals_in_a_row(jsonl.read_records(ctx.locus.journal), ctx.change) + 1
    return contract_park_reason(refusals, review.findings or {})


def _budget_park(ctx: ChangeStepContext, session: str, usage: AgentUsage) -> str | None:
    """Why this accepted step parks `awaiting-human` over a budget, or None.

    Checked before the outcome is journaled (the park is written first), so the records are
    completed with the outcome this step is about to write.
    """
    if ctx.card_budget is None and ctx.batch_budget is None:
        return None
    pending = {
        "kind": "outcome",
        "key": ctx.change,
        "transition": ctx.transition,
        "session": session,
        "state": "advanced",  # accepted: only the steps' count and usage matter here
        "usage": usage_record(usage),
    }
    records = [*jsonl.read_records(ctx.locus.journal), pending]
    checks = [
        check
        for check in (
            check_budget("card", ctx.card_budget, records, ctx.change),
            check_budget("batch", ctx.batch_budget, records, None),
        )
        if check is not None
    ]
    return park_reason(checks)
