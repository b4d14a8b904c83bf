"""Every argv pairbot builds gets past the real CLI's argument parsing (pinned versions).

For each agent and posture the adapter's argv (with a model named, so the model flag is covered
too) is run against the real CLI installed by `python3 dev.py test`, offline (see real_cli.py):
the CLI must reach the point where it needs the model, shown by its own message, and print no
argument-parsing error. A CLI that is not installed skips its tests with one line.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from app.runtime.adapters import AGENT_BINARIES, resolve_argv
from app.settings import (
    POSTURES,
    AgentSpecModel,
    BatchSettings,
    PermissionsSettings,
    Posture,
    resolve_settings,
)
from tests.agents.real_cli import (
    EXPECTATIONS,
    installed,
    prepare,
    refused_port,
    run_cli,
)

MODELS = {
    "claude": "sonnet",
    "codex": "gpt-5",
    "gemini": "gemini-2.5-pro",
    "opencode": "loopback/m1",
}
TESTED = sorted(EXPECTATIONS)


def _binary(agent: str) -> Path:
    path = installed(AGENT_BINARIES[agent])
    if path is None:
        pytest.skip(f"{agent} CLI not installed (python3 dev.py test installs it with npm)")
    return path


@pytest.mark.parametrize("posture", POSTURES)
@pytest.mark.parametrize("agent", TESTED)
def test_argv_passes_the_real_cli(agent: str, posture: Posture) -> None:
    binary = _binary(agent)
    with tempfile.TemporaryDirectory(prefix="pairbot-argv-") as tmp, refused_port() as port:
        env, repo = prepare(Path(tmp), agent, port)
        settings = resolve_settings(
            env={},
            manifest=None,
            project=BatchSettings(
                agent=AgentSpecModel(name=agent, model=MODELS[agent]),
                permissions=PermissionsSettings(posture=posture),
            ),
        )
        argv = resolve_argv(settings.agent_for("apply"), settings, repo_root=str(repo))
        extra = ["--print-logs", "--log-level", "WARN"] if agent == "opencode" else []
        run = run_cli(agent, [str(binary), *argv.args, *extra], cwd=repo, env=env)
    tail = run.output[-2000:]
    assert not run.rejected, f"{agent} rejected {argv.args}:\n{tail}"
    assert run.reached, f"{agent} never reached the model (exit {run.exit_code}):\n{tail}"


@pytest.mark.parametrize("agent", TESTED)
def test_a_bad_flag_is_caught(agent: str) -> None:
    # The rejection patterns are real: each CLI's own parsing error for an unknown flag.
    binary = _binary(agent)
    with tempfile.TemporaryDirectory(prefix="pairbot-argv-") as tmp, refused_port() as port:
        env, repo = prepare(Path(tmp), agent, port)
        base = {"claude": ["-p"], "codex": ["exec", "-"], "gemini": [], "opencode": ["run"]}
        run = run_cli(
            agent,
            [str(binary), *base[agent], "--no-such-flag"],
            cwd=repo,
            env=env,
        )
    assert run.rejected and not run.reached, run.output[-2000:]
