"""resolve_argv: binary, base args, model flag, permission flags, raw — in that order."""

from __future__ import annotations

import pytest

from app.runtime.adapters import ADAPTERS, AGENT_BINARIES, UnknownAgentError, resolve_argv
from app.settings import (
    AgentSpecModel,
    BatchSettings,
    PermissionsSettings,
    Posture,
    ResolvedSettings,
    resolve_settings,
)

ROOT = "/work/repo"
RAW = {
    "claude": ["--max-turns", "9"],
    "codex": ["-c", "x=1"],
    "gemini": ["--debug"],
    "cursor": ["--api-key-env", "K"],
    "opencode": ["--agent", "build"],
    "command": ["--fast"],
}


def settings(
    agent: str,
    model: str | None = None,
    posture: Posture = "full-autonomy",
    agent_command: list[str] | None = None,
) -> ResolvedSettings:
    return resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings(
            agent=AgentSpecModel(name=agent, model=model),
            agent_command=agent_command,
            permissions=PermissionsSettings(posture=posture, raw=RAW),
        ),
    )


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        pytest.param(
            "claude",
            ["claude", "-p", "--output-format", "stream-json", "--verbose",
             "--include-partial-messages", "--model", "m1",
             "--permission-mode", "bypassPermissions", "--max-turns", "9"],
            id="claude",
        ),
        pytest.param(
            "codex",
            ["codex", "exec", "--json", "-c", "allow_login_shell=false", "-", "--model", "m1",
             "--dangerously-bypass-approvals-and-sandbox", "-c", "x=1"],
            id="codex",
        ),
        pytest.param(
            "gemini",
            ["gemini", "--output-format", "stream-json", "--skip-trust", "--prompt", "",
             "--model", "m1", "--approval-mode", "yolo", "--debug"],
            id="gemini",
        ),
        pytest.param(
            "cursor",
            ["cursor-agent", "-p", "--output-format", "stream-json", "--trust", "--model", "m1",
             "--force", "--api-key-env", "K"],
            id="cursor",
        ),
        pytest.param(
            "opencode",
            ["opencode", "run", "--format", "json", "--model", "m1",
             "--auto", "--agent", "build"],
            id="opencode",
        ),
    ],
)  # fmt: skip
def test_order_is_base_model_permissions_raw(agent: str, expected: list[str]) -> None:
    resolved = settings(agent, model="m1")
    argv = resolve_argv(resolved.agent_for("apply"), resolved, ROOT)
    assert [argv.command, *argv.args] == expected
    assert argv.adapter is ADAPTERS[agent]


@pytest.mark.parametrize("agent", sorted(AGENT_BINARIES))
def test_no_model_no_model_flag(agent: str) -> None:
    resolved = settings(agent)
    argv = resolve_argv(resolved.agent_for("apply"), resolved, ROOT)
    assert "--model" not in argv.args
    assert argv.args[: len(ADAPTERS[agent].base_args)] == ADAPTERS[agent].base_args


def test_claude_default_posture_gets_the_repo_root() -> None:
    resolved = settings("claude", posture="repo-sandboxed-permissive")
    argv = resolve_argv(resolved.agent_for("propose"), resolved, ROOT)
    assert argv.args[5:13] == (
        "--permission-mode",
        "acceptEdits",
        "--permission-prompts",
        "none",
        "--add-dir",
        ROOT,
        "--allowedTools",
        "Bash",
    )
    assert argv.args[-2:] == ("--max-turns", "9")


def test_repo_root_defaults_to_the_agents_working_directory() -> None:
    resolved = settings("claude", posture="repo-sandboxed-permissive")
    argv = resolve_argv(resolved.agent_for("propose"), resolved)
    assert argv.args[argv.args.index("--add-dir") + 1] == "."


@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "full-autonomy"])
def test_command_is_agent_command_plus_its_raw(posture: Posture) -> None:
    resolved = settings(
        "command", model="ignored", posture=posture, agent_command=["python3", "agent.py"]
    )
    argv = resolve_argv(resolved.agent_for("apply"), resolved, ROOT)
    assert (argv.command, argv.args) == ("python3", ("agent.py", "--fast"))
    assert not argv.adapter.emits_stream_json


def test_command_without_agent_command_is_refused() -> None:
    resolved = settings("command")
    with pytest.raises(UnknownAgentError, match="agentCommand"):
        resolve_argv(resolved.agent_for("apply"), resolved, ROOT)


def test_unknown_agent_lists_the_available_ones() -> None:
    resolved = settings("aider")
    with pytest.raises(UnknownAgentError) as caught:
        resolve_argv(resolved.agent_for("apply"), resolved, ROOT)
    assert str(caught.value) == (
        "unknown agent 'aider'; available agents: claude, codex, command, cursor, gemini, opencode"
    )


def test_one_registry() -> None:
    assert set(AGENT_BINARIES) == set(ADAPTERS) - {"command"}
    assert AGENT_BINARIES["cursor"] == "cursor-agent"
    streaming = {name for name, a in ADAPTERS.items() if a.emits_stream_json}
    assert streaming == set(AGENT_BINARIES)
