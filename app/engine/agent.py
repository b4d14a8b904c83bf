"""The seam between the engine and whatever runs an agent: what to run, the stream, the result.

The dependency is one-way: `app/runtime` implements these protocols and imports this module;
nothing under `app/engine` imports `app/runtime` (tests/packaging/test_layering.py holds that).

    engine     AgentLaunch ─────────▶ AgentLauncher   argv, permission warning, command files,
               ◀── AgentSpawnResult                   stream rendering (app/runtime/launcher.py,
                   | AgentNotStarted                  injected by the surfaces in EngineDeps)
    launcher   AgentSpawnRequest ───▶ AgentRuntime    one per locus; streams AgentEvents
               ◀── AgentSpawnResult

The engine says which stage runs, with which instructions and which PAIR_* keys, and gets back
how the agent ended. The launcher turns that into a spawn request for an `AgentRuntime` (one per
locus), which streams `AgentEvent`s while it accumulates the result. A bootstrap or transport
failure is reported as a non-zero result with the message in `stderr`, and a setting that stops
any agent from starting as `AgentNotStarted`, never as a new kind of outcome, so the step stays
resumable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from app.settings import AgentStage, ResolvedSettings

# pairbot's lifecycle commands: what an agent's prompt delegates to. The engine names them; the
# launcher knows how each agent invokes them and where their files live.
CommandId = Literal[
    "propose", "apply", "verify", "red", "verify-red", "fix", "decompose-phase", "open-pr"
]


@dataclass(frozen=True)
class RunAs:
    """Run the agent as another OS user (app/runtime/isolation.py decides which, and how).

    `switch` prefixes a command to run it as that user; `admin` prefixes the privileged
    commands that lend it files (empty when pairbot is root, `sudo -n` otherwise). Neither
    carries a secret: argv is readable by every user in /proc/<pid>/cmdline.
    """

    switch: tuple[str, ...]
    admin: tuple[str, ...]
    owner: str  # "uid:gid" of the agent user, for chown


@dataclass(frozen=True)
class AgentSpawnRequest:
    """Everything needed to start one agent process."""

    command: str
    args: tuple[str, ...]
    instructions: str  # delivered on stdin
    cwd: str
    env: Mapping[str, str]
    timeout_ms: int
    run_as: RunAs | None = None  # None: pairbot's own OS user
    # The prefix that starts the agent in a PID namespace of its own (switching to `run_as`
    # inside it), given the directory where the group is recorded; None where there is none.
    contain: Callable[[str], tuple[str, ...]] | None = None


@dataclass(frozen=True)
class AgentEvent:
    """One live event: a complete stdout line, the exit, or an actionable error."""

    kind: Literal["stdout", "exit", "error"]
    line: str | None = None
    exit_code: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class AgentUsage:
    """Token and cost figures an agent reported; `None` means unknown, never zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class AgentSpawnResult:
    """How the agent ended. `exit_code` is None when a signal killed it."""

    exit_code: int | None
    signal: str | None
    stdout: str
    stderr: str
    usage: AgentUsage = field(default_factory=AgentUsage)


EventSink = Callable[[AgentEvent], None]


class AgentRuntime(Protocol):
    """Runs exactly one agent for one request and returns how it ended."""

    async def spawn(self, request: AgentSpawnRequest, on_event: EventSink) -> AgentSpawnResult:
        """Start the agent, stream its events to `on_event`, and return its result."""
        ...


LineSink = Callable[[str], None]

# (agent, command, target, arguments) -> the prompt's command block; see AgentLauncher.delegate.
Delegate = Callable[[str, CommandId, str, Sequence[str]], str]


@dataclass(frozen=True)
class AgentLaunch:
    """What the engine asks for one step: the stage's agent, its command, prompt and keys."""

    stage: AgentStage
    command: CommandId  # the lifecycle command the prompt delegates to
    settings: ResolvedSettings
    root: Path  # the project root on this machine; the agent's working directory
    instructions: str
    env: Mapping[str, str]  # the caller's environment; the launcher strips secrets from it
    pair_env: Mapping[str, str]  # pairbot's own keys, added after the stripping
    # Files outside `root` the agent writes (the journal `pairbot batch report` appends to): an
    # agent running as its own OS user is lent them for the step.
    writable: tuple[Path, ...] = ()


@dataclass(frozen=True)
class AgentNotStarted:
    """No agent could start (unknown agent, a command file that cannot be placed, a bad locus)."""

    reason: str


@dataclass(frozen=True)
class CommandRun:
    """A command of the project's own run from its tree — the test command, a proof-of-work —
    which executes code the agent may have written, so it runs as the agent would (isolated)."""

    command: str  # a shell command line, as the project wrote it
    cwd: Path  # the tree it runs in; lent to the agent user for the run
    env: Mapping[str, str]  # the caller's environment; every credential is stripped from it
    timeout_s: float


@dataclass(frozen=True)
class CommandResult:
    """How a `CommandRun` ended. `exit_code` is None when it was stopped (timeout, signal)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


class AgentLauncher(Protocol):
    """Everything the engine needs from the runtime for one agent step."""

    def agent_root(self, root: Path, settings: ResolvedSettings) -> str:
        """The project root as the agent sees it in `settings.locus` (its PAIR_ROOT)."""
        ...

    def delegate(
        self, agent: str, command: CommandId, target: str, arguments: Sequence[str]
    ) -> str:
        """The prompt's command block: `agent`'s invocation of `command` with its arguments."""
        ...

    async def launch(
        self, launch: AgentLaunch, on_line: LineSink
    ) -> AgentSpawnResult | AgentNotStarted:
        """Start the stage's agent, show its output on `on_line`, and return how it ended."""
        ...

    def run_command(self, run: CommandRun) -> CommandResult:
        """Run a project command from its tree under the agent's isolation (blocking)."""
        ...
