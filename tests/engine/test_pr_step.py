"""PR steps at batch completion: whole-batch once, stacked groups in order, each exactly once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.step import EngineDeps, PrRequest, StepResult
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from hosts.local import LocalForge
from tests.support.project import Project, agent_env, cli, run_until_idle


class RecordingOpener:
    """A code host at the edge: records each PR it is asked to open; can fail on demand."""

    def __init__(self, fail_first: int = 0) -> None:
        self.requests: list[PrRequest] = []
        self.fail_first = fail_first

    async def open_pr(self, request: PrRequest) -> str:
        if self.fail_first:
            self.fail_first -= 1
            raise RuntimeError("502 from the code host")
        self.requests.append(request)
        return f"PR#{len(self.requests)}"


def run_all(project: Project, opener: RecordingOpener, limit: int = 40) -> list[StepResult]:
    deps = EngineDeps(
        launcher=Launcher(lambda _s: ProcessRuntime()), env=agent_env(), pr_opener=opener
    )
    return run_until_idle(project, deps, limit)


def manifest(grouping: str) -> dict[str, Any]:
    return {
        "prGrouping": grouping,
        "baseBranch": "main",
        "phases": [
            {"name": "one", "changes": ["a", "b"]},
            {"name": "empty-later", "changes": []},
            {"name": "two", "changes": ["c"]},
        ],
    }


def test_whole_batch_opens_one_pr_at_completion(make_project: Callable[..., Project]) -> None:
    project = make_project(
        {
            "prGrouping": "whole-batch",
            "baseBranch": "main",
            "phases": [{"name": "one", "changes": ["a"]}, {"name": "two", "changes": ["c"]}],
        }
    )
    opener = RecordingOpener()
    results = run_all(project, opener)
    assert [r.transition for r in results[-2:]] == ["pr", ""]
    assert len(opener.requests) == 1
    request = opener.requests[0]
    assert (request.base_branch, request.head_branch, request.key) == (
        "main",
        "pair/demo",
        "pr:demo",
    )
    assert request.boundary is None
    # Resumed: nothing opens twice.
    assert run_all(project, opener)[0].state == "nothing-ready"
    assert len(opener.requests) == 1


def test_per_change_groups_stack_in_order_and_retry_a_failed_open(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(
        {
            "prGrouping": "per-change",
            "baseBranch": "main",
            "phases": [{"name": "one", "changes": ["a", "b"]}, {"name": "two", "changes": ["c"]}],
        }
    )
    opener = RecordingOpener(fail_first=1)
    results = run_all(project, opener)
    failed = results[-1]
    assert (failed.state, failed.transition, failed.change) == ("blocked", "pr", "pr:demo:a")
    assert "502" in (failed.blocker or "")
    assert cli("batch", "retry", "demo", "--change", "pr:demo:a", cwd=project.root).returncode == 0
    run_all(project, opener)
    chain = [(r.base_branch, r.head_branch) for r in opener.requests]
    assert chain == [
        ("main", "pair/demo/a"),
        ("pair/demo/a", "pair/demo/b"),
        ("pair/demo/b", "pair/demo/c"),
    ]


def test_per_phase_skips_empty_phases_after_decomposition(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(manifest("per-phase"))
    opener = RecordingOpener()
    results = run_all(project, opener, limit=60)
    assert results[-1].state == "nothing-ready"
    groups = [r.boundary.group_id for r in opener.requests if r.boundary]
    assert groups == ["one", "empty-later", "two"]  # decomposed, so no longer empty
    assert opener.requests[1].base_branch == "pair/demo/one"


def test_without_a_code_host_the_pr_step_blocks_with_a_remedy(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(
        {"prGrouping": "whole-batch", "phases": [{"name": "p", "changes": ["a"]}]}
    )
    deps = EngineDeps(launcher=Launcher(lambda _s: ProcessRuntime()), env=agent_env())
    result = run_until_idle(project, deps, limit=6)[-1]
    assert (result.state, result.transition) == ("blocked", "pr")
    assert "prGrouping: off" in (result.blocker or "")


def test_the_cli_opens_pr_groups_on_the_local_forge(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        {"prGrouping": "whole-batch", "phases": [{"name": "p", "changes": ["a"]}]}
    )
    forge = tmp_path / "forge"
    env = agent_env({"PAIR_LOCAL_FORGE": str(forge)})
    states = []
    for _ in range(6):
        done = cli("batch", "apply", project.batch, "--json", cwd=project.root, env=env)
        states.append(json.loads(done.stdout)["transition"])
        if json.loads(done.stdout)["state"] != "advanced":
            break
    assert "pr" in states
    pulls = list((forge / "pulls").glob("*.json"))
    assert len(pulls) == 1
    pull = json.loads(pulls[0].read_text())
    assert (pull["head_branch"], pull["base_branch"], pull["draft"]) == (
        "pair/demo",
        "main",
        True,
    )
    assert LocalForge(forge).branch_sha("pair/demo") is not None
