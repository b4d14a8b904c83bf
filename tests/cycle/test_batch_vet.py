"""A plain batch's steps meet the converge gate a card's do: real checkout, real tests, real agent.

The scripted agent tampers with what decides passing (an existing test, a passing check, a
dependency manifest); the step is sent back naming the file or test, the checkout and the
batch's work line go back to where the step started, and nothing of the refused work is
recorded for a PR group. A clean retry then advances. Without a test command an accepted step
says that no test gate applies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from app.cycle.batch_vet import BatchVet, batch_vetter, sendbacks_in_a_row
from app.cycle.work_line_git import GitWorkTree
from app.engine import manifest
from app.engine.batch_vet_seam import VettedWork, WorkVetRequest
from app.engine.outcome import EngineStepOutcome
from app.engine.step import EngineDeps, StepResult
from app.engine.work_line import Snapshot, work_branch
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from tests.support.card_project import CHECKS_COMMAND
from tests.support.git import git
from tests.support.project import Project, agent_env, run_until_idle

pytestmark = pytest.mark.slow

TEST_FILE = "def test_widget():\n    assert 1 + 1 == 2\n"
TESTS = {"command": CHECKS_COMMAND, "junit": ".pair/junit.xml"}


def _project(make_project: Callable[..., Project], apply: list[str], tests: bool = True) -> Project:
    config: dict[str, Any] = {"tests": TESTS} if tests else {}
    project = make_project(config=config, script={"apply": apply})
    files = {
        "tests/test_widget.py": TEST_FILE,
        "checks/baseline.check": "README.md contains project\n",
        "README.md": "# project\n",
        ".gitignore": ".pair/script*.json\n.pair/agent-log.jsonl\n.pair/junit.xml\n",
    }
    for name, text in files.items():
        (project.root / name).parent.mkdir(parents=True, exist_ok=True)
        (project.root / name).write_text(text)
    git(project.root, "add", "-A")
    git(project.root, "commit", "-q", "-m", "tests")
    return project


def _deps(project: Project) -> EngineDeps:
    work = GitWorkTree(project.root)
    return EngineDeps(
        launcher=Launcher(lambda _s: ProcessRuntime()),
        env=agent_env(),
        work=work,
        work_vet=batch_vetter(work),
    )


def _step(project: Project, deps: EngineDeps) -> StepResult:
    return run_until_idle(project, deps, limit=1)[-1]


def _work_entries(project: Project) -> list[dict[str, Any]]:
    return [r["data"] for r in project.journal() if r.get("kind") == "work"]


@pytest.mark.parametrize(
    ("behaviour", "named"),
    [
        pytest.param("edit-test", "tests/test_widget.py", id="edited-test"),
        pytest.param("delete-check", "checks::baseline (missing from the run)", id="deleted-test"),
        pytest.param("skip-check", "(skipped)", id="skipped-test"),
        pytest.param("edit-manifest", "package.json", id="edited-manifest"),
    ],
)
def test_a_batch_step_that_tampers_with_the_tests_is_sent_back(
    make_project: Callable[..., Project], behaviour: str, named: str
) -> None:
    project = _project(make_project, [behaviour, "ok"])
    deps = _deps(project)
    assert _step(project, deps).transition == "propose"
    tip = git(project.root, "rev-parse", work_branch(project.batch))

    refused = _step(project, deps)

    assert (refused.state, refused.transition) == ("sent-back", "apply"), refused
    assert named in (refused.message or "")
    # The checkout is back where the step started: no work of the refused step is left in it.
    assert (project.root / "tests" / "test_widget.py").read_text() == TEST_FILE
    assert (project.root / "checks" / "baseline.check").is_file()
    assert not (project.root / "alpha.txt").exists()
    assert not (project.root / "package.json").exists()
    assert "- [ ]" in (project.root / ".pair/changes/alpha/plan.md").read_text()
    assert git(project.root, "rev-parse", work_branch(project.batch)) == tip
    assert [w["transition"] for w in _work_entries(project)] == ["baseline", "propose"]

    again = _step(project, deps)

    assert (again.state, again.transition) == ("advanced", "apply"), again
    assert [w["transition"] for w in _work_entries(project)] == ["baseline", "propose", "apply"]
    assert _work_entries(project)[-1]["files"] == [".pair/changes/alpha/plan.md", "alpha.txt"]


def test_three_refusals_in_a_row_block_the_batch(make_project: Callable[..., Project]) -> None:
    project = _project(make_project, ["edit-test"] * 3)
    deps = _deps(project)
    states = [_step(project, deps).state for _ in range(3)]
    assert states == ["advanced", "sent-back", "sent-back"]
    blocked = _step(project, deps)
    assert blocked.state == "blocked", blocked
    assert "refused 3 times in a row" in (blocked.blocker or "")
    assert "pairbot batch retry demo --change alpha" in (blocked.blocker or "")


def test_without_a_test_command_a_batch_step_says_no_gate_applies(
    make_project: Callable[..., Project],
) -> None:
    project = _project(make_project, ["ok"], tests=False)
    results = run_until_idle(project, _deps(project), limit=2)
    assert [r.transition for r in results] == ["propose", "apply"]
    assert results[-1].state == "advanced"
    assert (results[-1].message or "").startswith("no test gate applies")
    assert "`pytest` (Python files under tests/)" in (results[-1].message or "")


def test_sendbacks_are_counted_back_to_the_last_other_outcome() -> None:
    def outcome(state: str, key: str = "a") -> dict[str, Any]:
        return {"kind": "outcome", "key": key, "state": state}

    records = [
        outcome("sent-back"),
        outcome("advanced"),
        outcome("sent-back"),
        outcome("advanced", key="b"),
        {"kind": "progress", "key": "a"},
        outcome("sent-back"),
    ]
    assert sendbacks_in_a_row(records, "a") == 2
    assert sendbacks_in_a_row(records, "b") == 0


def _vet_verify_red(project: Project, snap: Snapshot) -> VettedWork:
    """The plain batch's vet of a `verify-red` step whose work is `snap`."""
    request = WorkVetRequest(
        root=project.root,
        batch=project.batch,
        change="alpha",
        transition="verify-red",
        tests=manifest.TestsConfig(),
        journal=project.root / ".pair" / "journal.jsonl",
        branch="main",
        env=agent_env(),
        launcher=Launcher(lambda _s: ProcessRuntime()),
    )
    vet = BatchVet(request, GitWorkTree(project.root))
    outcome = EngineStepOutcome(state="advanced", message="contract accepted")
    return asyncio.run(vet.vet(outcome, snap))


def test_a_red_verifier_that_changed_a_file_is_sent_back(
    make_project: Callable[..., Project],
) -> None:
    project = _project(make_project, ["ok"], tests=False)
    start = git(project.root, "rev-parse", "HEAD")
    (project.root / "tests" / "test_widget.py").write_text(TEST_FILE + "# loosened\n")
    git(project.root, "commit", "-q", "-am", "verifier edit")
    edited = git(project.root, "rev-parse", "HEAD")

    vetted = _vet_verify_red(project, Snapshot(edited, start, ("tests/test_widget.py",)))

    assert not vetted.keep and vetted.outcome.state == "sent-back", vetted
    assert "must not change the tree; it changed tests/test_widget.py" in vetted.outcome.message
    assert (project.root / "tests" / "test_widget.py").read_text() == TEST_FILE

    untouched = _vet_verify_red(project, Snapshot(start, start, ()))
    assert untouched.keep and untouched.outcome.state == "advanced"
