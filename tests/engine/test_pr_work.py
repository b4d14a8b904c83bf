"""PR groups carry their own changes' work: real git checkouts, the local forge, the scripted agent.

Each change step snapshots the checkout on the batch's work line; the PR step builds each
group's branch from those snapshots on its stacked base, pushes it and opens the PR. The diff
of every PR (`git diff base...head` on the forge) is checked against exactly its changes' files.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.cycle.pr_opener import HostPrOpener
from app.cycle.work_line_git import GitWorkTree
from app.engine.runner import apply_batch
from app.engine.step import EngineDeps, PrRequest
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from hosts.local import LocalForge
from tests.support.git import git
from tests.support.project import Project, agent_env, run_until_idle


class Crash(BaseException):
    """A process dying mid-step: nothing after it runs, not even the step's own `except`."""


class CrashingOpener:
    """The real opener, but the process dies once: before the PR opens, or right after it."""

    def __init__(self, inner: HostPrOpener, when: str) -> None:
        self.inner, self.when, self.crashed = inner, when, False

    async def open_pr(self, request: PrRequest) -> str:
        if not self.crashed and self.when == "before-open":
            self.crashed = True
            raise Crash
        ref = await self.inner.open_pr(request)
        if not self.crashed and self.when == "after-open":
            self.crashed = True
            raise Crash
        return ref


def files_of(change: str) -> list[str]:
    """What the scripted agent writes for a change: its plan (propose) and its file (apply)."""
    return sorted([f".pair/changes/{change}/plan.md", f"{change}.txt"])


def pulls(forge: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in (forge / "pulls").glob("*.json")]
    return sorted(found, key=lambda pull: int(pull["number"]))


def pr_files(forge: LocalForge, pull: dict[str, Any]) -> list[str]:
    spec = f"{pull['base_branch']}...{pull['head_branch']}"
    return sorted(git(forge.repo, "diff", "--name-only", spec).splitlines())


def commits_of(forge: LocalForge, pull: dict[str, Any]) -> int:
    spec = f"{pull['base_branch']}..{pull['head_branch']}"
    return int(git(forge.repo, "rev-list", "--count", spec))


def deps_for(project: Project, forge: Path, scratch: Path, opener: Any = None) -> EngineDeps:
    host = LocalForge(forge).host()
    scratch.mkdir(exist_ok=True)
    return EngineDeps(
        launcher=Launcher(lambda _s: ProcessRuntime()),
        # The scripted agent's own files (call log, counters, findings) stay out of the checkout.
        env=agent_env({"PAIR_TEST_AGENT_DIR": str(scratch)}),
        pr_opener=opener or HostPrOpener(lambda: host, project.root),
        work=GitWorkTree(project.root),
    )


def two_changes(grouping: str) -> dict[str, Any]:
    return {
        "prGrouping": grouping,
        "baseBranch": "main",
        "phases": [{"name": "one", "changes": ["a", "b"]}],
    }


