"""The seam between the engine and whatever runs an agent: request, events, result.

The engine builds an `AgentSpawnRequest`, hands it to an injected `AgentRuntime`, and reads the
`AgentSpawnResult`. Runtimes stream `AgentEvent`s to a callback while they accumulate the
result. A bootstrap or transport failure is reported as a non-zero result with the message in
`stderr`, never as a new kind of outcome, so the step stays resumable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol


@dataclass(frozen=True)
class AgentSpawnRequest:
    """Everything needed to start one agent process."""

    command: str
    args: tuple[str, ...]
    instructions: str  # delivered on stdin
    cwd: str
    env: Mapping[str, str]
    timeout_ms: int


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
