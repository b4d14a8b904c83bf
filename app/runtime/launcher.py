"""The launcher behind the engine's agent seam: one step's stage in, one running agent out.

`Launcher` implements `AgentLauncher` (app/engine/agent.py). It is the only door from the engine
into this package; the surfaces build one (`project_launcher`) and inject it in
`EngineDeps.launcher`: app/cli.py, whose deps the App's worker uses too, and action/__main__.py.

    launch(AgentLaunch, on_line)
      1. resolve the stage's argv (adapters.py, with permissions.py's flags)
      2. say the agent's permission warning, once per process
      3. render-or-verify the stage's command file where the agent runs (commands.py)
      4. pick the runtime for the locus (`runtime_for`, by default select.py's)
      5. spawn it with the secret-stripped environment plus pairbot's keys (app.proc)
      6. render stream-json output for people (streamjson.py), usage taken from the stream
    a UserError in steps 1 to 4 → AgentNotStarted: nothing was spawned, the step blocks and resumes

`delegate` writes the prompt's command block and `agent_root` says where each locus puts the
project root; both are here because only the runtime knows agents' command files and loci.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from app.engine.agent import (
    AgentEvent,
    AgentLaunch,
    AgentNotStarted,
    AgentRuntime,
    AgentSpawnRequest,
    AgentSpawnResult,
    CommandId,
    LineSink,
)
from app.errors import UserError
from app.proc import agent_environment
from app.runtime import commands
from app.runtime.adapters import resolve_argv
from app.runtime.permissions import WarnOnce
from app.runtime.streamjson import StreamJsonRenderer
from app.settings import ResolvedSettings

__all__ = ["DOCKER_WORKDIR", "Launcher", "RuntimeFor", "project_launcher"]

# Where the docker locus bind-mounts the project root; the same value as rex.DOCKER_WORKDIR,
# repeated because importing rex loads swerex (tests/runtime/test_launcher.py ties the two).
DOCKER_WORKDIR = "/workspace"

RuntimeFor = Callable[[ResolvedSettings], AgentRuntime]


class Launcher:
    """Starts one stage's agent through the runtime that `runtime_for` picks for its settings."""

    def __init__(self, runtime_for: RuntimeFor) -> None:
        self._runtime_for = runtime_for
        # Per launcher, so a surface that keeps one per process warns once per agent.
        self._warn_once = WarnOnce()

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
        try:
            choice = settings.agent_for(launch.stage)
            argv = resolve_argv(choice, settings, repo_root=self.agent_root(launch.root, settings))
            warning = self._warn_once(choice.name, settings.permissions.posture)
            if warning:
                on_line(warning)
            # Render-or-fail: the stage's command file exists where the agent runs (the prompt
            # carries the same text inline; the file is for people driving the agent themselves).
            commands.ensure_command_in_spawn_locus(
                launch.command, choice.name, settings.locus, launch.root, launch.env
            )
            runtime = self._runtime_for(settings)
        except UserError as err:
            return AgentNotStarted(str(err))
        request = AgentSpawnRequest(
            command=argv.command,
            args=argv.args,
            instructions=launch.instructions,
            cwd=str(launch.root),
            env=agent_environment(launch.env, launch.pair_env),
            timeout_ms=settings.agent_timeout_ms,
        )

        # Stream-json agents are rendered for people; the accumulated stdout stays the raw stream.
        renderer = StreamJsonRenderer(on_line) if argv.adapter.emits_stream_json else None
        show = renderer.feed if renderer is not None else on_line

        def on_event(event: AgentEvent) -> None:
            if event.kind == "stdout" and event.line is not None:
                show(event.line)
            elif event.kind == "error" and event.message:
                on_line(f"error: {event.message}")

        result = await runtime.spawn(request, on_event)
        if renderer is None:
            return result
        renderer.close()
        # The stream is where a stream-json agent reports its tokens and cost.
        return dataclasses.replace(result, usage=renderer.usage)


def project_launcher(project_root: Path) -> Launcher:
    """The production launcher: the runtime for each step's locus, agents working in
    `project_root` (select.py; swerex loads on the first spawn, not here)."""
    from app.runtime.select import select_runtime  # noqa: PLC0415  # keep --help light

    return Launcher(lambda settings: select_runtime(settings, project_root))
