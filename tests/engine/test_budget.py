"""Budgets that stop, through the real engine: an accepted step that takes a change (or its
batch) over `budget:` parks it `awaiting-human` with the figures; an approval continues with a
fresh budget; unknown usage is reported as unknown, never as zero."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path

from tests.support.project import AGENT_COMMAND, Project, apply_once, cli


def parks(project: Project) -> dict[str, dict[str, str]]:
    state = project.run_dir / "state.json"
    return json.loads(state.read_text())["parks"] if state.exists() else {}


def test_a_budget_of_one_step_parks_after_the_first_accepted_step(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(config={"budget": {"steps": 1, "tokens": 100}})
    result = apply_once(project)
    assert (result.state, result.transition) == ("awaiting-approval", "propose")
    reason = result.message or ""
    # The scripted `command` agent reports no usage: its tokens are unknown, never 0.
    assert "budget: 1/1 steps, unknown/100 tokens; usage unknown for 1 of 1 step" in reason
    assert "card budget spent (steps)" in reason
    assert parks(project)["alpha"]["state"] == "awaiting-human"
    # Nothing runs while it is parked.
    assert apply_once(project).state == "awaiting-approval"
    assert len(project.agent_calls()) == 1


def test_an_approval_continues_past_the_budget_with_a_fresh_one(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(config={"budget": {"steps": 1}})
    apply_once(project)
    done = cli("batch", "approve", project.batch, "--change", "alpha", cwd=project.root)
    assert done.returncode == 0, done.stderr
    approval = [e for e in project.journal() if e["kind"] == "approval"][-1]
    assert approval["data"] == {"budget": True}
    result = apply_once(project)
    assert (result.state, result.transition) == ("awaiting-approval", "apply")
    assert "1/1 steps" in (result.message or "")  # counted afresh from the approval
    assert len(project.agent_calls()) == 2


def test_a_batch_budget_counts_every_change(make_project: Callable[..., Project]) -> None:
    manifest = {
        "gate": "voluntary",
        "prGrouping": "off",
        "budget": {"steps": 2},
        "phases": [{"name": "only", "changes": ["alpha", "beta"]}],
    }
    project = make_project(manifest)
    first = apply_once(project)
    assert first.state == "advanced"
    second = apply_once(project)
    assert second.state == "awaiting-approval"
    assert "batch budget spent (steps) — budget: 2/2 steps" in (second.message or "")


def test_known_tokens_over_the_limit_park_and_unknown_ones_do_not(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    # The scripted agent as `claude` reports 1200 + 345 tokens and $0.0123 on its stream.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\nexec {shlex.join(AGENT_COMMAND)} "$@"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    project = make_project(
        config={"batch": {"agent": "claude"}, "budget": {"tokens": 1000, "costUsd": 5}}
    )
    result = apply_once(project, env=env)
    assert result.state == "awaiting-approval"
    assert "budget: 1.5k/1k tokens, $0.01 of $5.00" in (result.message or "")
    assert "unknown" not in (result.message or "")


def test_a_failed_step_never_parks_on_budget(make_project: Callable[..., Project]) -> None:
    project = make_project(config={"budget": {"steps": 1}}, script={"propose": ["block"]})
    result = apply_once(project)
    assert result.state == "blocked"
    assert parks(project)["alpha"]["state"] == "blocked"


def test_a_zero_or_negative_budget_is_refused_in_one_line(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(config={"budget": {"steps": 0}})
    done = cli("batch", "apply", project.batch, cwd=project.root)
    assert done.returncode != 0
    assert "budget.steps: Input should be greater than 0 (got 0)" in done.stderr
    assert "Traceback" not in done.stderr
    assert project.agent_calls() == []


def test_a_budget_park_replaces_a_gates_and_one_approval_clears_both(
    make_project: Callable[..., Project],
) -> None:
    manifest = {
        "gate": "after-propose",
        "prGrouping": "off",
        "phases": [{"name": "only", "changes": ["alpha"]}],
    }
    project = make_project(manifest, config={"budget": {"steps": 1}})
    result = apply_once(project)
    assert result.state == "awaiting-approval"
    assert "budget: 1/1 steps" in (result.message or "")
    assert parks(project)["alpha"]["state"] == "awaiting-human"
    done = cli("batch", "approve", project.batch, "--change", "alpha", cwd=project.root)
    assert done.returncode == 0, done.stderr
    assert apply_once(project).transition == "apply"
