"""What every step is made of: the result, the injected dependencies, one agent spawn, and
recording an outcome ("doing" before the effect, "done" after it).

The step kinds (change steps in `runner`, the phase-scoped ones in `phase_steps`) all spawn
through `spawn_agent`, which journals `step-started`, hands the stage to the injected
`AgentLauncher` (app/engine/agent.py; the surfaces pass app/runtime's) and reads back only that
session's reports, and all finish through `record_outcome`, which writes the park before the
outcome. While the agent runs, its rendered lines go to `EngineDeps.on_line` and to the run
directory's live log (`app.engine.livelog`, `<run dir>/live/<session>.log`), which the card page
shows.

Failover: when the stage's agent names a fallback (`agent: [claude, codex]`) and the run failed
on a recognised quota, auth or crash signature (`app.domain.card.agent_failures`, the one table),
`spawn_agent` ends the failed attempt with a `failed` outcome, journals a `failover` entry
(`data`: the failed agent, the signature, the agent used next, the vendor's reason) and runs the
same step once more, in a new session, with the fallback agent. A failure on the step's merits
is never retried. A failed run's reason is the error its CLI reported in its JSON stdout
(`agent_failures.vendor_reason`, credentials redacted): it travels on `Session.reason` into the
outcome's message, so the blocker and the journal say why, not just "exit 1".
"""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol

from app.domain.card.agent_failures import (
    FAILOVER_KIND,
    FailureKind,
    classify_failure,
    failover_line,
    one_line,
    vendor_reason,
)
from app.domain.review.verdict import Verdict
from app.engine import lock
from app.engine.agent import (
    AgentLaunch,
    AgentLauncher,
    AgentNotStarted,
    AgentSpawnResult,
    AgentUsage,
    CommandId,
    LineSink,
)
from app.engine.batch_vet_seam import WorkVetFactory
from app.engine.boundary import PrGroupBoundary
from app.engine.journal import JournalEntry, append_entry, read_journal, session_entries
from app.engine.livelog import LiveLog
from app.engine.outcome import EngineStepOutcome, ModelHintContext, StepState
from app.engine.runstate import Park, RunLocus, read_parks, write_parks
from app.engine.work_line import WorkTree
from app.proc import START_FAILURE_EXIT_CODE, credential_values
from app.settings import AgentChoice, AgentStage, ResolvedSettings

COMMAND_FOR_STAGE: Mapping[AgentStage, CommandId] = {
    "propose": "propose",
    "apply": "apply",
    "verify": "verify",
    "red": "red",
    "fix": "fix",
    "decompose": "decompose-phase",
    "pr": "open-pr",
}

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
) -> int:
    """Persist (or clear) the park, then journal the outcome: 'done' after the effect.

    `budget_park` is why an accepted step parks `awaiting-human`: it took the change (or its
    batch) over a budget (`app.domain.card.budget`).
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


@dataclass(frozen=True)
class Session:
    session: str
    started: int  # the journal index of its `step-started` entry
    exit_code: int | None = None
    signal: str | None = None
    stderr: str = ""
    entries: tuple[JournalEntry, ...] = ()
    spawned: bool = True  # False when no agent could start (then no model hint applies)
    usage: AgentUsage = field(default_factory=AgentUsage)
    settings: ResolvedSettings | None = None  # what ran it, when a fallback agent took over
    # A failed run's error in its vendor's words, from its JSON stdout (secrets redacted).
    reason: str | None = None


def with_agent(
    settings: ResolvedSettings, stage: AgentStage, choice: AgentChoice
) -> ResolvedSettings:
    """`settings` with `choice` running `stage` (the fallback agent taking a step over)."""
    agents = dict(settings.agents)
    agents[stage] = choice
    return dataclasses.replace(settings, agents=MappingProxyType(agents))


def _failover_kind(
    choice: AgentChoice, result: AgentSpawnResult, reason: str | None
) -> FailureKind | None:
    if choice.fallback is None:
        return None
    output = f"{result.stdout}\n{result.stderr}"
    return classify_failure(choice.name, result.exit_code, result.signal, output, reason)


async def spawn_agent(
    *,
    root: Path,
    locus: RunLocus,
    deps: EngineDeps,
    settings: ResolvedSettings,
    stage: AgentStage,
    key: str,
    batch: str | None,
    instructions: str,
    state_root: Path | None = None,
    instructions_for: Callable[[str], str] | None = None,
) -> Session:
    """Journal `step-started`, spawn exactly one agent for `key`, collect what it reported.

    Failover (see the module docstring) spawns the stage's fallback agent once more, with the
    instructions `instructions_for(agent)` builds for it (else the same `instructions`).
    """
    spawned = await _spawn_once(
        root=root,
        locus=locus,
        deps=deps,
        settings=settings,
        stage=stage,
        key=key,
        batch=batch,
        instructions=instructions,
        state_root=state_root,
    )
    choice = settings.agent_for(stage)
    if spawned.result is None or choice.fallback is None:
        return spawned.session
    first = spawned.session
    kind = _failover_kind(choice, spawned.result, first.reason)
    if kind is None:
        return first
    fallback = choice.fallback
    said = first.reason or one_line(
        _last_line(spawned.result.stderr or spawned.result.stdout), credential_values(deps.env)
    )
    line = failover_line(choice.name, kind, fallback.name, stage)
    # The failed attempt ends like any step ("failed", with what it spent), so the metrics
    # and the budget count it; no park: the step goes on at once with the fallback agent.
    journal_event(
        locus,
        deps.clock,
        kind="outcome",
        key=key,
        transition=stage,
        session=first.session,
        state="failed",
        message=f"{line}: {said}",
        usage=usage_record(first.usage),
    )
    journal_event(
        locus,
        deps.clock,
        kind=FAILOVER_KIND,
        key=key,
        transition=stage,
        session=first.session,
        data={
            "failed": choice.name,
            "signature": kind,
            "next": fallback.name,
            "exitCode": first.exit_code,
            "signal": first.signal,
            "reason": first.reason,
        },
    )
    deps.on_line(f"pairbot: {line}: {said}")
    next_settings = with_agent(settings, stage, dataclasses.replace(fallback, fallback=None))
    retry = await _spawn_once(
        root=root,
        locus=locus,
        deps=deps,
        settings=next_settings,
        stage=stage,
        key=key,
        batch=batch,
        instructions=instructions_for(fallback.name) if instructions_for else instructions,
        state_root=state_root,
    )
    return dataclasses.replace(retry.session, settings=next_settings)


def _last_line(text: str, limit: int = 300) -> str:
    """The agent's last words (where its error is), cut to `limit` characters."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "(no output)"
    return last[-limit:]


