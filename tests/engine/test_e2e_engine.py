"""End to end: real git project, real runtime, the scripted agent, one step per apply."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.engine.runner import apply_batch
from app.engine.step import EngineDeps
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from tests.support.project import AGENT_COMMAND, Project, agent_env, apply_once, cli

TWO_PHASES: dict[str, Any] = {
    "gate": "voluntary",
    "prGrouping": "off",
    "phases": [
        {
            "name": "first",
            "proofOfWork": {"run": "test -f alpha.txt && echo proven", "pass": "contains:proven"},
            "changes": ["alpha"],
        },
        {
            "name": "second",
            "proofOfWork": {"run": "echo fine", "pass": "exit 0"},
            "changes": [{"name": "beta", "dependsOn": ["alpha"]}],
        },
    ],
}


def steps(project: Project, limit: int = 30) -> list[tuple[str, str, str]]:
    out = []
    for _ in range(limit):
        result = apply_once(project)
        out.append((result.state, result.transition, result.change))
        if result.state != "advanced":
            break
    return out


def test_two_phase_batch_runs_to_done_one_step_per_apply(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(TWO_PHASES)
    assert steps(project) == [
        ("advanced", "propose", "alpha"),
        ("advanced", "apply", "alpha"),
        ("advanced", "verify", "alpha"),
        ("advanced", "proof-of-work", "first"),
        ("advanced", "propose", "beta"),
        ("advanced", "apply", "beta"),
        ("advanced", "verify", "beta"),
        ("advanced", "proof-of-work", "second"),
        ("nothing-ready", "", ""),
    ]
    status = json.loads(cli("batch", "status", "demo", "--json", cwd=project.root).stdout)
    assert status["done"] is True
    assert status["next"] is None
    assert {c["status"] for c in status["changes"].values()} == {"done"}
    calls = [(c["transition"], c["change"]) for c in project.agent_calls()]
    assert len(calls) == 6  # exactly one agent per change step


def test_blocking_review_runs_red_then_fix_then_re_review(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(script={"verify": ["findings-blocking", "ok"]})
    assert steps(project) == [
        ("advanced", "propose", "alpha"),
        ("advanced", "apply", "alpha"),
        ("advanced", "verify", "alpha"),
        ("advanced", "red", "alpha"),
        ("advanced", "verify-red", "alpha"),
        ("advanced", "fix", "alpha"),
        ("advanced", "verify", "alpha"),
        ("nothing-ready", "", ""),
    ]
    red_call = next(c for c in project.agent_calls() if c["transition"] == "red")
    assert "r1-1" in red_call["instructions"]
    # The red contract verifier is a dispatch of its own, told the findings it judges against.
    verifier = next(c for c in project.agent_calls() if c["transition"] == "verify-red")
    assert "r1-1" in verifier["instructions"] and "Change no file" in verifier["instructions"]
    second_verify = [c for c in project.agent_calls() if c["transition"] == "verify"][1]
    assert "`r2-<n>`" in second_verify["instructions"]


def test_fix_rounds_are_bounded_by_max_fix_rounds(make_project: Callable[..., Project]) -> None:
    project = make_project(
        config={"cycle": {"maxFixRounds": 1}},
        script={"verify": ["findings-blocking", "findings-blocking"]},
    )
    result = steps(project)
    assert [s[1] for s in result] == [
        "propose",
        "apply",
        "verify",
        "red",
        "verify-red",
        "fix",
        "verify",
        "",
    ]
    status = json.loads(cli("batch", "status", "demo", "--json", cwd=project.root).stdout)
    assert status["changes"]["alpha"]["status"] == "failed-fix"
    assert status["done"] is False
    assert "failed-fix" in status["why"]


def test_three_contract_refusals_in_a_row_park_the_change_and_retry_runs_red(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(
        script={"verify": ["findings-blocking", "ok"], "verify-red": ["refuse-contract"] * 3}
    )
    result = steps(project)
    assert [s[1] for s in result][3:] == ["red", "verify-red"] * 3 + ["contract"]
    assert result[-1][0] == "blocked"  # parked: nothing more runs until a person retries
    status = json.loads(cli("batch", "status", "demo", "--json", cwd=project.root).stdout)
    alpha = status["changes"]["alpha"]
    assert alpha["status"] == "blocked"
    assert "refused red's contract 3 times in a row" in json.dumps(alpha)
    retried = cli("batch", "retry", "demo", "--change", "alpha", cwd=project.root)
    assert retried.returncode == 0, retried.stderr
    assert (apply_once(project).transition, apply_once(project).transition) == (
        "red",
        "verify-red",
    )


def test_dropped_finding_fails_verification_closed(make_project: Callable[..., Project]) -> None:
    project = make_project(script={"verify": ["findings-blocking", "drop-finding"]})
    result = steps(project)
    assert result[-1][0] == "blocked"
    assert result[-1][1] == "verify"
    journal = project.journal()
    assert "r1-1" in journal[-1]["message"] and "dropped" in journal[-1]["message"]


def test_blocker_parks_and_answer_resumes_with_the_answer(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(script={"propose": ["needs-input", "ok"]})
    first = apply_once(project)
    assert first.state == "blocked"
    again = apply_once(project)  # parked: no agent runs
    assert again.state == "blocked"
    assert len(project.agent_calls()) == 1
    answered = cli("batch", "answer", "demo", "--change", "alpha", "use sqlite", cwd=project.root)
    assert answered.returncode == 0, answered.stderr
    resumed = apply_once(project)
    assert (resumed.state, resumed.transition) == ("advanced", "propose")
    assert "use sqlite" in project.agent_calls()[-1]["instructions"]


def test_unreported_work_and_lies_never_advance(make_project: Callable[..., Project]) -> None:
    project = make_project(script={"propose": ["silent", "lie"], "apply": ["lie"]})
    silent = apply_once(project)
    assert silent.state == "blocked"
    assert "without reporting completion" in (silent.blocker or "")
    assert "plan.md appeared" in (silent.blocker or "")
    cli("batch", "retry", "demo", "--change", "alpha", cwd=project.root)
    # plan.md exists now (silent did the work), so apply is next; the agent lies about it.
    lied = apply_once(project)
    assert (lied.state, lied.transition) == ("blocked", "apply")
    assert "disk disagrees" in (lied.blocker or "")


def test_crashing_agent_blocks_and_stays_resumable(make_project: Callable[..., Project]) -> None:
    project = make_project(script={"propose": ["crash"]})
    crashed = apply_once(project)
    assert crashed.state == "blocked"
    assert "exit 3" in (crashed.blocker or "")
    assert cli("batch", "retry", "demo", "--change", "alpha", cwd=project.root).returncode == 0
    assert apply_once(project).state == "advanced"


def test_hung_agent_is_killed_by_the_timeout(make_project: Callable[..., Project]) -> None:
    project = make_project(script={"propose": ["hang"]})
    result = apply_once(project, env={"PAIR_AGENT_TIMEOUT_MS": "500"})
    assert result.state == "blocked"
    assert "signal SIG" in (result.blocker or "")


def test_after_propose_gate_parks_until_approved(make_project: Callable[..., Project]) -> None:
    manifest = {
        "gate": "after-propose",
        "prGrouping": "off",
        "phases": [{"name": "only", "changes": ["alpha"]}],
    }
    project = make_project(manifest)
    parked = apply_once(project)
    assert (parked.state, parked.transition) == ("awaiting-approval", "propose")
    assert parked.approval_request == "Propose complete; awaiting approval."
    assert apply_once(project).state == "awaiting-approval"
    approved = cli("batch", "approve", "demo", "--change", "alpha", cwd=project.root)
    assert approved.returncode == 0, approved.stderr
    assert apply_once(project).transition == "apply"


def test_feedback_reruns_the_completed_step(make_project: Callable[..., Project]) -> None:
    manifest = {
        "gate": "after-propose",
        "prGrouping": "off",
        "phases": [{"name": "only", "changes": ["alpha"]}],
    }
    project = make_project(manifest)
    apply_once(project)
    fb = cli("batch", "feedback", "demo", "--change", "alpha", "split task 2", cwd=project.root)
    assert fb.returncode == 0, fb.stderr
    rerun = apply_once(project)
    assert rerun.transition == "propose"
    assert "split task 2" in project.agent_calls()[-1]["instructions"]


def test_decomposition_authors_an_empty_phase(make_project: Callable[..., Project]) -> None:
    manifest = {
        "prGrouping": "off",
        "phases": [{"name": "first", "changes": ["alpha"]}, {"name": "later", "changes": []}],
    }
    project = make_project(manifest)
    result = steps(project)
    kinds = [s[1] for s in result]
    assert kinds[:4] == ["propose", "apply", "verify", "decompose"]
    assert ("advanced", "propose", "later-a") in result
    assert result[-1] == ("nothing-ready", "", "")


def test_failing_hard_gate_proof_holds_the_next_phase_until_rerun(
    make_project: Callable[..., Project],
) -> None:
    manifest = {
        "prGrouping": "off",
        "phases": [
            {
                "name": "first",
                "changes": ["alpha"],
                "proofOfWork": {"run": "test -f proof-ok", "pass": "exit 0"},
            },
            {"name": "second", "changes": ["beta"]},
        ],
    }
    project = make_project(manifest)
    result = steps(project)
    assert result[-1] == ("blocked", "proof-of-work", "first")
    held = apply_once(project)
    assert held.state == "nothing-ready"
    assert "rerun-proof" in (held.message or "")
    (project.root / "proof-ok").write_text("")
    rerun = cli("batch", "rerun-proof", "demo", "--phase", "first", cwd=project.root)
    assert rerun.returncode == 0, rerun.stderr
    after = apply_once(project)
    assert (after.state, after.transition) == ("advanced", "proof-of-work")
    assert apply_once(project).change == "beta"
    kinds = [e["kind"] for e in project.journal()]
    assert kinds.count("proof-of-work") == 2  # the failed record stays for the audit trail
    assert "proof-of-work-invalidated" in kinds


def test_agent_environment_carries_pair_keys_and_no_forge_secrets(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    apply_once(project, env={"GITHUB_TOKEN": "ghs_secret", "ANTHROPIC_API_KEY": "k"})
    names = set(project.agent_calls()[0]["env"])
    assert {"PAIR_BATCH", "PAIR_CHANGE", "PAIR_TRANSITION", "PAIR_ROOT"} <= names
    assert "GITHUB_TOKEN" not in names
    assert "ANTHROPIC_API_KEY" in names


def test_headless_verb_forces_one_transition_in_the_change_locus(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    done = cli("propose", "alpha", "--json", cwd=project.root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "advanced"
    assert (project.root / ".pair" / "changes" / "alpha" / ".run" / "journal.jsonl").exists()
    assert not (project.run_dir / "journal.jsonl").exists()
    assert "PAIR_BATCH" not in project.agent_calls()[0]["env"]


def test_an_agent_that_cannot_start_gets_no_model_hint(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(config={"batch": {"agent": {"name": "robot", "model": "m-1"}}})
    result = apply_once(project)
    assert result.state == "blocked"
    assert "unknown agent 'robot'" in (result.blocker or "")
    assert "model id" not in (result.blocker or "")


def test_a_straggler_report_from_another_session_does_not_complete_the_step(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(script={"propose": ["foreign"]})
    result = apply_once(project)
    assert result.state == "blocked"
    assert "without reporting completion" in (result.blocker or "")
    assert any(e.get("session") == "dead-session" for e in project.journal())


def test_a_stream_json_agent_is_rendered_and_its_usage_journaled(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    # The real `claude` adapter, with the scripted agent installed as the `claude` binary.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\nexec {shlex.join(AGENT_COMMAND)} "$@"\n')
    fake.chmod(0o755)
    project = make_project(config={"batch": {"agent": "claude"}})
    lines: list[str] = []
    deps = EngineDeps(
        launcher=Launcher(lambda _s: ProcessRuntime()),
        env=agent_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}),
        on_line=lines.append,
    )
    result = asyncio.run(apply_batch(project.root, project.batch, deps))
    assert (result.state, result.transition) == ("advanced", "propose")
    call = project.agent_calls()[0]
    assert call["argv"][:5] == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]
    # The command's text travels inline; the command file is still there for interactive use.
    assert call["instructions"].split("\n\n")[1].startswith("Your task (propose):")
    assert (project.root / ".claude" / "commands" / "pair" / "propose.md").is_file()
    assert "scripted agent: ok propose alpha" in lines
    assert not any(line.startswith("{") for line in lines)  # rendered, not raw NDJSON
    outcome = project.journal()[-1]
    assert outcome["usage"] == {"inputTokens": 1200, "outputTokens": 345, "costUsd": 0.0123}


def test_a_running_steps_output_is_in_its_live_log_while_and_after_it_runs(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    import threading
    import time

    from app.engine.livelog import read_tail

    project = make_project(script={"propose": ["held", "ok"]})
    release = tmp_path / "release"
    done: list[Any] = []
    step = threading.Thread(
        target=lambda: done.append(apply_once(project, env={"PAIR_TEST_RELEASE": str(release)}))
    )
    step.start()
    try:
        deadline = time.monotonic() + 60
        live: dict[str, tuple[str, ...]] = {}
        while time.monotonic() < deadline and not any(live.values()):
            live = read_tail(project.run_dir)
            time.sleep(0.05)
        (session, lines), *others = live.items()
        assert not others and "scripted agent: held propose alpha" in lines
        started = [e for e in project.journal() if e["kind"] == "step-started"]
        assert [e["session"] for e in started] == [session]
    finally:
        release.touch()
        step.join(timeout=60)
    assert done and done[0].state == "advanced"
    # Kept after the step ended; the next step's log replaces it.
    assert session in read_tail(project.run_dir)
    # A credential's value never reaches the live log (here one the agent happens to print).
    assert apply_once(project, env={"SCRIPT_API_KEY": "apply alpha"}).state == "advanced"
    ((latest, lines),) = read_tail(project.run_dir).items()
    assert latest != session and latest == project.journal()[-1]["session"]
    assert "scripted agent: ok ***" in lines and not any("apply alpha" in x for x in lines)
