"""The step runner: the imperative shell around the pure engine. One call, one step.

    apply_batch        lock → load → select (pick_next_step) → dispatch one step → release
    run_step           re-derive the transition from disk under the lock, check parks, then
                       run_change_step
    run_change_step    the change-scoped core (headless verbs call it directly, no lock): spawn
                       one agent, snapshot the journal delta and the disk, map the session to
                       an outcome, journal it, persist the park
    run_decomposition_step / run_pr_step / run_proof_of_work   the other step kinds

Every step journals `step-started` before its effect and `outcome` after it, so a crash between
the two is visible (an unmatched start) and the next apply simply re-derives and resumes. A
validation error in any `.pair/` file is raised before any run-state is touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from app.domain.verdict import (
    FindingsReport,
    Verdict,
    finding_id_problems,
    verdict_from_findings,
    verdict_from_message,
)
from app.engine import lock
from app.engine.agent import AgentEvent, AgentRuntime, AgentSpawnRequest
from app.engine.boundary import PrGroupBoundary, select_stacked_bases
from app.engine.gates import Gate
from app.engine.instructions import (
    InstructionContext,
    build_decomposition_instructions,
    build_instructions,
)
from app.engine.journal import (
    JournalEntry,
    JournalIndex,
    KeyHistory,
    append_entry,
    fold_journal,
    read_index,
    read_journal,
    session_entries,
)
from app.engine.manifest import (
    BatchManifest,
    Phase,
    ProjectConfig,
    load_manifest,
    load_project_config,
    manifest_path,
)
from app.engine.outcome import (
    EngineStepOutcome,
    ModelHintContext,
    SessionEvidence,
    StepState,
    map_session_to_outcome,
)
from app.engine.proof import evaluate_pass_condition, gate_passed, run_proof_command
from app.engine.runstate import RunLocus, read_parks, write_parks
from app.engine.selection import (
    BatchFacts,
    BatchStatus,
    ChangeTarget,
    DecomposeTarget,
    Park,
    ProofTarget,
    PrTarget,
    compute_batch_status,
    pr_boundaries,
)
from app.engine.transition import Transition, derive_change, read_change_disk
from app.errors import ConfigError, UserError
from app.runtime.adapters import agent_environment, resolve_argv
from app.settings import AgentStage, ResolvedSettings, resolve_settings

Clock = Callable[[], datetime]
LineSink = Callable[[str], None]


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

    runtime_for: Callable[[ResolvedSettings], AgentRuntime]
    env: Mapping[str, str] = field(default_factory=dict)
    clock: Clock = utc_now
    on_line: LineSink = lambda _line: None
    pr_opener: PrOpener | None = None
    pairbot_bin_dir: str = field(default_factory=lambda: str(Path(sys.executable).parent))


# ---------------------------------------------------------------- gathering facts


def gather_facts(
    root: Path, batch: str, manifest: BatchManifest, project: ProjectConfig
) -> BatchFacts:
    """Read disk, journal and parks into the pure engine's input."""
    locus = RunLocus.for_batch(root, batch)
    return BatchFacts(
        name=batch,
        manifest=manifest,
        disks={name: read_change_disk(root, name) for name in manifest.change_names},
        journal=read_index(locus.journal),
        parks=read_parks(locus),
        max_fix_rounds=project.cycle.max_fix_rounds,
    )


def batch_status(root: Path, batch: str) -> BatchStatus:
    """`pairbot batch status`: validate, read, derive. Touches nothing."""
    project = load_project_config(root)
    manifest = load_manifest(root, batch)
    return compute_batch_status(gather_facts(root, batch, manifest, project))


# ---------------------------------------------------------------- shared helpers


def _iso(clock: Clock) -> str:
    return clock().isoformat(timespec="milliseconds")


def _journal(locus: RunLocus, clock: Clock, **fields: Any) -> int:
    return append_entry(locus.journal, JournalEntry(at=_iso(clock), **fields))


def _record_outcome(
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
) -> int:
    """Persist (or clear) the park, then journal the outcome: 'done' after the effect."""
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
    if outcome.state in ("blocked", "failed", "awaiting-approval"):
        state: Literal["blocked", "needs-input", "awaiting-approval"] = (
            "awaiting-approval"
            if outcome.state == "awaiting-approval"
            else "needs-input"
            if outcome.needs_input
            else "blocked"
        )
        parks[key] = Park(
            state=state, transition=transition, reason=outcome.message, at=_iso(deps.clock)
        )
    else:
        parks.pop(key, None)
    write_parks(locus, parks, proof)
    return _journal(
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
    )


