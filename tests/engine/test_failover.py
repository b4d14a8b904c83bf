"""Failover through the real engine and process runtime: a step that failed on a recognised
quota, auth or crash signature runs once more with the fallback agent; one that failed on its
merits does not. The first agent is the real `claude` adapter over the scripted agent installed
as the `claude` binary; the fallback is the `command` adapter running the same scripted agent."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path

from app.engine.outcome import SessionEvidence, map_session_to_outcome
from tests.support.project import AGENT_COMMAND, Project, apply_once

# What the real codex 0.171.0 printed on stdout (`exec --json`) when its Responses API answered
# 429 with OpenAI's `insufficient_quota` body (tests/agents/test_failover_vendors.py runs it).
CODEX_QUOTA_STDOUT = (
    '{"type":"thread.started","thread_id":"01a23fd8-ff6e-7320-9105-a4ed0bc9906a"}\n'
    '{"type":"turn.started"}\n'
    '{"type":"error","message":"Quota exceeded. Check your plan and billing details."}\n'
    '{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan and billing '
    'details."}}\n'
)
CODEX_QUOTA = "Quota exceeded. Check your plan and billing details."


def fake_codex(tmp_path: Path, stdout: str, secret: str = "") -> dict[str, str]:
    """An environment whose PATH finds, as `codex`, a script printing `stdout` and exiting 1
    (plus OPENAI_API_KEY=`secret` when given, a credential pairbot must not repeat)."""
    bin_dir = tmp_path / "codex-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "out.jsonl").write_text(stdout)
    fake = bin_dir / "codex"
    fake.write_text(f'#!/bin/sh\ncat >/dev/null\ncat "{bin_dir / "out.jsonl"}"\nexit 1\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return env | ({"OPENAI_API_KEY": secret} if secret else {})


def fake_claude(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds the scripted agent as `claude`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\nexec {shlex.join(AGENT_COMMAND)} "$@"\n')
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
        {
            "failed": "claude",
            "signature": "quota",
            "next": "command",
            "exitCode": 1,
            "signal": None,
            "reason": None,  # the scripted agent prints plain text, not claude's stream-json
        }
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


def test_codexs_quota_answer_in_its_json_stream_fails_over_and_says_why(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(
        config={"batch": {"agent": ["codex", "command"]}}, script={"propose": ["ok"]}
    )
    result = apply_once(project, env=fake_codex(tmp_path, CODEX_QUOTA_STDOUT))
    assert (result.state, result.transition) == ("advanced", "propose")
    [event] = failovers(project)
    assert (event["signature"], event["reason"]) == ("quota", CODEX_QUOTA)
    failed = next(e for e in project.journal() if e["kind"] == "outcome")
    assert failed["message"] == (
        f"propose: codex failed (quota); retried once with command: {CODEX_QUOTA}"
    )


def test_without_a_fallback_the_blocker_says_the_vendors_reason_redacted(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    secret = "loopback-key-1234567890"  # noqa: S105 - a made-up key the test must not see again
    stdout = (
        '{"type":"turn.started"}\n'
        '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: '
        f'Incorrect API key provided: {secret}."}}}}\n'
    )
    project = make_project(config={"batch": {"agent": "codex"}}, script={})
    result = apply_once(project, env=fake_codex(tmp_path, stdout, secret))
    assert result.state == "blocked"
    first_line = (result.blocker or "").splitlines()[0]
    assert first_line == (
        "Propose agent failed (exit 1) without reporting completion: unexpected status 401 "
        "Unauthorized: Incorrect API key provided: ***."
    )
    [outcome] = [e for e in project.journal() if e["kind"] == "outcome"]
    assert outcome["message"].splitlines()[0] == first_line
    assert secret not in json.dumps(project.journal())


def test_a_failed_outcome_says_the_vendors_reason_on_its_first_line() -> None:
    evidence = SessionEvidence(
        transition="apply", entries=(), exit_code=1, signal=None, stderr="log", reason=CODEX_QUOTA
    )
    outcome = map_session_to_outcome(evidence)
    assert (outcome.message.splitlines()[0], outcome.blocker) == (
        f"Apply agent failed (exit 1) without reporting completion: {CODEX_QUOTA}; stderr "
        "(last lines):",
        outcome.message,
    )
    assert outcome.detail == f"{CODEX_QUOTA}\nlog"
