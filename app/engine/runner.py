"""The step runner: the imperative shell around the pure engine. One call, one step.

    apply_batch        lock → load → select (pick_next_step) → dispatch one step → release
    run_step           re-derive the transition from disk under the lock, check parks, then
                       run_change_step
    run_change_step    the change-scoped core (headless verbs call it directly, no lock): spawn
                       one agent, snapshot the journal delta and the disk, map the session to
                       an outcome, journal it, persist the park
                       (a verify with a review panel spawns each reviewer in turn, each its
                       own session and `panel-vote`, and records one outcome for the step)
    (phase_steps: run_decomposition_step / run_proof_of_work / run_pr_step; step: what every
    step shares)

Every step journals `step-started` before its effect and `outcome` after it, so a crash between
the two is visible (an unmatched start) and the next apply simply re-derives and resumes. A
validation error in any `.pair/` file is raised before any run-state is touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.domain.card.budget import Budget, budget_of, check_budget, park_reason
from app.domain.reports.lesson import Lesson
from app.domain.review.panel import (
    PANEL_VOTE_KIND,
    PanelVote,
    merge_reports,
    panel_id_problems,
    panel_verdict,
)
from app.domain.review.verdict import (
    DEFAULT_FLOOR,
    FindingsReport,
    Severity,
    Verdict,
    finding_id_problems,
    floor_problems,
    severity_problems,
    verdict_from_findings,
    verdict_from_message,
)
from app.engine import jsonl, lock
from app.engine.agent import AgentUsage
from app.engine.batch_vet_seam import WorkVet, WorkVetRequest
from app.engine.gates import Gate
from app.engine.instructions import InstructionContext, Quoted, build_instructions
from app.engine.journal import JournalEntry, JournalIndex, KeyHistory, read_index
from app.engine.manifest import (
    BatchManifest,
    Phase,
    ProjectConfig,
    TestsConfig,
    load_manifest,
    load_project_config,
)
from app.engine.outcome import EngineStepOutcome, SessionEvidence, map_session_to_outcome
from app.engine.phase_steps import run_decomposition_step, run_pr_step, run_proof_of_work
from app.engine.runstate import RunLocus, read_parks
from app.engine.selection import (
    BatchStatus,
    ChangeTarget,
    DecomposeTarget,
    ProofTarget,
    PrTarget,
    compute_batch_status,
)

# The read side lives in its own module (a status loads no step machinery); re-exported here.
from app.engine.status import batch_status as batch_status  # noqa: PLC0414
from app.engine.status import gather_facts
from app.engine.step import (
    EngineDeps,
    Session,
    StepResult,
    journal_event,
    model_context,
    parked_result,
    record_outcome,
    spawn_agent,
    to_result,
    usage_record,
    with_agent,
)
from app.engine.transition import Transition, derive_change, read_change_disk
from app.engine.work_line import (
    WORK_KIND,
    Snapshot,
    WorkTree,
    last_commit,
    work_branch,
    work_key,
    work_record,
    work_steps,
)
from app.settings import AgentChoice, ResolvedSettings, resolve_settings


@dataclass(frozen=True)
class _Earlier:
    """What earlier reviews of the change reported: the last review's active finding ids,
    every id any review reported, and each id's last reported severity."""

    active: list[str]
    known: set[str]
    severities: dict[str, str | None]


def _earlier_findings(history: KeyHistory) -> _Earlier:
    active: list[str] = []
    known: set[str] = set()
    severities: dict[str, str | None] = {}
    for accepted in history.accepted:
        if accepted.transition == "verify" and accepted.findings:
            reported = accepted.findings.get("findings", [])
            known.update(str(f.get("id")) for f in reported)
            severities.update({str(f.get("id")): f.get("severity") for f in reported})
            active = [
                str(f.get("id"))
                for f in reported
                if f.get("transition", "open") in ("open", "human")
            ]
    return _Earlier(active, known, severities)