def _to_result(
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


def _model_context(stage: str, settings: ResolvedSettings) -> ModelHintContext | None:
    choice = settings.agent_for(stage)  # type: ignore[arg-type]  # stage is an AgentStage
    if choice.model is None:
        return None
    return ModelHintContext(stage=stage, agent=choice.name, model=choice.model, scope=choice.scope)


@dataclass(frozen=True)
class _Session:
    session: str
    started: int  # the journal index of its `step-started` entry
    exit_code: int | None = None
    signal: str | None = None
    stderr: str = ""
    entries: tuple[JournalEntry, ...] = ()
    spawned: bool = True  # False when no agent could start (then no model hint applies)


async def _spawn(
    *,
    root: Path,
    locus: RunLocus,
    deps: EngineDeps,
    settings: ResolvedSettings,
    stage: AgentStage,
    key: str,
    batch: str | None,
    instructions: str,
) -> _Session:
    """Journal `step-started`, spawn exactly one agent for `key`, collect what it reported."""
    session = uuid.uuid4().hex[:12]
    started = _journal(
        locus, deps.clock, kind="step-started", key=key, transition=stage, session=session
    )
    start = started + 1
    try:
        argv = resolve_argv(settings.agent_for(stage), settings)
        runtime = deps.runtime_for(settings)
    except UserError as err:
        # No agent can start: report it like a failed spawn so the step stays resumable.
        return _Session(session, started, exit_code=127, stderr=str(err), spawned=False)
    pair_env = {
        "PAIR_CHANGE": key,
        "PAIR_TRANSITION": stage,
        "PAIR_ROOT": str(root),
        "PAIR_SESSION": session,
        "PATH": os.pathsep.join(
            [deps.pairbot_bin_dir, *([deps.env["PATH"]] if deps.env.get("PATH") else [])]
        ),
    }
    if batch is not None:
        pair_env["PAIR_BATCH"] = batch
    base = {k: v for k, v in deps.env.items() if k != "PAIR_BATCH"}
    request = AgentSpawnRequest(
        command=argv.command,
        args=argv.args,
        instructions=instructions,
        cwd=str(root),
        env=agent_environment(base, pair_env),
        timeout_ms=settings.agent_timeout_ms,
    )

    def on_event(event: AgentEvent) -> None:
        if event.kind == "stdout" and event.line is not None:
            deps.on_line(event.line)
        elif event.kind == "error" and event.message:
            deps.on_line(f"error: {event.message}")

    result = await runtime.spawn(request, on_event)
    # Only this session's reports count: a straggler from an earlier, killed session carries
    # its own PAIR_SESSION and must not complete this step.
    entries = tuple(
        e
        for e in session_entries(read_journal(locus.journal, start), key)
        if e.session in (None, session)
    )
    return _Session(session, started, result.exit_code, result.signal, result.stderr, entries)


def _verify_verdict(
    entries: Sequence[JournalEntry], history: KeyHistory, review_round: int
) -> tuple[Verdict | None, list[str], Mapping[str, Any] | None]:
    """The verify verdict from the completion, and any finding-id problems (fail closed)."""
    completion = next((e for e in reversed(entries) if e.kind == "completion"), None)
    if completion is None:
        return None, [], None
    if completion.findings is None:
        return verdict_from_message(completion.message), [], None
    try:
        report = FindingsReport.model_validate(completion.findings)
    except ValidationError as err:
        return None, [f"findings do not validate: {err.errors()[0]['msg']}"], None
    earlier: list[str] = []
    known: set[str] = set()
    for accepted in history.accepted:
        if accepted.transition == "verify" and accepted.findings:
            reported = accepted.findings.get("findings", [])
            known.update(str(f.get("id")) for f in reported)
            earlier = [
                str(f.get("id"))
                for f in reported
                if f.get("transition", "open") in ("open", "human")
            ]
    problems = finding_id_problems(earlier, report, review_round, known)
    return verdict_from_findings(report), problems, completion.findings


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
    history: KeyHistory | None = None  # already folded under the lock; read when absent


async def run_change_step(
    ctx: ChangeStepContext, deps: EngineDeps, proof: lock.LockProof | None
) -> StepResult:
    """The change-scoped core: exactly one agent for `ctx.transition`; never re-derives it."""
    history = (
        ctx.history
        if ctx.history is not None
        else read_index(ctx.locus.journal).history(ctx.change)
    )
    derived = derive_change(read_change_disk(ctx.root, ctx.change), history, ctx.max_fix_rounds)
    before = read_change_disk(ctx.root, ctx.change)
    instructions = build_instructions(
        InstructionContext(
            transition=ctx.transition,
            key=ctx.change,
            batch=ctx.batch,
            phase=ctx.phase,
            review_round=derived.review_round,
            guidance=ctx.guidance,
            answers=tuple(history.answers),
            feedback=history.feedback[1] if history.feedback else None,
            open_findings=_open_findings(history) if ctx.transition in ("red", "fix") else (),
        )
    )
    spawned = await _spawn(
        root=ctx.root,
        locus=ctx.locus,
        deps=deps,
        settings=ctx.settings,
        stage=ctx.transition,
        key=ctx.change,
        batch=ctx.batch,
        instructions=instructions,
    )
    after = read_change_disk(ctx.root, ctx.change)
    verdict: Verdict | None = None
    problems: list[str] = []
    findings: Mapping[str, Any] | None = None
    if ctx.transition == "verify":
        verdict, problems, findings = _verify_verdict(
            spawned.entries, history, derived.review_round
        )
    outcome = map_session_to_outcome(
        SessionEvidence(
            transition=ctx.transition,
            entries=spawned.entries,
            exit_code=spawned.exit_code,
            signal=spawned.signal,
            stderr=spawned.stderr,
            before=before,
            after=after,
            gate=ctx.gate,
            model=_model_context(ctx.transition, ctx.settings) if spawned.spawned else None,
            verdict=verdict,
            verdict_problems=problems,
        )
    )
    ref = _record_outcome(
        ctx.locus,
        deps,
        key=ctx.change,
        transition=ctx.transition,
        session=spawned.session,
        outcome=outcome,
        proof=proof,
        verdict=verdict if outcome.state in ("advanced", "awaiting-approval") else None,
        findings=findings,
    )
    return _to_result(outcome, ctx.change, ctx.transition, (spawned.started, ref))


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
        return _parked_result(target.change, park)
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
    )
    return await run_change_step(ctx, deps, proof)


