"""Failover through the real engine and process runtime: a step that failed on a recognised
quota, auth or crash signature runs once more with the fallback agent; one that failed on its
merits does not. The first agent is the real `claude` adapter over the scripted agent installed
as the `claude` binary; the fallback is the `command` adapter running the same scripted agent."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from tests.support.project import AGENT, Project, apply_once


def fake_claude(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds the scripted agent as `claude`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{AGENT}" "$@"\n')
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def failovers(project: Project) -> list[dict[str, object]]:
    return [dict(e["data"]) for e in project.journal() if e["kind"] == "failover"]


def test_a_quota_failure_of_the_first_agent_is_retried_once_with_the_second(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        config={"batch": {"agent": ["claude", "command"]}}, script={"propose": ["quota", "ok"]}
    )
    result = apply_once(project, env=fake_claude(tmp_path))
    assert (result.state, result.transition) == ("advanced", "propose")
    first, second = project.agent_calls()
    assert "stream-json" in first["argv"]  # claude's argv
    assert "stream-json" not in second["argv"]  # the command adapter's
    # Every CLI gets the command's text inline, so the fallback's instructions are the step's own.
    assert "propose agent for change `alpha`" in second["instructions"]
    assert failovers(project) == [
        {"failed": "claude", "signature": "quota", "next": "command", "exitCode": 1, "signal": None}
    ]
    outcomes = [e for e in project.journal() if e["kind"] == "outcome"]
    assert [o["state"] for o in outcomes] == ["failed", "advanced"]
    assert outcomes[0]["message"].startswith(
        "propose: claude failed (quota); retried once with command: Credit balance is too low"
    )
    # The failed attempt's usage (claude's stream reported it) is kept: it was spent.
    assert outcomes[0]["usage"]["inputTokens"] == 1200
    assert outcomes[0]["session"] != outcomes[1]["session"]


def test_a_failure_on_its_merits_is_never_retried_with_another_agent(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        config={"batch": {"agent": ["command", "claude"]}}, script={"propose": ["crash", "ok"]}
    )
    result = apply_once(project, env=fake_claude(tmp_path))
    assert result.state == "blocked"
    assert len(project.agent_calls()) == 1
    assert failovers(project) == []


def test_a_blocker_is_not_retried_either(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        config={"batch": {"agent": ["command", "claude"]}}, script={"propose": ["block", "ok"]}
    )
    assert apply_once(project, env=fake_claude(tmp_path)).state == "blocked"
    assert len(project.agent_calls()) == 1


def test_an_agent_killed_by_a_signal_fails_over(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        config={"batch": {"agent": {"propose": ["command", "claude"]}}},
        script={"propose": ["killed", "ok"]},
    )
    result = apply_once(project, env=fake_claude(tmp_path))
    assert (result.state, result.transition) == ("advanced", "propose")
    [event] = failovers(project)
    assert (event["failed"], event["signature"], event["next"]) == ("command", "crash", "claude")
    assert event["signal"] == "SIGKILL"


def test_the_fallback_is_tried_once_only(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        config={"batch": {"agent": ["command", "claude"]}},
        script={"propose": ["killed", "quota", "ok"]},
    )
    result = apply_once(project, env=fake_claude(tmp_path))
    assert result.state == "blocked"
    assert len(project.agent_calls()) == 2
    assert len(failovers(project)) == 1


def test_without_a_fallback_a_quota_failure_just_blocks(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(config={"batch": {"agent": "claude"}}, script={"propose": ["quota"]})
    assert apply_once(project, env=fake_claude(tmp_path)).state == "blocked"
    assert failovers(project) == []


def test_an_agent_that_could_not_start_is_not_failed_over(
    make_project: Callable[..., Project],
) -> None:
    # An unknown agent is a setting to fix, not a quota: the step blocks and says so.
    project = make_project(config={"batch": {"agent": ["robot", "command"]}})
    result = apply_once(project)
    assert result.state == "blocked"
    assert "unknown agent 'robot'" in (result.blocker or "")
    assert project.agent_calls() == []
    assert failovers(project) == []
