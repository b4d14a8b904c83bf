"""A card's agent step: the engine's change step run on the card's worktree, with its vet.

`run_transition` gathers what the agent reads (the card as of its accepted command, pairbot's
notes, earlier cards' lessons for a propose, the checks others reported on the head for a
verify, the run's remediation batches and required findings for the verifier), builds the
engine's `ChangeStepContext` with the card's vet (`app.cycle.card_vet`) and review panel, runs
`app.engine.change_step.run_change_step` under the card's lock, and hands the result to
`app.cycle.report.after_transition` to publish. A verify whose head still waits for checks
others run is not started: the card says what it waits for. A `verify-red` (the red contract
verifier) reads red's contract, test diff and failing output (`app.cycle.red_verifier`); the
engine parks its third refusal in a row (`failed-contract`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from app.cycle import snapshot
from app.cycle import worktree as wt
from app.cycle.card_vet import Vetter
from app.cycle.contract import CUSTODY, custody_breach, hold
from app.cycle.head_checks import evidence_quotes, read_head_evidence, recorded_evidence
from app.cycle.lesson_files import lessons_for_proposal
from app.cycle.records import CycleRecord
from app.cycle.red_verifier import refusal_notes, verifier_notes
from app.cycle.report import after_transition
from app.cycle.state import CardState, CardStep
from app.cycle.status_publish import publish_status
from app.domain.card.budget import budget_of
from app.domain.reports.lesson import Lesson
from app.domain.review.contract import CONTRACT_FILE
from app.domain.review.evidence import Evidence, waiting_reason
from app.domain.review.routing import Routing
from app.domain.text.mdtext import one_line
from app.engine import lock
from app.engine.change_context import ChangeStepContext
from app.engine.change_step import run_change_step
from app.engine.gates import Gate
from app.engine.instructions import Quoted
from app.engine.manifest import Phase, load_manifest
from app.engine.outcome import EngineStepOutcome
from app.engine.step import StepResult, journal_event
from app.engine.transition import Transition
from app.settings import ResolvedSettings, resolve_settings
from hosts.labels import PrState


async def run_transition(
    state: CardState,
    held: lock.LockProof,
    tree: wt.Worktree,
    base: str,
    transition: Transition,
    *,
    delta: str | None = None,
    routing: Routing | None = None,
) -> CardStep:
    """Run one agent `transition` of the card on `tree` (`delta`: why a verify re-reviews
    only what changed since the reviewed head; `routing`: where the review sent the card),
    then publish what it left. Every step of a run that sealed a contract first checks the
    custody of its seals (before a fix or a verify above all: the seal is what they trust)."""
    env, rec = state.env, state.rec
    if rec.seals:
        breach = await asyncio.to_thread(custody_breach, state, tree.path, tree.start)
        if breach:
            return await _custody_failed(state, transition, tree.start, breach)
    card = await env.hosts.pm.get_card(state.card)
    taken = rec.snapshot
    if taken is None:  # a cycle bound before snapshots were kept: take one now, once
        taken = await snapshot.record(
            env.hosts.pm, env.deps.clock, state.locus, state.card, trigger_comment=None
        )
    evidence = await _evidence(state, tree, transition)
    if transition == "verify" and evidence is not None and evidence.waiting:
        result = StepResult("nothing-ready", state.key, "verify", message=waiting_reason(evidence))
        return await publish_status(state, result, PrState.AWAITING_VERIFY, None)
    manifest = load_manifest(env.root, state.key)
    settings = resolve_settings(
        env=env.deps.env, manifest=manifest.settings, project=state.project.batch
    )
    lessons = await _lessons(state, tree, base, transition, taken)
    vetter = Vetter(
        state=state,
        tree=tree,
        transition=transition,
        card=card,
        base=base,
        settings=settings,
        routing=routing,
    )
    await asyncio.to_thread(vetter.measure_before)
    prepare_parks = transition == "propose" and state.gate("prepare").fires(card.labels)
    ctx = _context(
        state,
        tree,
        transition,
        settings,
        gate="after-propose" if prepare_parks else "voluntary",
        phase=manifest.phase_of(state.key),
        card=snapshot.quotes(dict(taken)),
        notes=(*_notes(rec, delta), *_contract_notes(state, tree, transition, routing)),
        lessons=lessons,
        evidence=evidence,
        vet=vetter.vet,
    )
    try:
        result = await run_change_step(ctx, env.deps, held)
    except Exception as err:
        # The step failed in this process (a host or git error) and the error is reported as
        # it propagates: the next step runs it again. Only a run that dies without a word (a
        # kill, a cancelled job) leaves its step dangling, to be found `interrupted`.
        data = {"event": "step-raised", "transition": transition, "error": type(err).__name__}
        journal_event(state.locus, env.deps.clock, kind="cycle", key=state.key, data=data)
        raise
    return await after_transition(state, result, tree, base, card)


async def _custody_failed(
    state: CardState, transition: Transition, head: str, problems: list[str]
) -> CardStep:
    """A custody breach: journaled, the card parked `failed-custody`; the seal (the trusted
    snapshot) is kept and the branch is left as it is — nothing is reset."""
    reason = f"custody check before {transition} at {head[:12]}: " + "; ".join(problems)
    data = {"event": "custody-breach", "head": head, "problems": problems}
    journal_event(state.locus, state.env.deps.clock, kind="cycle", key=state.key, data=data)
    hold(state, "blocked", CUSTODY, reason)
    result = StepResult("blocked", state.key, transition, message=reason, blocker=reason)
    return await publish_status(state, result, PrState.FAILED_CUSTODY, None)


def _contract_notes(
    state: CardState, tree: wt.Worktree, transition: Transition, routing: Routing | None
) -> tuple[str, ...]:
    """What a red must write beside its tests (the contract the red verifier checks) and why
    the verifier refused the last one, what the verifier reads, and what a routed step is for:
    a green-fix on the same seal, a red-spec revision, a re-plan."""
    if transition == "verify-red":
        return verifier_notes(state, tree)
    notes: list[str] = list(refusal_notes(state)) if transition == "red" else []
    if routing is not None and routing.route != "red":
        notes.append(f"Routed by the review's findings ({routing.route}): {routing.reason}.")
    if transition == "red":
        where = f".pair/changes/{state.key}/{CONTRACT_FILE}"
        notes.append(
            f"Write the acceptance contract to {where}: "
            '{"fixScope": [paths or globs the fix may touch], "rows": [{"id": <finding id>, '
            '"ac": <its AC>, "tests": [<test ids as the JUnit report names them, '
            "classname::name>]}]}: one row per blocking finding, each naming tests that fail "
            "now. A later contract may only add to fixScope."
        )
        if routing is not None and routing.route == "red-spec" and routing.group is not None:
            notes.append(
                f"Revise only seal group g{routing.group}: keep every row id of it, change the "
                "rows the contract gap is about, add rows for what was missing."
            )
    if transition == "fix" and routing is not None and routing.route == "green-fix":
        notes.append(
            "Green-fix: an approved test fails on the production code. Make it pass on the "
            "same seal, touching only the sealed fixScope; do not edit any test."
        )
    return tuple(notes)


def _notes(rec: CycleRecord, delta: str | None) -> tuple[str, ...]:
    """pairbot's own notes for the agent: the last send-back, and a delta re-review's scope."""
    notes: list[str] = []
    if rec.sendbacks and rec.last_sendback:
        notes.append(f"Your previous attempt was sent back by the engine: {rec.last_sendback}")
    if delta is not None:
        notes.append(
            f"Delta re-review: {delta}. Re-check the earlier findings and what changed since the "
            f"reviewed head {rec.reviewed_head or '(none)'}; do not start a fresh full pass."
        )
    return tuple(notes)


async def _evidence(state: CardState, tree: wt.Worktree, transition: Transition) -> Evidence | None:
    """The checks on the head the agent works on: for a verify, read from the host on the exact
    head under review before any agent runs; for a red or a fix, the failing checks the last
    review saw (findings the fix addresses too)."""
    if transition == "verify":
        return await read_head_evidence(state, tree.start)
    if transition in ("red", "fix"):
        return recorded_evidence(state.rec, state.rec.reviewed_head)
    return None


async def _lessons(
    state: CardState,
    tree: wt.Worktree,
    base: str,
    transition: Transition,
    taken: Mapping[str, Any],
) -> tuple[Lesson, ...]:
    """Earlier cards' lessons on the files this card touches, for a propose to read."""
    if transition != "propose":
        return ()
    card_text = f"{taken.get('title', '')}\n{taken.get('body', '')}"
    return await asyncio.to_thread(
        lessons_for_proposal,
        state.env.root,
        state.project.lessons,
        card_text=card_text,
        tree=tree.path,
        key=state.key,
        base=base,
    )