def _parked_result(key: str, park: Park) -> StepResult:
    if park.state == "awaiting-approval":
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


# ---------------------------------------------------------------- decomposition, proof, PR


async def run_decomposition_step(
    target: DecomposeTarget,
    *,
    root: Path,
    batch: str,
    manifest: BatchManifest,
    project: ProjectConfig,
    deps: EngineDeps,
    proof: lock.LockProof,
) -> StepResult:
    """Spawn one agent to author an empty phase's changes; corroborate by re-reading batch.yaml."""
    locus = RunLocus.for_batch(root, batch)
    phase = manifest.phase_named(target.phase)
    if phase is None:  # pragma: no cover - selection only names phases of this manifest
        raise UserError(f"phase {target.phase!r} is not in batch {batch!r}")
    settings = resolve_settings(env=deps.env, manifest=manifest.settings, project=project.batch)
    shipped = [
        (p.name, p.change_names) for p in manifest.phases if p.name != phase.name and p.changes
    ]
    instructions = build_decomposition_instructions(
        batch, phase, shipped, str(manifest_path(root, batch).relative_to(root))
    )
    spawned = await _spawn(
        root=root,
        locus=locus,
        deps=deps,
        settings=settings,
        stage="decompose",
        key=phase.name,
        batch=batch,
        instructions=instructions,
    )
    decomposed: bool | None
    extra = ""
    try:
        reloaded = load_manifest(root, batch).phase_named(phase.name)
        decomposed = bool(reloaded and reloaded.changes)
    except ConfigError as err:
        decomposed, extra = False, f" (batch.yaml no longer validates: {err})"
    outcome = map_session_to_outcome(
        SessionEvidence(
            transition="decompose",
            entries=spawned.entries,
            exit_code=spawned.exit_code,
            signal=spawned.signal,
            stderr=spawned.stderr,
            gate=manifest.gate,
            model=_model_context("decompose", settings) if spawned.spawned else None,
            decomposed=decomposed,
        )
    )
    if extra and outcome.blocker:
        outcome = EngineStepOutcome(
            state=outcome.state, message=outcome.message + extra, blocker=outcome.blocker + extra
        )
    ref = _record_outcome(
        locus,
        deps,
        key=phase.name,
        transition="decompose",
        session=spawned.session,
        outcome=outcome,
        proof=proof,
    )
    return _to_result(outcome, phase.name, "decompose", (spawned.started, ref))


