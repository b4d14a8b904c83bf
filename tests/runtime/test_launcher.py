"""The launcher behind the engine's seam, driven directly with real runtimes (no fakes needed).

The end-to-end engine tests drive it through `apply_batch`; these pin what only it decides:
where each locus puts the project root, a refusal before anything starts, a named agent
started on the remote locus with no command file, the permission
warning once per launcher, and usage read from a stream-json agent's own stream.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from app.engine.agent import AgentLaunch, AgentNotStarted, AgentRuntime, AgentSpawnResult
from app.runtime import rex
from app.runtime.launcher import DOCKER_WORKDIR, Launcher
from app.runtime.process import ProcessRuntime
from app.settings import (
    AgentSpecModel,
    BatchSettings,
    Locus,
    PermissionsSettings,
    RemoteSettings,
    ResolvedSettings,
    resolve_settings,
)

ROOT = Path("/home/me/proj")


def settings(
    agent: str = "command",
    *,
    locus: Locus = "local",
    workdir: str | None = None,
    agent_command: list[str] | None = None,
    posture: str = "full-autonomy",
) -> ResolvedSettings:
    return resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings.model_validate(
            {
                "agent": AgentSpecModel(name=agent),
                "agentCommand": agent_command or [sys.executable, "-c", "pass"],
                "locus": locus,
                "remote": RemoteSettings(host="127.0.0.1", port=9, workdir=workdir)
                if locus == "remote"
                else None,
                "permissions": PermissionsSettings.model_validate({"posture": posture}),
            }
        ),
    )


def launch(
    resolved: ResolvedSettings, root: Path = ROOT, path: str = "/usr/bin:/bin"
) -> AgentLaunch:
    return AgentLaunch(
        stage="apply",
        command="apply",
        settings=resolved,
        root=root,
        instructions="do it\n",
        env={"PATH": path, "GITHUB_TOKEN": "ghs_x"},
        pair_env={"PAIR_CHANGE": "alpha"},
    )


def never(_settings: ResolvedSettings) -> AgentRuntime:
    raise AssertionError("no runtime may be built for a launch that cannot start")


def test_the_docker_workdir_is_the_one_rex_mounts() -> None:
    assert DOCKER_WORKDIR == rex.DOCKER_WORKDIR


@pytest.mark.parametrize(
    ("locus", "workdir", "expected"),
    [
        pytest.param("local", None, str(ROOT), id="local"),
        pytest.param("docker", None, DOCKER_WORKDIR, id="docker"),
        pytest.param("remote", None, str(ROOT), id="remote-same-path"),
        pytest.param("remote", "/srv/proj", "/srv/proj", id="remote-workdir"),
    ],
)
def test_agent_root_is_where_the_locus_puts_the_project(
    locus: Locus, workdir: str | None, expected: str
) -> None:
    assert Launcher(never).agent_root(ROOT, settings(locus=locus, workdir=workdir)) == expected


def test_an_unknown_agent_is_not_started_and_builds_no_runtime() -> None:
    lines: list[str] = []
    result = asyncio.run(Launcher(never).launch(launch(settings("robot")), lines.append))
    assert isinstance(result, AgentNotStarted)
    assert "unknown agent 'robot'" in result.reason
    assert lines == []


def test_a_named_agent_on_the_remote_locus_is_started_without_a_command_file(
    tmp_path: Path,
) -> None:
    # Was a refusal: the prompt carries the command inline, so the file (for interactive use,
    # on a disk pairbot does not control) is not needed. ProcessRuntime stands in for the
    # server here; tests/agents/test_matrix_remote.py runs a real claude on a real one.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text("#!/bin/sh\ncat >/dev/null\necho started\n")
    fake.chmod(0o755)
    request = launch(settings("claude", locus="remote"), tmp_path, f"{bin_dir}:/usr/bin:/bin")
    result = asyncio.run(Launcher(lambda _s: ProcessRuntime()).launch(request, lambda _l: None))
    assert isinstance(result, AgentSpawnResult)
    assert (result.exit_code, result.stdout.strip()) == (0, "started")
    assert not (tmp_path / ".claude").exists()


def test_the_permission_warning_is_said_once_per_launcher(tmp_path: Path) -> None:
    # cursor has no bounded argv mode: the sandboxed posture warns. PATH is an empty directory,
    # so the spawn fails fast after the warning, whatever this machine has installed.
    launcher = Launcher(lambda _s: ProcessRuntime())
    resolved = settings("cursor", posture="repo-sandboxed-permissive")
    lines: list[str] = []
    for _ in range(2):
        result = asyncio.run(
            launcher.launch(launch(resolved, tmp_path, path=str(tmp_path)), lines.append)
        )
        assert isinstance(result, AgentSpawnResult) and result.exit_code == 127
    assert sum(line.startswith("warning: cursor") for line in lines) == 1


def test_the_agent_environment_is_stripped_then_given_pairbots_keys(tmp_path: Path) -> None:
    dump = "import json, os, sys; json.dump(dict(os.environ), sys.stdout)"
    resolved = settings(agent_command=[sys.executable, "-c", dump])
    result = asyncio.run(
        Launcher(lambda _s: ProcessRuntime()).launch(launch(resolved, tmp_path), lambda _l: None)
    )
    assert isinstance(result, AgentSpawnResult)
    assert '"PAIR_CHANGE": "alpha"' in result.stdout
    assert "GITHUB_TOKEN" not in result.stdout


def test_a_stream_json_agents_usage_comes_from_its_stream(tmp_path: Path) -> None:
    # Rendering follows the adapter, so this is claude's, with a script installed as `claude`
    # that prints one stream-json result event.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    event = (
        '{"type":"result","subtype":"success","total_cost_usd":0.5,'
        '"usage":{"input_tokens":7,"output_tokens":3}}'
    )
    fake = bin_dir / "claude"
    fake.write_text(f"#!/bin/sh\ncat >/dev/null\necho '{event}'\n")
    fake.chmod(0o755)
    request = launch(settings("claude"), tmp_path, path=f"{bin_dir}:/usr/bin:/bin")
    lines: list[str] = []
    result = asyncio.run(Launcher(lambda _s: ProcessRuntime()).launch(request, lines.append))
    assert isinstance(result, AgentSpawnResult)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 3)
    assert result.usage.cost_usd == 0.5
    assert result.stdout == event  # the transcript stays the raw stream
    assert any(line.startswith("✓") for line in lines)
