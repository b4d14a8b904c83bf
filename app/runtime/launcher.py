"""The launcher behind the engine's agent seam: one step's stage in, one running agent out.

`Launcher` implements `AgentLauncher` (app/engine/agent.py). It is the only door from the engine
into this package; the surfaces build one (`project_launcher`) and inject it in
`EngineDeps.launcher`: app/cli/deps.py, whose deps the App's worker uses too, and the Action.

    launch(AgentLaunch, on_line)
      1. resolve the stage's argv (adapters.py, with permissions.py's flags)
      2. say the agent's permission warning, once per process
      3. render-or-verify the stage's command file where the agent runs (commands.py; none on
         the remote locus: the prompt carries the command inline)
      4. pick the runtime for the locus (`runtime_for`, by default select.py's)
      5. decide who the agent runs as (isolation.py): a local agent runs as its own OS user,
         lent its working tree and journal for the step and given a fresh HOME, whose
         `.profile` puts pairbot's bin directory back on a PATH a login shell reset
         (`login_profile`); where that is impossible the run says so once
      6. write the agent's own rules for a bounded posture (rules/: gemini's policy, codex's
         execpolicy, opencode's permissions) beside it, and point it at them: in the isolated
         agent's HOME, in a scratch directory, or — docker, remote — through the runtime in
         the step's run directory on the agent's side (`RuleWriter`); a runtime that cannot
         write them there does not start an agent whose rules are files
      7. spawn it with the secret-stripped environment plus pairbot's keys (app.proc)
      8. take the files back, and render stream-json output for people (streamjson/), usage
         taken from the stream
    a UserError in steps 1 to 5 → AgentNotStarted: nothing was spawned, the step blocks and resumes

`run_command` runs the project's own commands (tests, proof-of-work) under the same isolation
(sandbox.py): they execute code the agent may have written.

`delegate` writes the prompt's command block and `agent_root` says where each locus puts the
project root; both are here because only the runtime knows agents' command files and loci.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from app.engine.agent import (
    AgentEvent,
    AgentLaunch,
    AgentNotStarted,
    AgentRuntime,
    AgentSpawnRequest,
    AgentSpawnResult,
    CommandId,
    CommandResult,
    CommandRun,
    EventSink,
    LineSink,
    RunAs,
)
from app.errors import UserError
from app.proc import START_FAILURE_EXIT_CODE, agent_environment
from app.runtime import commands, isolation, lending
from app.runtime.adapters import AgentArgv, resolve_argv
from app.runtime.permissions import WarnOnce
from app.runtime.rules import AgentRules, RuleContext, RulesFor, agent_rules, rules_need_files
from app.runtime.sandbox import run_isolated
from app.runtime.streamjson import StreamJsonRenderer
from app.settings import AgentChoice, ResolvedSettings

__all__ = ["DOCKER_WORKDIR", "Launcher", "RuntimeFor", "login_profile", "project_launcher"]

# Where the docker locus bind-mounts the project root; the same value as rex.DOCKER_WORKDIR,
# repeated because importing rex loads swerex (tests/runtime/test_launcher.py ties the two).
DOCKER_WORKDIR = "/workspace"

# The isolated agent's rules files (app/runtime/rules), in its fresh HOME.
RULES_DIR = ".pairbot-rules"

RuntimeFor = Callable[[ResolvedSettings], AgentRuntime]
HostProbe = Callable[[], isolation.HostFacts]


@runtime_checkable
class RuleWriter(Protocol):
    """A runtime that writes a step's rule files on the agent's side before starting it
    (app/runtime/rex's `RexRuntime`): the directory is only known there, so it asks
    `rules_for` for the rules and adds their argv and environment to `request`."""

    async def spawn_with_rules(
        self, request: AgentSpawnRequest, rules_for: RulesFor | None, on_event: EventSink
    ) -> AgentSpawnResult:
        """Write the rules' files where the agent runs, then spawn it as `spawn` does."""
        ...


class Launcher:
    """Starts one stage's agent through the runtime that `runtime_for` picks for its settings."""

    def __init__(self, runtime_for: RuntimeFor, *, host: HostProbe | None = None) -> None:
        """`host` finds this machine's facts for the isolation decision (`project_launcher`
        passes `isolation.probe_host`); without it agents run as pairbot's own user."""
        self._runtime_for = runtime_for
        # Per launcher, so a surface that keeps one per process warns once per agent.
        self._warn_once = WarnOnce()
        self._host = host
        self._facts: isolation.HostFacts | None = None
        self._accounts: dict[str, isolation.AgentAccount] = {}
        self._isolation_warned = False

    def plan(self, settings: ResolvedSettings, env: Mapping[str, str]) -> isolation.Plan | None:
        """Who this step's agent runs as (None: no probe, pairbot's own user, said nowhere)."""
        return self._decide(settings.locus, env)

    def _decide(self, locus: str, env: Mapping[str, str]) -> isolation.Plan | None:
        if self._host is None:
            return None
        setting, user = isolation.parse_setting(env)
        if self._facts is None:
            self._facts = self._host()
        return isolation.decide(setting, locus, self._facts, user)

    def run_command(self, run: CommandRun) -> CommandResult:
        """Run a project command (tests, proof-of-work) from its tree as a `local` agent would
        run: it executes code the agent may have written (app/runtime/sandbox.py)."""
        try:
            plan = self._decide("local", run.env) or isolation.NoIsolation(None)
        except UserError as err:
            return CommandResult(START_FAILURE_EXIT_CODE, "", f"pairbot: {err}\n")
        account = self._account(plan) if isinstance(plan, isolation.Switch) else None
        return run_isolated(plan, account, run)

    def _account(self, switch: isolation.Switch) -> isolation.AgentAccount:
        account = self._accounts.get(switch.user)
        if account is None or account.switch != switch:
            account = self._accounts[switch.user] = isolation.AgentAccount(switch)
        return account

    def agent_root(self, root: Path, settings: ResolvedSettings) -> str:
        """The project root as the agent sees it: /workspace in docker, the server's workdir
        remote, the root itself locally."""
        if settings.locus == "docker":
            return DOCKER_WORKDIR
        if settings.locus == "remote" and settings.remote is not None and settings.remote.workdir:
            return settings.remote.workdir
        return str(root)

    def delegate(
        self, agent: str, command: CommandId, target: str, arguments: Sequence[str]
    ) -> str:
        """The prompt's command block (commands.delegate)."""
        return commands.delegate(agent, command, target, arguments)

    async def launch(
        self, launch: AgentLaunch, on_line: LineSink
    ) -> AgentSpawnResult | AgentNotStarted:
        """Spawn exactly one agent for `launch`; its output, rendered, goes to `on_line`."""
        settings = launch.settings
        prepared = self._prepare(launch, on_line)
        if isinstance(prepared, AgentNotStarted):
            return prepared
        choice, argv, runtime, plan = prepared
        env = agent_environment(launch.env, launch.pair_env)
        for name in argv.adapter.hidden_env:
            env.pop(name, None)
        context = RuleContext(
            policy=settings.permissions,
            pairbot=launch.pair_env.get("PAIRBOT", "pairbot"),
            root=self.agent_root(launch.root, settings),
            writable=tuple(map(str, launch.writable)),
            env=env,
        )
        run_as: RunAs | None = None
        lent: lending.Lending | None = None
        scratch_rules: Path | None = None
        rules_for: RulesFor | None = None
        contain = _container(plan)
        if isinstance(plan, isolation.Switch):
            try:
                lent, home, rules = await asyncio.to_thread(
                    self._lend, plan, launch, choice.name, context
                )
            except UserError as err:
                return AgentNotStarted(str(err))
            uid, gid = self._account(plan).ensure()
            run_as = RunAs(switch=plan.argv(), admin=plan.admin(), owner=f"{uid}:{gid}")
            env = {k: v for k, v in env.items() if k not in isolation.HOME_VARS}
            scratch = str(home / "tmp")
            env.update(HOME=str(home), USER=plan.user, LOGNAME=plan.user)
            env.update(TMPDIR=scratch, TMP=scratch, TEMP=scratch)
        elif settings.locus == "local":
            scratch_rules, rules = _rules_in_scratch(choice.name, context)
        else:  # the agent's disk is not this one: the runtime writes the files there
            rules = agent_rules(choice.name, context)  # rules_dir None: what needs no file
            if rules_need_files(choice.name, settings.permissions):
                if not isinstance(runtime, RuleWriter):
                    return AgentNotStarted(_no_rule_writer(choice.name, settings))
                rules, rules_for = AgentRules(), _rules_there(choice.name, context)
        env.update(rules.env)
        request = AgentSpawnRequest(
            command=argv.command,
            args=(*argv.args, *rules.args),
            instructions=launch.instructions,
            cwd=str(launch.root),
            env=env,
            timeout_ms=settings.agent_timeout_ms,
            run_as=run_as,
            contain=contain,
        )
        try:
            result = await self._spawn(
                runtime, request, argv.adapter.emits_stream_json, on_line, rules_for
            )
        finally:
            problem = None if lent is None else await asyncio.to_thread(_take_back, lent)
            if scratch_rules is not None:
                shutil.rmtree(scratch_rules, ignore_errors=True)
        if problem is not None:
            on_line(f"error: pairbot: {problem}")
            stderr = f"{result.stderr.rstrip()}\npairbot: {problem}\n".lstrip()
            return dataclasses.replace(result, exit_code=1, signal=None, stderr=stderr)
        return result

    def _prepare(
        self, launch: AgentLaunch, on_line: LineSink
    ) -> tuple[AgentChoice, AgentArgv, AgentRuntime, isolation.Plan | None] | AgentNotStarted:
        """Steps 1 to 5 of `launch`: the agent, its argv, its runtime and who it runs as, its
        warnings said; AgentNotStarted when one of them cannot be had."""
        settings = launch.settings
        try:
            choice = settings.agent_for(launch.stage)
            argv = resolve_argv(
                choice,
                settings,
                repo_root=self.agent_root(launch.root, settings),
                pairbot=launch.pair_env.get("PAIRBOT", "pairbot"),
            )
            warning = self._warn_once(choice.name, settings.permissions.posture)
            if warning:
                on_line(warning)
            # Render-or-fail: the stage's command file exists where the agent runs, but on the
            # remote locus, whose disk pairbot does not control (the prompt carries the same
            # text inline; the file is for people driving the agent themselves).
            commands.ensure_command_in_spawn_locus(
                launch.command, choice.name, settings.locus, launch.root, launch.env
            )
            runtime = self._runtime_for(settings)
            plan = self.plan(settings, launch.env)
        except UserError as err:
            return AgentNotStarted(str(err))
        if isinstance(plan, isolation.Refused):
            return AgentNotStarted(plan.reason)
        if isinstance(plan, isolation.NoIsolation) and plan.warning and not self._isolation_warned:
            self._isolation_warned = True  # once per run: the surfaces keep one launcher a run
            on_line(plan.warning)
        return choice, argv, runtime, plan

    def _lend(
        self, switch: isolation.Switch, launch: AgentLaunch, agent: str, context: RuleContext
    ) -> tuple[lending.Lending, Path, AgentRules]:
        account = self._account(switch)
        account.ensure()
        profile = login_profile(launch.pair_env.get("PAIRBOT", ""))
        made: list[AgentRules] = []

        def files(home: Path) -> dict[str, str]:
            # The rules live in the fresh HOME, written before it is handed over.
            where = home / RULES_DIR
            rules = agent_rules(agent, dataclasses.replace(context, rules_dir=str(where)))
            made.append(rules)
            written = {f"{RULES_DIR}/{name}": text for name, text in rules.files.items()}
            return {".profile": profile, **written} if profile else written

        home = account.make_home(files)
        try:
            return lending.lend(account, launch.root, tuple(launch.writable), home), home, made[0]
        except BaseException:
            with contextlib.suppress(UserError):
                account.remove_home(home)
            raise

    @staticmethod
    async def _spawn(
        runtime: AgentRuntime,
        request: AgentSpawnRequest,
        stream_json: bool,
        on_line: LineSink,
        rules_for: RulesFor | None,
    ) -> AgentSpawnResult:
        # Stream-json agents are rendered for people; the accumulated stdout stays the raw stream.
        renderer = StreamJsonRenderer(on_line) if stream_json else None
        show = renderer.feed if renderer is not None else on_line

        def on_event(event: AgentEvent) -> None:
            if event.kind == "stdout" and event.line is not None:
                show(event.line)
            elif event.kind == "error" and event.message:
                on_line(f"error: {event.message}")

        if rules_for is not None and isinstance(runtime, RuleWriter):
            result = await runtime.spawn_with_rules(request, rules_for, on_event)
        else:
            result = await runtime.spawn(request, on_event)
        if renderer is None:
            return result
        renderer.close()
        # The stream is where a stream-json agent reports its tokens and cost.
        return dataclasses.replace(result, usage=renderer.usage)


def login_profile(pairbot: str) -> str | None:
    """The isolated agent's `~/.profile`: a login shell (codex runs `bash -lc` unless told
    not to) reads /etc/profile, which on Debian sets a PATH of its own, then this file, which
    puts the directory of `pairbot` (the agent's PAIRBOT) back in front. bash reads it when
    there is no `~/.bash_profile`, and the fresh HOME has none. None when PAIRBOT is not an
    absolute path: nothing to put back."""
    path = Path(pairbot)
    if not pairbot or not path.is_absolute():
        return None
    where = shlex.quote(str(path.parent))
    return (
        "# Written by pairbot for one step: a login shell's /etc/profile may reset PATH;\n"
        "# pairbot's bin directory goes back in front, so `pairbot batch report` is found.\n"
        f'PATH={where}:"$PATH"\n'
        "export PATH\n"
    )


def _rules_in_scratch(agent: str, context: RuleContext) -> tuple[Path | None, AgentRules]:
    """The rules of an agent running as pairbot's own user, their files in a temporary directory
    of that user (removed after the step; None when no file was needed)."""
    where = Path(tempfile.mkdtemp(prefix="pairbot-rules-"))
    rules = agent_rules(agent, dataclasses.replace(context, rules_dir=str(where)))
    if not rules.files:
        where.rmdir()
        return None, rules
    for name, text in rules.files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(text, encoding="utf-8")
    return where, rules


def _rules_there(agent: str, context: RuleContext) -> RulesFor:
    """The rules of an agent whose disk is not this one, for the directory the runtime makes
    for them on its side (app/runtime/rex/rulefiles.py)."""
    return lambda where: agent_rules(agent, dataclasses.replace(context, rules_dir=where))


def _no_rule_writer(agent: str, settings: ResolvedSettings) -> str:
    return (
        f"{agent}'s rules for the {settings.permissions.posture} posture are files, and the "
        f"runtime of the {settings.locus} locus cannot write files where the agent runs: "
        f"pairbot does not start {agent} without its rules. Run it in locus local, or where "
        "its runtime can write them (swerex's docker and remote)"
    )


def _take_back(lent: lending.Lending) -> str | None:
    try:
        return lending.take_back(lent)
    except UserError as err:
        return str(err)


def _container(plan: isolation.Plan | None) -> Callable[[str], tuple[str, ...]] | None:
    """The PID-namespace prefix for this plan's processes (None: the locus or nothing bounds
    them); pairbot's own pid is what its watchdog watches."""
    if isinstance(plan, isolation.Switch | isolation.NoIsolation):
        bound, watch = plan, os.getpid()
        if isinstance(bound, isolation.NoIsolation) and not bound.namespace:
            return None
        return lambda record: bound.contained(watch, record)
    return None


def project_launcher(project_root: Path) -> Launcher:
    """The production launcher: the runtime for each step's locus, agents working in
    `project_root` (select.py; swerex loads on the first spawn, not here)."""
    from app.runtime.select import select_runtime  # noqa: PLC0415  # keep --help light

    # Before any git of this run touches a worktree: what a killed pairbot lent is pairbot's
    # again (git refuses a worktree another user owns). A tree it found unsafe fails its step
    # at the next lending of that tree; here there is no step to fail.
    lending.sweep()
    return Launcher(
        lambda settings: select_runtime(settings, project_root), host=isolation.probe_host
    )
