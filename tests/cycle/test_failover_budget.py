"""A card's failover and budget on the `local` host, end to end: the tracking comment and the
synthesis show the step a fallback agent took over, and a card whose budget is spent parks
`awaiting-human` with the figures until a maintainer approves."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from tests.support.card_project import CardProject
from tests.support.project import AGENT_COMMAND


def owned(project: CardProject, number: int, marker: str) -> str:
    return next(c["body"] for c in project.comments(number) if marker in c["body"].splitlines()[0])


def with_fake_claude(project: CardProject, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\nexec {shlex.join(AGENT_COMMAND)} "$@"\n')
    fake.chmod(0o755)
    project.env_extra["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_a_card_whose_budget_is_spent_parks_awaiting_human_with_the_figures(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, config={"budget": {"steps": 1, "tokens": 100_000}})
    step = project.command("implement")
    assert step.result.transition == "propose"
    assert step.status == "awaiting-human"
    assert project.labels(project.card) == ["pr-state:awaiting-human"]
    tracking = owned(project, project.card, "pair:tracking")
    # The scripted `command` agent reports no usage: unknown, never zero.
    assert "budget: 1/1 steps, unknown/100k tokens; usage unknown for 1 of 1 step" in tracking
    assert "spent its budget" in tracking
    assert project.step().result.state == "awaiting-approval"  # nothing runs while parked
    resumed = project.command("approve")
    assert resumed.result.transition == "apply"
    assert resumed.status == "awaiting-human"  # a fresh budget of 1 step, spent again
    project.assert_invariants()


def test_a_card_whose_first_agent_hits_its_quota_goes_on_with_the_second(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, config={"batch": {"agent": ["claude", "command"]}})
    with_fake_claude(project, tmp_path)
    project.script({"propose": ["quota", "ok"]})
    steps = [project.command("implement"), *project.until_quiet()]
    assert steps[-1].status == "ready-for-merge"
    line = "propose: claude failed (quota); retried once with command"
    assert line in owned(project, project.card, "pair:tracking")
    pull = project.pull()
    assert pull is not None
    assert line in owned(project, pull, "pair:synthesis")
    failover = [e for e in project.journal() if e["kind"] == "failover"]
    assert [e["data"]["signature"] for e in failover] == ["quota"]
    # Each attempt's start names the agent that ran it: claude, then the fallback.
    started = [e for e in project.journal() if e["kind"] == "step-started"]
    assert [(e["transition"], e["data"]["agent"]) for e in started][:2] == [
        ("propose", "claude"),
        ("propose", "command"),
    ]