def _read_review(
    entries: Sequence[JournalEntry],
) -> tuple[Verdict | None, list[str], FindingsReport | None, Mapping[str, Any] | None]:
    """A reviewer's completion: a verdict line's verdict, or its findings file validated (the
    problem when it does not validate), and the findings as reported."""
    completion = next((e for e in reversed(entries) if e.kind == "completion"), None)
    if completion is None:
        return None, [], None, None
    if completion.findings is None:
        return verdict_from_message(completion.message), [], None, None
    try:
        report = FindingsReport.model_validate(completion.findings)
    except ValidationError as err:
        return None, [f"findings do not validate: {err.errors()[0]['msg']}"], None, None
    return verdict_from_findings(report), [], report, completion.findings


def _judged(report: FindingsReport, earlier: _Earlier, floor: Severity) -> list[str]:
    """The rules every review's findings answer to, a panel reviewer's too: blocking against
    the severity floor, and no severity changed without evidence."""
    return [*floor_problems(report, floor), *severity_problems(earlier.severities, report)]


def _verify_verdict(
    entries: Sequence[JournalEntry],
    history: KeyHistory,
    review_round: int,
    floor: Severity = DEFAULT_FLOOR,
) -> tuple[Verdict | None, list[str], Mapping[str, Any] | None]:
    """The verify verdict from the completion, and every problem with its findings: ids
    (dropped, invented), blocking against the severity floor, a severity changed without
    evidence. Any problem fails the verification closed."""
    verdict, problems, report, reported = _read_review(entries)
    if report is None:
        return verdict, problems, None
    earlier = _earlier_findings(history)
    problems = [
        *finding_id_problems(earlier.active, report, review_round, earlier.known),
        *_judged(report, earlier, floor),
    ]
    return verdict, problems, reported


@dataclass(frozen=True)
class _PanelReview:
    """What a panel's verify leaves for the step's one outcome: the session it is recorded
    under (the first reviewer that failed, else the last one; its usage the panel's total),
    the panel's verdict, the problems that fail it closed and the merged findings."""

    session: Session
    verdict: Verdict | None
    problems: list[str]
    findings: Mapping[str, Any] | None


def _reviewer_verdict(
    entries: Sequence[JournalEntry],
    slug: str,
    slugs: Sequence[str],
    history: KeyHistory,
    review_round: int,
    *,
    floor: Severity = DEFAULT_FLOOR,
) -> tuple[Verdict | None, list[str], FindingsReport | None]:
    """One panel reviewer's verdict, its problems (ids by the panel's rules, the floor,
    severity evidence), and its report (None: a verdict line)."""
    verdict, problems, report, _reported = _read_review(entries)
    if report is None:
        return verdict, problems, None
    earlier = _earlier_findings(history)
    problems = [
        *panel_id_problems(
            slug,
            slugs,
            earlier_active=earlier.active,
            report=report,
            round_no=review_round,
            earlier_known=sorted(earlier.known),
        ),
        *_judged(report, earlier, floor),
    ]
    return verdict, problems, report


def _add_usage(total: AgentUsage, more: AgentUsage) -> AgentUsage:
    """Two runs' spending; a figure either does not know stays unknown (never a made-up 0)."""

    def plus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a + b

    tokens_in = plus(total.input_tokens, more.input_tokens)
    tokens_out = plus(total.output_tokens, more.output_tokens)
    return AgentUsage(
        input_tokens=None if tokens_in is None else int(tokens_in),
        output_tokens=None if tokens_out is None else int(tokens_out),
        cost_usd=plus(total.cost_usd, more.cost_usd),
    )