async def run_proof_of_work(
    target: ProofTarget,
    *,
    root: Path,
    batch: str,
    manifest: BatchManifest,
    project: ProjectConfig,
    deps: EngineDeps,
    proof: lock.LockProof,
) -> StepResult:
    """Run a phase's proof-of-work command once and journal its verdict (it drives the gate)."""
    del proof  # held by the caller for the whole step; recording needs no park
    locus = RunLocus.for_batch(root, batch)
    phase = manifest.phase_named(target.phase)
    if phase is None or phase.proof_of_work is None:  # pragma: no cover - selection guarantees
        raise UserError(f"phase {target.phase!r} has no proof-of-work")
    pow_ = phase.proof_of_work
    settings = resolve_settings(env=deps.env, manifest=manifest.settings, project=project.batch)
    started = _journal(
        locus, deps.clock, kind="step-started", key=phase.name, transition="proof-of-work"
    )
    deps.on_line(f"proof-of-work for phase {phase.name}: {pow_.run}")
    run = await run_proof_command(
        pow_.run, root, timeout_s=settings.agent_timeout_ms / 1000, env=deps.env or None
    )
    passed, detail = evaluate_pass_condition(pow_.pass_, run.exit_code, run.stdout)
    if run.timed_out:
        detail = f"timed out after {settings.agent_timeout_ms} ms; {detail}"
    opened = gate_passed(passed, pow_.policy)
    record = {
        "phase": phase.name,
        "kind": pow_.kind,
        "command": pow_.run,
        "passed": passed,
        "gatePassed": opened,
        "policy": pow_.policy,
        "exitCode": run.exit_code,
        "detail": detail,
        "at": _iso(deps.clock),
    }
    ref = _journal(locus, deps.clock, kind="proof-of-work", key=phase.name, proof=record)
    if passed:
        message = f"proof-of-work for phase {phase.name} passed: {detail}"
    elif opened:
        message = f"proof-of-work for phase {phase.name} ⚠ failed (warn): {detail}"
    else:
        message = f"proof-of-work for phase {phase.name} failed (hard-gate): {detail}"
    return StepResult(
        state="advanced" if opened else "blocked",
        change=phase.name,
        transition="proof-of-work",
        blocker=None if opened else message,
        message=message,
        journal_refs=(started, ref),
    )


def default_base_branch(root: Path) -> str:
    """The repository's default branch: origin's HEAD, else the current branch, else main."""
    for argv in (
        ["git", "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"],
        ["git", "symbolic-ref", "--quiet", "--short", "HEAD"],
    ):
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip().removeprefix("origin/")
    return "main"


def group_branch(batch: str, boundary: PrGroupBoundary | None) -> str:
    """The branch a PR group's work lives on."""
    return f"pair/{batch}" if boundary is None else f"pair/{batch}/{boundary.group_id}"


async def run_pr_step(
    target: PrTarget,
    *,
    root: Path,
    batch: str,
    manifest: BatchManifest,
    deps: EngineDeps,
    proof: lock.LockProof,
) -> StepResult:
    """Open one PR group through the code host, mechanically; journal it under its group key."""
    locus = RunLocus.for_batch(root, batch)
    base = manifest.base_branch or default_base_branch(root)
    head = group_branch(batch, target.boundary)
    if target.boundary is not None:
        boundaries = pr_boundaries(
            BatchFacts(name=batch, manifest=manifest, disks={}, journal=fold_journal([]))
        )
        stacked = select_stacked_bases(boundaries, base, lambda b: group_branch(batch, b))
        match = next(s for s in stacked if s.boundary.group_id == target.boundary.group_id)
        base, head = match.base_branch, match.head_branch
    session = uuid.uuid4().hex[:12]
    started = _journal(
        locus, deps.clock, kind="step-started", key=target.key, transition="pr", session=session
    )
    members = target.boundary.changes if target.boundary else tuple(manifest.change_names)
    request = PrRequest(
        batch=batch,
        key=target.key,
        base_branch=base,
        head_branch=head,
        title=f"{batch}: {target.boundary.group_id if target.boundary else 'whole batch'}",
        body="Changes: " + ", ".join(members),
        boundary=target.boundary,
    )
    if deps.pr_opener is None:
        message = (
            f"cannot open the PR for {target.key} ({head} → {base}): no code-host adapter is "
            "configured for PR steps; set prGrouping: off in the batch manifest to skip PRs"
        )
        outcome = EngineStepOutcome(state="blocked", message=message, blocker=message)
    else:
        try:
            ref = await deps.pr_opener.open_pr(request)
            outcome = EngineStepOutcome(state="advanced", message=f"opened {ref} ({head} → {base})")
        except Exception as err:  # any host failure parks the group, resumable
            message = f"opening the PR for {target.key} failed: {err}"
            outcome = EngineStepOutcome(state="failed", message=message, blocker=message)
    ref_index = _record_outcome(
        locus, deps, key=target.key, transition="pr", session=session, outcome=outcome, proof=proof
    )
    return _to_result(outcome, target.key, "pr", (started, ref_index))


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
        return _parked_result(key, park)
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
    )
    return await run_change_step(ctx, deps, None)
