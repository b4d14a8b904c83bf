"""The docker locus's `docker info` pre-flight: no engine, no CLI, or a hung CLI fail fast.

The development machine has the Docker CLI but no engine, so the container happy path is not
exercised here (see `DockerLocus`). What is: the pre-flight runs the real CLI (or a real stand-in
program) and turns every way of not reaching an engine into an actionable message, and a
docker-locus spawn becomes a failed, resumable spawn in seconds rather than after swerex's
start-up timeout.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.engine.agent import AgentEvent, AgentSpawnRequest
from app.runtime.rex import DOCKER_WORKDIR, DockerLocus, RexError, RexRuntime, docker_preflight

FAILS_FAST_S = 20  # a loose sanity bound: "no hang", not a performance claim


def _engine_reachable() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def test_an_unreachable_engine_is_reported_with_the_fix(tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI on this machine")
    # A socket path where nothing listens: deterministic whether or not an engine runs here.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    env["DOCKER_HOST"] = f"unix://{tmp_path / 'no-engine.sock'}"
    started = time.monotonic()
    message = asyncio.run(docker_preflight(env=env))
    assert message is not None
    assert message.startswith("locus docker: no Docker engine is reachable (`docker info` failed")
    assert "Start Docker" in message and "locus: local" in message and "locus: remote" in message
    assert time.monotonic() - started < FAILS_FAST_S


def test_a_missing_docker_cli_is_reported(tmp_path: Path) -> None:
    message = asyncio.run(docker_preflight(docker=str(tmp_path / "docker")))
    assert message is not None
    assert "no Docker engine is reachable: cannot run" in message
    assert "install the Docker CLI" in message


def test_a_hung_docker_cli_is_cut_off(tmp_path: Path) -> None:
    hung = tmp_path / "docker"
    hung.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    hung.chmod(0o755)
    started = time.monotonic()
    message = asyncio.run(docker_preflight(docker=str(hung), timeout_s=0.5))
    assert message is not None
    assert "`docker info` did not answer within 0.5 s" in message
    assert time.monotonic() - started < FAILS_FAST_S


def test_a_docker_spawn_without_an_engine_is_a_fast_failed_spawn(tmp_path: Path) -> None:
    if _engine_reachable():
        pytest.skip("a Docker engine is reachable here; this test is for a machine without one")
    events: list[AgentEvent] = []
    request = AgentSpawnRequest(
        command="python3",
        args=("-c", "print(1)"),
        instructions="",
        cwd=str(tmp_path),
        env={},
        timeout_ms=30_000,
    )
    started = time.monotonic()
    result = asyncio.run(RexRuntime(DockerLocus(tmp_path)).spawn(request, events.append))
    assert (result.exit_code, result.signal, result.stdout) == (127, None, "")
    assert [e.kind for e in events] == ["error", "exit"]
    assert "no Docker engine is reachable" in result.stderr
    assert "locus: local" in result.stderr
    assert time.monotonic() - started < FAILS_FAST_S


def test_docker_paths_map_under_the_workspace_mount(tmp_path: Path) -> None:
    locus = DockerLocus(tmp_path / "proj")
    assert locus.agent_cwd(str(tmp_path / "proj")) == DOCKER_WORKDIR
    assert locus.agent_cwd(str(tmp_path / "proj" / "pkg")) == f"{DOCKER_WORKDIR}/pkg"
    with pytest.raises(RexError, match="outside the project root"):
        locus.agent_cwd(str(tmp_path / "elsewhere"))
    script = locus.agent_env({"PATH": "/host/bin", "HOME": "/root", "ROOT": str(tmp_path / "proj")})
    assert "PATH" not in script and "HOME" not in script
    assert f"export ROOT={DOCKER_WORKDIR}" in script
    # The container is the sandbox: claude's full-autonomy runs there as the container's root.
    assert "export IS_SANDBOX=1" in script
