"""Agent adapters: how to start each coding agent, from one registry of binaries (docs/runtime.md).

Each adapter turns (agent choice, settings, repo root) into argv; instructions always go on
stdin. The binary names live only in `AGENT_BINARIES`, which `pairbot doctor` reads too, so the
two cannot drift; the CLI versions the argv was checked against are in
`app.runtime.supported`. `command` runs any configured argv (`agentCommand`): the way to plug
in an in-house agent, and what the tests use to drive a scripted agent.

The argv is, in this order: the binary, the adapter's base args, `--model <id>` when the stage
names a model (all five agents spell it `--model`), then the permission flags from
`app.runtime.permissions.resolve_permission_flags` (posture flags, then the agent's `raw` entry).
`command` is `agentCommand` as written plus its own `raw` entry; it takes no model flag.

Base args, each from the pinned CLI's own `--help`:

    claude    -p --output-format stream-json --verbose --include-partial-messages
    codex     exec --json -c allow_login_shell=false -
              (`-`: read the prompt from stdin; `allow_login_shell=false`: its shell tool runs
              `bash -c`, not `bash -lc`, whose /etc/profile would reset PATH on Debian. The key
              is codex's own config (`allow_login_shell`, applied by `get_command` in
              codex-rs/core/src/tools/handlers/unified_exec.rs of openai/codex; with it off,
              a tool call that omits `login` gets a plain shell and one that asks for a login
              shell is refused)
    gemini    --output-format stream-json --skip-trust --prompt ""
              (`--prompt` takes a value, appended to stdin; `--skip-trust` because gemini
              otherwise forces its approval mode back to `default` in a folder it was never
              told to trust, and pairbot only runs agents in the project it drives)
    cursor    -p --output-format stream-json --trust   (Cursor's headless docs; untested)
    opencode  run --format json

Every named agent now emits one JSON event per line, rendered by `app.runtime.streamjson`.

`hidden_env` names variables an agent must not see: gemini is not given `GITHUB_SHA` or
`SURFACE`, which would make it strip pairbot's `PAIR_*` keys from its shell commands.

`cursor` runs `cursor-agent`. Cursor's docs now call the CLI `agent`
(https://cursor.com/docs/cli/overview), but its installer links both `agent` and `cursor-agent`
to the same executable (see https://github.com/get-bb/bb/pull/1232); the namespaced name cannot
collide with another tool's generic `agent` earlier on PATH.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.errors import UserError
from app.runtime.permissions import resolve_permission_flags
from app.settings import AgentChoice, ResolvedSettings

AGENT_BINARIES: Mapping[str, str] = {
    "claude": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "cursor": "cursor-agent",
    "opencode": "opencode",
}


@dataclass(frozen=True)
class Adapter:
    """One agent's base argv and whether its stdout is stream-json."""

    name: str
    base_args: tuple[str, ...]
    emits_stream_json: bool
    model_flag: str | None = "--model"
    # Variables of pairbot's environment this agent must not see (the launcher drops them).
    hidden_env: tuple[str, ...] = ()


ADAPTERS: Mapping[str, Adapter] = {
    "claude": Adapter(
        "claude",
        ("-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"),
        emits_stream_json=True,
    ),
    "codex": Adapter(
        "codex", ("exec", "--json", "-c", "allow_login_shell=false", "-"), emits_stream_json=True
    ),
    "gemini": Adapter(
        "gemini",
        ("--output-format", "stream-json", "--skip-trust", "--prompt", ""),
        emits_stream_json=True,
        # In a GitHub Actions job (GITHUB_SHA set, or SURFACE=Github) gemini strips every
        # variable but PATH, HOME and a few more from its shell commands (`sanitizeEnvironment`,
        # strict mode), PAIR_* with them: `pairbot batch report` would not know its step.
        # pairbot already took the job's secrets out of the agent's environment.
        hidden_env=("GITHUB_SHA", "SURFACE"),
    ),
    "cursor": Adapter(
        "cursor", ("-p", "--output-format", "stream-json", "--trust"), emits_stream_json=True
    ),
    "opencode": Adapter("opencode", ("run", "--format", "json"), emits_stream_json=True),
    "command": Adapter("command", (), emits_stream_json=False, model_flag=None),
}


class UnknownAgentError(UserError):
    """The configured agent has no adapter; raised before anything spawns."""


@dataclass(frozen=True)
class AgentArgv:
    """The resolved command line for one spawn."""

    command: str
    args: tuple[str, ...]
    adapter: Adapter


def resolve_argv(
    choice: AgentChoice, settings: ResolvedSettings, repo_root: str = ".", pairbot: str = "pairbot"
) -> AgentArgv:
    """Build the argv for `choice`; UnknownAgentError names the adapters that exist.

    `repo_root` is the checkout the agent works in, as the agent sees it (claude's sandboxed
    posture passes it to `--add-dir`). The default `.` is the agent's working directory, which
    the engine sets to the repo root; callers should pass the root explicitly. `pairbot` is
    how the agent runs pairbot (its PAIRBOT): claude's bounded postures allow its report.
    """
    adapter = ADAPTERS.get(choice.name)
    if adapter is None:
        raise UnknownAgentError(
            f"unknown agent {choice.name!r}; available agents: {', '.join(sorted(ADAPTERS))}"
        )
    permission_flags = resolve_permission_flags(
        adapter.name, settings.permissions, repo_root, pairbot
    )
    if adapter.name == "command":
        if not settings.agent_command:
            raise UnknownAgentError(
                "agent 'command' needs `agentCommand` (a list, e.g. [python, my_agent.py]) in "
                ".pair/config.yaml `batch:` or the batch manifest's `settings:`"
            )
        command, *rest = settings.agent_command
        return AgentArgv(command=command, args=(*rest, *permission_flags), adapter=adapter)
    args = list(adapter.base_args)
    if choice.model and adapter.model_flag:
        args += [adapter.model_flag, choice.model]
    args += permission_flags
    return AgentArgv(command=AGENT_BINARIES[adapter.name], args=tuple(args), adapter=adapter)