async def _panel_review(
    ctx: ChangeStepContext,
    deps: EngineDeps,
    history: KeyHistory,
    review_round: int,
    instructions_for: Callable[[str, str | None], str],
) -> _PanelReview:
    """Each panel reviewer, in turn, on the same head: its own session and a `panel-vote`
    entry each; the first that fails (no verdict, a crash, a bad id) decides the step."""
    slugs = [slug for slug, _ in ctx.panel]
    votes: list[PanelVote] = []
    reports: list[FindingsReport] = []
    total: AgentUsage | None = None
    session: Session | None = None
    for index, (slug, choice) in enumerate(ctx.panel):
        if index and ctx.between_reviewers is not None:
            await ctx.between_reviewers()
        settings = with_agent(ctx.settings, "verify", choice)

        def for_agent(agent: str, reviewer: str = slug) -> str:
            return instructions_for(agent, reviewer)

        session = await spawn_agent(
            root=ctx.root,
            locus=ctx.locus,
            deps=deps,
            settings=settings,
            stage="verify",
            key=ctx.change,
            batch=ctx.batch,
            instructions=for_agent(choice.name),
            state_root=ctx.state_root,
            instructions_for=for_agent,
        )
        session = dataclasses.replace(session, settings=session.settings or settings)
        total = session.usage if total is None else _add_usage(total, session.usage)
        verdict, problems, report = _reviewer_verdict(
            session.entries, slug, slugs, history, review_round, floor=ctx.severity_floor
        )
        if verdict is None or problems or session.exit_code not in (0, None):
            named = [f"reviewer {slug}: {problem}" for problem in problems]
            return _PanelReview(dataclasses.replace(session, usage=total), verdict, named, None)
        journal_event(
            ctx.locus,
            deps.clock,
            kind=PANEL_VOTE_KIND,
            key=ctx.change,
            transition="verify",
            session=session.session,
            data={
                "reviewer": slug,
                "agent": (session.settings or settings).agent_for("verify").name,
                "converged": verdict.converged,
                "blocking": verdict.blocking,
            },
        )
        votes.append(PanelVote(slug, verdict.converged, verdict.blocking))
        if report is not None:
            reports.append(report)
    if session is None or total is None:
        raise ValueError("a review panel needs at least one reviewer")
    decided = panel_verdict(votes)
    merged = merge_reports(reports) if reports else None
    verdict = Verdict(
        converged=decided.converged,
        blocking=decided.blocking,
        source="findings" if merged is not None else "message",
        pending_scope=len(merged.scope_changes) if merged is not None else 0,
    )
    findings = merged.model_dump(by_alias=True, exclude_none=True) if merged else None
    return _PanelReview(dataclasses.replace(session, usage=total), verdict, [], findings)


def _open_findings(history: KeyHistory) -> list[Mapping[str, Any]]:
    for accepted in reversed(history.accepted):
        if accepted.transition == "verify" and accepted.findings:
            return [
                f
                for f in accepted.findings.get("findings", [])
                if f.get("blocking") and f.get("transition", "open") in ("open", "human")
            ]
    return []


