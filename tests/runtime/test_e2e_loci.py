"""The engine through each real locus: swerex's local runtime and a real swerex-remote server.

The scripted agent is the same one the other end-to-end tests use; here it runs through
`select_runtime`, as `pairbot batch apply` runs it, and must advance the change the same way.
The docker locus has no engine on this machine: its pre-flight must block the step, fast.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.runner import apply_batch
from app.engine.step import EngineDeps, StepResult
from app.runtime.launcher import Launcher
from app.runtime.select import select_runtime
from tests.support.project import Project, agent_env
from tests.support.swerex_server import swerex_server


def run_steps(project: Project, limit: int = 10) -> list[StepResult]:
    lines: list[str] = []
    deps = EngineDeps(
        launcher=Launcher(lambda settings: select_runtime(settings, project.root)),
        env=agent_env(),
        on_line=lines.append,
    )
    results = []
    for _ in range(limit):
        result = asyncio.run(apply_batch(project.root, project.batch, deps))
        results.append(result)
        if result.state != "advanced":
            break
    return results


def transitions(results: list[StepResult]) -> list[tuple[str, str]]:
    return [(r.state, r.transition) for r in results]


EXPECTED = [
    ("advanced", "propose"),
    ("advanced", "apply"),
    ("advanced", "verify"),
    ("nothing-ready", ""),
]


def test_the_local_swerex_locus_advances_a_change_to_done(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(config={"batch": {"locus": "local"}})
    assert transitions(run_steps(project)) == EXPECTED


def test_a_real_swerex_remote_server_advances_a_change_to_done(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    with swerex_server(tmp_path) as server:
        config: dict[str, Any] = {
            "batch": {
                "locus": "remote",
                "remote": {"host": "127.0.0.1", "port": server.port, "authToken": server.token},
            }
        }
        project = make_project(config=config)
        assert transitions(run_steps(project)) == EXPECTED
        env_seen = set(project.agent_calls()[0]["env"])
        assert {"PAIR_BATCH", "PAIR_CHANGE", "PAIR_TRANSITION", "PAIR_ROOT"} <= env_seen


def test_a_wrong_token_blocks_the_step_and_never_shows_the_token(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    with swerex_server(tmp_path) as server:
        wrong = "not-the-token-" + server.token[:4]
        config = {
            "batch": {
                "locus": "remote",
                "remote": {"host": "127.0.0.1", "port": server.port, "authToken": wrong},
            }
        }
        project = make_project(config=config)
        result = run_steps(project)[0]
        assert (result.state, result.transition) == ("blocked", "propose")
        everything = json.dumps([r.to_json() for r in run_steps(project)])
        everything += (project.run_dir / "journal.jsonl").read_text()
        everything += (project.run_dir / "state.json").read_text()
        assert wrong not in everything and server.token not in everything
        assert project.agent_calls() == []


def test_the_docker_locus_without_an_engine_blocks_in_the_preflight(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(config={"batch": {"locus": "docker"}})
    result = run_steps(project)[0]
    assert (result.state, result.transition) == ("blocked", "propose")
    assert "docker" in (result.blocker or "").lower()
    assert project.agent_calls() == []