def _context(
    state: CardState,
    tree: wt.Worktree,
    transition: Transition,
    settings: ResolvedSettings,
    *,
    gate: Gate,
    phase: Phase | None,
    card: tuple[Quoted, ...],
    notes: tuple[str, ...],
    lessons: tuple[Lesson, ...],
    evidence: Evidence | None,
    vet: Callable[[EngineStepOutcome], Awaitable[EngineStepOutcome]],
) -> ChangeStepContext:
    """The engine's change step for this card: in its worktree, its run-state at the
    checkout's root, its budget, and for a verify its review panel and required findings."""
    verify = transition == "verify"
    review = state.project.review
    return ChangeStepContext(
        root=tree.path,
        locus=state.locus,
        change=state.key,
        transition=transition,
        settings=settings,
        gate=gate,
        batch=state.key,
        phase=phase,
        max_fix_rounds=state.project.cycle.max_fix_rounds,
        card=card,
        notes=notes,
        lessons=lessons,
        history=state.history,
        vet=vet,
        state_root=state.env.root,
        card_budget=budget_of(state.project.budget),
        evidence=evidence_quotes(evidence),
        external_blocking=tuple(c.name for c in evidence.blocking)
        if evidence is not None and verify
        else (),
        panel=tuple(review.reviewers()) if verify else (),
        between_reviewers=_put_back(tree),
        severity_floor=review.severity_floor,
        review_notes=_review_notes(state) if verify else (),
    )