# ---------------------------------------------------------------- change steps


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
    derived = derive_change(before, history, ctx.max_fix_rounds)

    def instructions_for(agent: str, reviewer: str | None = None) -> str:
        return build_instructions(
            InstructionContext(
                transition=ctx.transition,
                key=ctx.change,
                batch=ctx.batch,
                phase=ctx.phase,
                agent=agent,
                review_round=derived.review_round,
                guidance=ctx.guidance,
                card=ctx.card,
                notes=ctx.notes,
                answers=tuple(history.answers),
                feedback=history.feedback[1] if history.feedback else None,
                open_findings=_open_findings(history) if ctx.transition in ("red", "fix") else (),
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

    instructions = instructions_for(ctx.settings.agent_for(ctx.transition).name)
    work = deps.work if ctx.record_work else None
    last: str | None = None
    vetter: WorkVet | None = None
    if work is not None and ctx.batch is not None:
        last = await _prepare_work(ctx.locus, deps, work, ctx.batch)
        if last is not None and deps.work_vet is not None:
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
    panel: _PanelReview | None = None
    if ctx.transition == "verify" and ctx.panel:
        panel = await _panel_review(ctx, deps, history, derived.review_round, instructions_for)
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
    snap: Snapshot | None = None
    if work is not None and ctx.batch is not None and last is not None:
        snap = await work.snapshot(
            work_branch(ctx.batch), last, f"{ctx.batch}: {ctx.transition} {ctx.change}"
        )
    after = read_change_disk(ctx.root, ctx.change)
    verdict: Verdict | None = None
    problems: list[str] = []
    findings: Mapping[str, Any] | None = None
    if panel is not None:
        verdict, problems, findings = panel.verdict, panel.problems, panel.findings
    elif ctx.transition == "verify":
        verdict, problems, findings = _verify_verdict(
            spawned.entries, history, derived.review_round, ctx.severity_floor
        )
        if verdict is not None and ctx.external_blocking:
            verdict = dataclasses.replace(
                verdict,
                converged=False,
                blocking=verdict.blocking + len(ctx.external_blocking),
            )
    outcome = map_session_to_outcome(
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
            verdict=verdict,
            verdict_problems=problems,
        )
    )
    if ctx.vet is not None and outcome.state in ("advanced", "awaiting-approval"):
        outcome = await ctx.vet(outcome)
    keep = True
    accepted = outcome.state in ("advanced", "awaiting-approval")
    if vetter is not None and snap is not None and accepted:
        vetted = await vetter.vet(outcome, snap)
        outcome, keep = vetted.outcome, vetted.keep
    if ctx.batch is not None and snap is not None and snap.files and keep:
        # Before the outcome: a crash in between leaves the step unaccepted, so it runs again
        # for the same change, and its next snapshot still belongs to that change. A refused
        # step's snapshot was discarded with its work, and belongs to nothing.
        _journal_work(
            ctx.locus, deps, ctx.batch, change=ctx.change, transition=ctx.transition, snap=snap
        )
    # Spending counts once the step is accepted, after the vet: a refused step parks nothing.
    still_accepted = outcome.state in ("advanced", "awaiting-approval")
    budget_park = _budget_park(ctx, spawned.session, spawned.usage) if still_accepted else None
    ref = record_outcome(
        ctx.locus,
        deps,
        key=ctx.change,
        transition=ctx.transition,
        session=spawned.session,
        usage=spawned.usage,
        outcome=outcome,
        proof=proof,
        verdict=verdict if outcome.state in ("advanced", "awaiting-approval") else None,
        findings=findings,
        budget_park=budget_park,
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


async def _resume_work(locus: RunLocus, deps: EngineDeps, work: WorkTree, batch: str) -> None:
    """Before anything is derived from disk: a checkout that never held the batch's recorded
    work (a fresh Actions runner) gets it back from the pushed work line."""
    last = last_commit(work_steps(jsonl.read_records(locus.journal), batch))
    if last is not None and await work.resume(work_branch(batch), last):
        deps.on_line(f"restored the batch's recorded work ({work_branch(batch)} at {last[:12]})")


async def _prepare_work(
    locus: RunLocus, deps: EngineDeps, work: WorkTree, batch: str
) -> str | None:
    """The snapshot this step's work goes on: the last recorded one, or a new baseline at the
    batch's first step. None outside a git checkout."""
    last = last_commit(work_steps(jsonl.read_records(locus.journal), batch))
    if last is not None:
        return last
    # The baseline: what the checkout held before any step. It belongs to no change, so
    # edits that were there before the batch ran are never carried by its PRs.
    snap = await work.snapshot(work_branch(batch), None, f"{batch}: baseline")
    if snap is None:
        return None
    _journal_work(locus, deps, batch, change=None, transition="baseline", snap=snap)
    return snap.commit


def _journal_work(
    locus: RunLocus,
    deps: EngineDeps,
    batch: str,
    *,
    change: str | None,
    transition: str,
    snap: Snapshot,
) -> None:
    journal_event(
        locus,
        deps.clock,
        kind=WORK_KIND,
        key=work_key(batch),
        transition=transition,
        data=work_record(change, transition, snap),
    )


async def run_step(
    target: ChangeTarget,
    *,
    root: Path,
    batch: str,
    manifest: BatchManifest,
    project: ProjectConfig,
    deps: EngineDeps,
    proof: lock.LockProof,
    guidance: str | None = None,
    journal: JournalIndex | None = None,
) -> StepResult:
    """The batch-facing change step: re-derive from disk under the lock, honour parks, run.

    `journal` is the fold the caller already read under this same lock (apply_batch's); it is
    re-read from disk when absent.
    """
    locus = RunLocus.for_batch(root, batch)
    history = (journal if journal is not None else read_index(locus.journal)).history(target.change)
    disk = read_change_disk(root, target.change)
    derived = derive_change(disk, history, project.cycle.max_fix_rounds)
    transition = derived.next or target.transition
    park = read_parks(locus).get(target.change)
    if park is not None:
        return parked_result(target.change, park)
    ctx = ChangeStepContext(
        root=root,
        locus=locus,
        change=target.change,
        transition=transition,
        settings=resolve_settings(env=deps.env, manifest=manifest.settings, project=project.batch),
        gate=manifest.gate,
        batch=batch,
        phase=manifest.phase_of(target.change),
        max_fix_rounds=project.cycle.max_fix_rounds,
        guidance=guidance,
        history=history,
        record_work=True,
        card_budget=budget_of(project.budget),
        batch_budget=budget_of(manifest.budget),
        tests=project.tests,
        severity_floor=project.review.severity_floor,
    )
    return await run_change_step(ctx, deps, proof)


# ---------------------------------------------------------------- one tick


async def apply_batch(
    root: Path, batch: str, deps: EngineDeps, *, guidance: str | None = None
) -> StepResult:
    """`pairbot batch apply`: run exactly one step of `batch`, or say why nothing runs."""
    project = load_project_config(root)
    manifest = load_manifest(root, batch)
    locus = RunLocus.for_batch(root, batch)
    held = lock.acquire(locus.lock, now=deps.clock())  # skips: BatchLockedError if held
    try:
        if deps.work is not None:
            await _resume_work(locus, deps, deps.work, batch)
        facts = gather_facts(root, batch, manifest, project)
        status = compute_batch_status(facts)
        target = status.next
        common: dict[str, Any] = {
            "root": root,
            "batch": batch,
            "manifest": manifest,
            "deps": deps,
            "proof": held,
        }
        if isinstance(target, ChangeTarget):
            return await run_step(
                target, project=project, guidance=guidance, journal=facts.journal, **common
            )
        if isinstance(target, DecomposeTarget):
            return await run_decomposition_step(target, project=project, **common)
        if isinstance(target, ProofTarget):
            return await run_proof_of_work(target, project=project, **common)
        if isinstance(target, PrTarget):
            return await run_pr_step(target, **common)
        return _nothing_ready(status)
    finally:
        lock.release(held)


def _nothing_ready(status: BatchStatus) -> StepResult:
    if status.done:
        return StepResult(
            state="nothing-ready",
            change="",
            transition="",
            message="Nothing to do — the batch is done.",
        )
    for key, park in status.parks.items():
        return parked_result(key, park)
    return StepResult(state="nothing-ready", change="", transition="", message=status.why)


# ---------------------------------------------------------------- headless verbs


async def run_headless(
    root: Path,
    change: str,
    transition: Transition,
    deps: EngineDeps,
    *,
    guidance: str | None = None,
) -> StepResult:
    """`pairbot propose|apply|verify <change>`: force one transition; no batch, no lock."""
    project = load_project_config(root)
    ctx = ChangeStepContext(
        root=root,
        locus=RunLocus.for_change(root, change),
        change=change,
        transition=transition,
        settings=resolve_settings(env=deps.env, manifest=None, project=project.batch),
        gate="voluntary",
        batch=None,
        phase=None,
        max_fix_rounds=project.cycle.max_fix_rounds,
        guidance=guidance,
        severity_floor=project.review.severity_floor,
    )
    return await run_change_step(ctx, deps, None)
