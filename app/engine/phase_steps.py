"""The phase-scoped and batch-scoped steps: decomposition, proof-of-work, and PR groups.

Each is one step of `batch apply`, taken under the batch lock the caller holds: a
decomposition spawns one agent and corroborates by re-reading batch.yaml; a proof-of-work runs
the phase's command once and journals its verdict (which drives the gate); a PR step opens one
group through the code host, mechanically, keyed `pr:<batch>[:<group>]`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from app.domain.card.base_branch import ci_base_branch
from app.engine import jsonl, lock
from app.engine.boundary import PrGroupBoundary, select_stacked_bases
from app.engine.instructions import build_decomposition_instructions
from app.engine.manifest import (
    BatchManifest,
    ProjectConfig,
    load_manifest,
    manifest_path,
)
from app.engine.outcome import EngineStepOutcome, SessionEvidence, map_session_to_outcome
from app.engine.proof import evaluate_pass_condition, gate_passed, run_proof_command
from app.engine.runstate import RunLocus
from app.engine.selection import DecomposeTarget, ProofTarget, PrTarget, manifest_boundaries
from app.engine.spawn import spawn_agent
from app.engine.step import (
    EngineDeps,
    PrRequest,
    StepResult,
    begin_step,
    iso_now,
    journal_event,
    model_context,
    record_outcome,
    to_result,
)
from app.engine.work_line import plan_group_builds, work_steps
from app.errors import ConfigError, UserError
from app.settings import resolve_settings


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
    earlier = manifest.phases[: manifest.phases.index(phase)]
    shipped = [(p.name, p.change_names) for p in earlier if p.changes]

    def instructions_for(agent: str) -> str:
        return build_decomposition_instructions(
            batch,
            phase,
            shipped,
            str(manifest_path(root, batch).relative_to(root)),
            delegate=deps.launcher.delegate,
            agent=agent,
            pairbot=deps.pairbot(settings),
        )

    spawned = await spawn_agent(
        root=root,
        locus=locus,
        deps=deps,
        settings=settings,
        stage="decompose",
        key=phase.name,
        batch=batch,
        instructions=instructions_for(settings.agent_for("decompose").name),
        instructions_for=instructions_for,
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
            reason=spawned.reason,
            gate=manifest.gate,
            model=model_context("decompose", spawned.settings or settings)
            if spawned.spawned
            else None,
            decomposed=decomposed,
        )
    )
    if extra and outcome.blocker:
        outcome = EngineStepOutcome(
            state=outcome.state, message=outcome.message + extra, blocker=outcome.blocker + extra
        )
    ref = record_outcome(
        locus,
        deps,
        key=phase.name,
        transition="decompose",
        session=spawned.session,
        usage=spawned.usage,
        outcome=outcome,
        proof=proof,
    )
    return to_result(outcome, phase.name, "decompose", (spawned.started, ref))


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
    started = journal_event(
        locus, deps.clock, kind="step-started", key=phase.name, transition="proof-of-work"
    )
    deps.on_line(f"proof-of-work for phase {phase.name}: {pow_.run}")
    run = await run_proof_command(
        deps.launcher, pow_.run, root, timeout_s=settings.agent_timeout_ms / 1000, env=deps.env
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
        "at": iso_now(deps.clock),
    }
    ref = journal_event(locus, deps.clock, kind="proof-of-work", key=phase.name, proof=record)
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


def default_base_branch(root: Path, env: Mapping[str, str]) -> str:
    """The repository's default branch: what the CI names (a detached Azure checkout's HEAD
    says nothing), else origin's HEAD, else the current branch, else main."""
    named = ci_base_branch(env, None)
    if named is not None:
        return named
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
    """Build one PR group's branch from its changes' recorded work, then open its PR.

    "Doing" (`step-started`) is journaled before any effect and the outcome after it. Both
    effects are idempotent, so a crash anywhere in between simply runs the step again: the
    branches are rebuilt from the journal into the same commits, and the code host returns the
    PR already open for the head branch instead of opening a second.
    """
    locus = RunLocus.for_batch(root, batch)
    base = manifest.base_branch or default_base_branch(root, deps.env)
    whole = target.boundary is None
    stacked = select_stacked_bases(
        manifest_boundaries(batch, manifest),
        base,
        lambda b: group_branch(batch, None if whole else b),
    )
    # whole-batch journals under `pr:<batch>` with no boundary; its one group is the batch.
    group_id = batch if target.boundary is None else target.boundary.group_id
    match = next((s for s in stacked if s.boundary.group_id == group_id), None)
    if match is None:  # pragma: no cover - selection only targets groups of this manifest
        raise UserError(f"PR group {group_id!r} is not in batch {batch!r}")
    base, head = match.base_branch, match.head_branch
    session, started = begin_step(locus, deps.clock, key=target.key, transition="pr")
    members = match.boundary.changes
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
            if deps.work is not None:
                steps = work_steps(jsonl.read_records(locus.journal), batch)
                builds = plan_group_builds(steps, stacked, group_id)
                await deps.work.build_stack(batch, builds)
            ref = await deps.pr_opener.open_pr(request)
            outcome = EngineStepOutcome(state="advanced", message=f"opened {ref} ({head} → {base})")
        except Exception as err:  # any git or host failure parks the group, resumable
            message = f"opening the PR for {target.key} failed: {err}"
            outcome = EngineStepOutcome(state="failed", message=message, blocker=message)
    ref_index = record_outcome(
        locus, deps, key=target.key, transition="pr", session=session, outcome=outcome, proof=proof
    )
    return to_result(outcome, target.key, "pr", (started, ref_index))
