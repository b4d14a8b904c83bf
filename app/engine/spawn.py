"""One agent spawned for a step, and its failover: the part of a step that runs an agent.

`spawn_agent` journals `step-started`, hands the stage to the injected `AgentLauncher`
(app/engine/agent.py; the surfaces pass app/runtime's) and reads back only that session's
reports. While the agent runs, its rendered lines go to `EngineDeps.on_line` and to the run
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from app.domain.card.agent_failures import (
    FAILOVER_KIND,
    FailureKind,
    classify_failure,
    failover_line,
    one_line,
    vendor_reason,
)
from app.engine import known_keys
from app.engine.agent import (
    AgentLaunch,
    AgentNotStarted,
    AgentSpawnResult,
    AgentUsage,
    CommandId,
)
from app.engine.journal import JournalEntry, read_journal, session_entries
from app.engine.livelog import LiveLog
from app.engine.project_files import existing_manifest_path
from app.engine.runstate import RunLocus
from app.engine.step import Clock, EngineDeps, begin_step, journal_event, usage_record
from app.errors import UserError
from app.proc import START_FAILURE_EXIT_CODE, credential_values
from app.settings import AgentChoice, AgentStage, ResolvedSettings

COMMAND_FOR_STAGE: Mapping[AgentStage, CommandId] = {
    "propose": "propose",
    "apply": "apply",
    "verify": "verify",
    "red": "red",
    "verify-red": "verify-red",
    "fix": "fix",
    "decompose": "decompose-phase",
    "pr": "open-pr",
}


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
    _journal_failover(
        locus,
        deps.clock,
        first,
        key=key,
        stage=stage,
        kind=kind,
        fallback=fallback,
        failed=choice.name,
        message=f"{line}: {said}",
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


def _journal_failover(
    locus: RunLocus,
    clock: Clock,
    first: Session,
    *,
    key: str,
    stage: AgentStage,
    kind: FailureKind,
    failed: str,
    fallback: AgentChoice,
    message: str,
) -> None:
    """End the failed attempt like any step ("failed", with what it spent), so the metrics and
    the budget count it, then journal the `failover`; no park: the step goes on at once with
    the fallback agent."""
    journal_event(
        locus,
        clock,
        kind="outcome",
        key=key,
        transition=stage,
        session=first.session,
        state="failed",
        message=message,
        usage=usage_record(first.usage),
    )
    journal_event(
        locus,
        clock,
        kind=FAILOVER_KIND,
        key=key,
        transition=stage,
        session=first.session,
        data={
            "failed": failed,
            "signature": kind,
            "next": fallback.name,
            "exitCode": first.exit_code,
            "signal": first.signal,
            "reason": first.reason,
        },
    )


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
    pair_env = _pair_env(
        root,
        deps,
        settings,
        stage=stage,
        key=key,
        session=session,
        batch=batch,
        state_root=state_root,
    )
    launch = AgentLaunch(
        stage=stage,
        command=COMMAND_FOR_STAGE[stage],
        settings=settings,
        root=root,
        instructions=instructions,
        env={k: v for k, v in deps.env.items() if k not in ("PAIR_BATCH", known_keys.ENV)},
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
    return _Spawned(
        _session_of(result, locus, deps, key=key, session=session, started=started), result
    )


def _manifest_memo(root: Path, batch: str) -> str | None:
    """`PAIR_MANIFEST_KEYS` for `batch` (`app.engine.known_keys`); None when its manifest cannot
    be read or does not validate (the report then says why itself)."""
    try:
        path = existing_manifest_path(root, batch)
        data = path.read_bytes()
    except (OSError, UserError):
        return None
    return known_keys.memo_for(path, data)


def _pair_env(
    root: Path,
    deps: EngineDeps,
    settings: ResolvedSettings,
    *,
    stage: AgentStage,
    key: str,
    session: str,
    batch: str | None,
    state_root: Path | None,
) -> dict[str, str]:
    """The `PAIR_*` variables (and the PATH with this pairbot first) the agent runs with."""
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
        # The manifest as validated now, so the agent's reports need not validate it again.
        memo = _manifest_memo(state_root or root, batch)
        if memo is not None:
            pair_env[known_keys.ENV] = memo
    if state_root is not None:
        # The agent works in a card worktree; its reports belong to the run-state elsewhere.
        pair_env["PAIR_STATE_ROOT"] = str(state_root)
    return pair_env


def _session_of(
    result: AgentSpawnResult,
    locus: RunLocus,
    deps: EngineDeps,
    *,
    key: str,
    session: str,
    started: int,
) -> Session:
    """The session as the agent left it: its exit, its vendor's reason when it failed, and
    the reports it journaled after `started`."""
    failed = result.signal is not None or result.exit_code != 0
    reason = vendor_reason(result.stdout, credential_values(deps.env)) if failed else None
    # Only this session's reports count: a straggler from an earlier, killed session carries
    # its own PAIR_SESSION and must not complete this step.
    entries = tuple(
        e
        for e in session_entries(read_journal(locus.journal, started + 1), key)
        if e.session in (None, session)
    )
    return Session(
        session,
        started,
        result.exit_code,
        result.signal,
        result.stderr,
        entries,
        usage=result.usage,
        reason=reason,
    )
