"""The step runner: the imperative shell around the pure engine. One call, one step.

    apply_batch        lock → load → select (pick_next_step) → dispatch one step → release
    run_step           re-derive the transition from disk under the lock, check parks, then
                       run_change_step (`app.engine.change_step`: one agent, or one review
                       panel, for the transition; its outcome journaled and its park persisted)
    run_headless       `pairbot propose|apply|verify <change>`: one forced transition, no lock
    (phase_steps: run_decomposition_step / run_proof_of_work / run_pr_step; step: what every
    step shares; spawn: one agent and its failover)

Every step journals `step-started` before its effect and `outcome` after it, so a crash between
the two is visible (an unmatched start) and the next apply simply re-derives and resumes. A
validation error in any `.pair/` file is raised before any run-state is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.domain.card.budget import budget_of
from app.engine import lock
from app.engine.change_context import ChangeStepContext
from app.engine.change_step import run_change_step
from app.engine.journal import JournalIndex, read_index
from app.engine.manifest import BatchManifest, ProjectConfig, load_manifest, load_project_config
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
from app.engine.step import EngineDeps, StepResult, parked_result
from app.engine.transition import Transition, derive_change, read_change_disk
from app.engine.work_journal import resume_work
from app.settings import resolve_settings


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
            await resume_work(locus, deps, deps.work, batch)
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