def _put_back(tree: wt.Worktree) -> Callable[[], Awaitable[None]]:
    """Between two reviewers of a panel: the tree as the step began (a reviewer's edits are
    never what the next one reviews)."""

    async def put_back() -> None:
        await asyncio.to_thread(wt.reset, tree.path, tree.start)

    return put_back


def _review_notes(state: CardState) -> tuple[str, ...]:
    """What the verifier needs beyond its command: the run's remediation batches and reviewed
    heads (a regression claim names them), and the card's required findings."""
    rec = state.rec
    lines: list[str] = []
    if rec.remediations:
        batches = "; ".join(f"{b} produced {h}" for b, h in rec.remediations.items())
        lines.append(f"Remediation batches of this run: {batches}.")
    if rec.reviewed_heads:
        heads = ", ".join(dict.fromkeys(rec.reviewed_heads))
        lines.append(f"Heads earlier reviews of this run reviewed: {heads}.")
    return (*lines, *_required_notes(state))


def _required_notes(state: CardState) -> tuple[str, ...]:
    """The card's required findings, for the verifier to re-prove on this head."""
    required = state.project.review.required_for(state.card)
    if not required:
        return ()
    lines = [
        "Required findings (verified evidence this card carries): re-prove each on this head "
        "with its probe and oracle, and report it in `requiredProofs` {id, head, reproduced, "
        'observed}; one still present is an open finding of kind "regression" with '
        "`requiredFinding: <id>`."
    ]
    for item in required:
        fields = (
            f"{item.id}: observed at {item.observed_head}; {item.kind}, {item.severity}; "
            f"summary: {item.summary}; oracle: {item.oracle}; probe: {item.probe}; "
            f"observed: {item.observed}"
        )
        lines.append(f"- {one_line(fields, 1000)}")
    return tuple(lines)