def test_per_change_prs_carry_exactly_their_change(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(two_changes("per-change"))
    forge = tmp_path / "forge"
    results = run_until_idle(project, deps_for(project, forge, tmp_path / "scratch"))
    assert results[-1].state == "nothing-ready", results[-1]
    opened = pulls(forge)
    assert [(p["head_branch"], p["base_branch"]) for p in opened] == [
        ("pair/demo/a", "main"),
        ("pair/demo/b", "pair/demo/a"),
    ]
    local = LocalForge(forge)
    assert [pr_files(local, p) for p in opened] == [files_of("a"), files_of("b")]
    assert [commits_of(local, p) for p in opened] == [1, 1]
    # The checkout itself was never moved: still on main, its work still in the working tree.
    assert git(project.root, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (project.root / "a.txt").exists()
    assert (project.root / "b.txt").exists()


def test_whole_batch_opens_one_pr_with_both_changes(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(two_changes("whole-batch"))
    forge = tmp_path / "forge"
    run_until_idle(project, deps_for(project, forge, tmp_path / "scratch"))
    opened = pulls(forge)
    assert [(p["head_branch"], p["base_branch"]) for p in opened] == [("pair/demo", "main")]
    local = LocalForge(forge)
    assert pr_files(local, opened[0]) == sorted(files_of("a") + files_of("b"))
    assert commits_of(local, opened[0]) == 2  # one commit per change


@pytest.mark.parametrize("when", ["before-open", "after-open"])
def test_a_crash_in_the_pr_step_resumes_without_duplicates(
    make_project: Callable[..., Project], tmp_path: Path, when: str
) -> None:
    project = make_project(two_changes("per-change"))
    forge = tmp_path / "forge"
    host = LocalForge(forge).host()
    opener = CrashingOpener(HostPrOpener(lambda: host, project.root), when)
    deps = deps_for(project, forge, tmp_path / "scratch", opener)
    with pytest.raises(Crash):
        run_until_idle(project, deps)
    # The crash left the PR step started but not done: `step-started` with no outcome.
    last = project.journal()[-1]
    assert (last["kind"], last["key"]) == ("step-started", "pr:demo:a")
    built = git(project.root, "rev-parse", "pair/demo/a")  # built before the crash
    # A real crash leaves its lock behind; its owner (this process) is alive, so clear it.
    (project.run_dir / "step.lock").unlink(missing_ok=True)
    results = run_until_idle(project, deps)
    assert results[-1].state == "nothing-ready"
    opened = pulls(forge)
    assert [p["head_branch"] for p in opened] == ["pair/demo/a", "pair/demo/b"]
    local = LocalForge(forge)
    assert [pr_files(local, p) for p in opened] == [files_of("a"), files_of("b")]
    assert [commits_of(local, p) for p in opened] == [1, 1]
    # The re-run rebuilt the group branch into the very same commit: nothing was duplicated.
    assert local.branch_sha("pair/demo/a") == built


def test_each_snapshot_is_journaled_for_its_change(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(two_changes("per-change"))
    run_until_idle(project, deps_for(project, tmp_path / "forge", tmp_path / "scratch"))
    work = [e["data"] for e in project.journal() if e["kind"] == "work"]
    assert work[0]["change"] is None  # the baseline: before any step, nobody's work
    assert work[0]["transition"] == "baseline"
    by_change = {
        change: sorted({f for w in work if w["change"] == change for f in w["files"]})
        for change in ("a", "b")
    }
    assert by_change == {"a": files_of("a"), "b": files_of("b")}
    # No run-state ever lands in the work.
    assert not any(f.startswith(".pair/batches/") for w in work for f in w["files"])


def test_a_fresh_checkout_resumes_the_pushed_work(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    """The Action: each step runs on a fresh runner; the pushed work line carries the work."""
    project = make_project(two_changes("whole-batch"))
    forge_dir = tmp_path / "forge"
    forge = LocalForge(forge_dir)
    host = forge.host()
    git(project.root, "push", "--quiet", str(forge.repo), "main")

    async def push(branch: str) -> str:
        return await host.push_branch(project.root, branch, force=True)

    deps = deps_for(project, forge_dir, tmp_path / "scratch")
    deps.work = GitWorkTree(project.root, remote=str(forge.repo), push=push)
    first = asyncio.run(apply_batch(project.root, project.batch, deps))
    assert (first.transition, first.state) == ("propose", "advanced")
    assert forge.branch_sha("pair-work/demo") is not None  # pushed before the step ended

    # A new runner: a fresh clone of main with only the run-state carried over.
    runner = tmp_path / "runner"
    git(tmp_path, "clone", "--quiet", str(forge.repo), str(runner))
    run_state = project.root / ".pair" / "batches" / "demo" / "run"
    target = runner / ".pair" / "batches" / "demo" / "run"
    target.mkdir(parents=True)
    for name in ("journal.jsonl", "state.json"):
        if (run_state / name).exists():
            (target / name).write_bytes((run_state / name).read_bytes())
    fresh = Project(root=runner, batch="demo")
    assert not (runner / ".pair" / "changes" / "a" / "plan.md").exists()

    async def push_fresh(branch: str) -> str:
        return await host.push_branch(runner, branch, force=True)

    deps.work = GitWorkTree(runner, remote=str(forge.repo), push=push_fresh)
    deps.pr_opener = HostPrOpener(lambda: host, runner)
    second = asyncio.run(apply_batch(runner, "demo", deps))
    assert (second.transition, second.state) == ("apply", "advanced")  # the plan was restored
    run_until_idle(fresh, deps)
    opened = pulls(forge_dir)
    assert pr_files(forge, opened[0]) == sorted(files_of("a") + files_of("b"))