@dataclass(frozen=True)
class _Spawned:
    session: Session
    result: AgentSpawnResult | None  # None when no agent started


async def _spawn_once(
    *,
    root: Path,
    locus: RunLocus,
    deps: EngineDeps,
    settings: ResolvedSettings,
    stage: AgentStage,
    key: str,
    batch: str | None,
    instructions: str,
    state_root: Path | None,
) -> _Spawned:
    choice = settings.agent_for(stage)
    runs = {"agent": choice.name, **({"model": choice.model} if choice.model else {})}
    session, started = begin_step(locus, deps.clock, key=key, transition=stage, data=runs)
    start = started + 1
    pair_env = {
        "PAIR_CHANGE": key,
        "PAIR_TRANSITION": stage,
        "PAIR_ROOT": deps.launcher.agent_root(root, settings),
        "PAIR_SESSION": session,
        "PAIRBOT": deps.pairbot(settings),
        "PATH": os.pathsep.join(
            [deps.pairbot_bin_dir, *([deps.env["PATH"]] if deps.env.get("PATH") else [])]
        ),
    }
    if batch is not None:
        pair_env["PAIR_BATCH"] = batch
    if state_root is not None:
        # The agent works in a card worktree; its reports belong to the run-state elsewhere.
        pair_env["PAIR_STATE_ROOT"] = str(state_root)
    launch = AgentLaunch(
        stage=stage,
        command=COMMAND_FOR_STAGE[stage],
        settings=settings,
        root=root,
        instructions=instructions,
        env={k: v for k, v in deps.env.items() if k != "PAIR_BATCH"},
        pair_env=pair_env,
        writable=(locus.journal,),  # `pairbot batch report` appends there
    )
    # The rendered output also goes to the batch's live log, for the card page to show.
    live = LiveLog(locus.directory, session, hide=credential_values(deps.env))
    live.open()

    def both(line: str) -> None:
        deps.on_line(line)
        live.line(line)

    try:
        result = await deps.launcher.launch(launch, both)
    finally:
        live.close()
    if isinstance(result, AgentNotStarted):
        # No agent could start: report it like a failed spawn so the step stays resumable.
        return _Spawned(
            Session(session, started, START_FAILURE_EXIT_CODE, stderr=result.reason, spawned=False),
            None,
        )
    failed = result.signal is not None or result.exit_code != 0
    reason = vendor_reason(result.stdout, credential_values(deps.env)) if failed else None
    # Only this session's reports count: a straggler from an earlier, killed session carries
    # its own PAIR_SESSION and must not complete this step.
    entries = tuple(
        e
        for e in session_entries(read_journal(locus.journal, start), key)
        if e.session in (None, session)
    )
    return _Spawned(
        Session(
            session,
            started,
            result.exit_code,
            result.signal,
            result.stderr,
            entries,
            usage=result.usage,
            reason=reason,
        ),
        result,
    )


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
