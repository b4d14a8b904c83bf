"""Proof-of-work: the pass-condition table, the gate policy, and the bash runner (seed 001)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.manifest import ProofPolicy
from app.engine.proof import (
    ProofRun,
    evaluate_pass_condition,
    gate_passed,
    run_proof_command,
)
from app.runtime import isolation
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime

EXIT_ONLY = ["", "exit 0", "exit-zero", "exit code 0"]
LEADING_DIRECTIVES = [
    "exit code 0 — new tests pass",
    "exit-zero: suite green",
    "exit 0, all good",
    "exit 0. then some prose",
    "exit 0 (unit tests)",
    "exit 0 and stdout contains 'ok'",
    "  EXIT CODE 0  ",
    "Exit-Zero",
    "exit   code\t0",
]


@pytest.mark.parametrize("condition", EXIT_ONLY + LEADING_DIRECTIVES)
def test_exit_directives_gate_on_the_exit_status_only(condition: str) -> None:
    # stdout is empty, so a substring match on the prose would fail.
    assert evaluate_pass_condition(condition, 0, "") == (True, "exit 0")
    assert evaluate_pass_condition(condition, 1, "exit 0") == (
        False,
        "exit 1 (pass requires exit 0)",
    )


@pytest.mark.parametrize(
    "condition",
    ["exit 0x", "exit 01", "exit code 00", "exit-zeroes", "exit 0_ok", "exit 0.5", "exit code"],
)
def test_near_directives_are_substrings(condition: str) -> None:
    assert evaluate_pass_condition(condition, 0, f"log: {condition}\n")[0] is True
    assert evaluate_pass_condition(condition, 0, "nothing here") == (
        False,
        f"stdout does not contain {condition!r}",
    )


@pytest.mark.parametrize(
    ("condition", "exit_code", "stdout", "expected"),
    [
        pytest.param(
            "contains:ok", 0, "all ok\n", (True, "exit 0 and stdout contains 'ok'"), id="c-pass"
        ),
        pytest.param(
            "contains:ok", 0, "fine\n", (False, "stdout does not contain 'ok'"), id="c-miss"
        ),
        pytest.param(
            "contains:ok", 2, "ok\n", (False, "exit 2 (pass requires exit 0)"), id="c-exit"
        ),
        pytest.param(
            "contains: ok ", 0, "ok", (True, "exit 0 and stdout contains 'ok'"), id="c-strip"
        ),
        pytest.param(
            "Contains:OK", 0, "OK", (True, "exit 0 and stdout contains 'OK'"), id="c-case"
        ),
        pytest.param(
            "contains:OK", 0, "ok", (False, "stdout does not contain 'OK'"), id="c-text-case"
        ),
        pytest.param(
            "contains:exit 0",
            0,
            "",
            (False, "stdout does not contain 'exit 0'"),
            id="c-directive-text",
        ),
        pytest.param("contains:", 0, "", (True, "exit 0 and stdout contains ''"), id="c-empty"),
        pytest.param(
            "regex:^\\d+ passed$",
            0,
            "x\n12 passed",
            (False, "stdout does not match regex '^\\\\d+ passed$'"),
            id="r-anchored",
        ),
        pytest.param(
            "regex:(?m)^\\d+ passed$",
            0,
            "x\n12 passed\n",
            (True, "exit 0 and stdout matches regex '(?m)^\\\\d+ passed$'"),
            id="r-multiline",
        ),
        pytest.param(
            "regex:ok|fine",
            0,
            "fine",
            (True, "exit 0 and stdout matches regex 'ok|fine'"),
            id="r-pass",
        ),
        pytest.param(
            "regex:ok", 0, "nope", (False, "stdout does not match regex 'ok'"), id="r-miss"
        ),
        pytest.param("regex:ok", 1, "ok", (False, "exit 1 (pass requires exit 0)"), id="r-exit"),
        pytest.param(
            "REGEX: ok ",
            0,
            "ok",
            (True, "exit 0 and stdout matches regex 'ok'"),
            id="r-prefix-case",
        ),
        pytest.param(
            "3 passed",
            0,
            "== 3 passed ==",
            (True, "exit 0 and stdout contains '3 passed'"),
            id="s-pass",
        ),
        pytest.param(
            "  3 passed \n",
            0,
            "3 passed",
            (True, "exit 0 and stdout contains '3 passed'"),
            id="s-strip",
        ),
        pytest.param(
            "3 passed", 0, "2 passed", (False, "stdout does not contain '3 passed'"), id="s-miss"
        ),
        pytest.param(
            "3 passed", 1, "3 passed", (False, "exit 1 (pass requires exit 0)"), id="s-exit"
        ),
        pytest.param("ok", -9, "ok", (False, "exit -9 (pass requires exit 0)"), id="s-negative"),
    ],
)
def test_condition_table(
    condition: str, exit_code: int, stdout: str, expected: tuple[bool, str]
) -> None:
    assert evaluate_pass_condition(condition, exit_code, stdout) == expected


@pytest.mark.parametrize("pattern", ["(unclosed", "[a-", "*x", "(?P<n>a)(?P<n>b)"])
@pytest.mark.parametrize("exit_code", [0, 1, None])
def test_invalid_regex_fails_naming_pattern_and_error(pattern: str, exit_code: int | None) -> None:
    passed, detail = evaluate_pass_condition(f"regex:{pattern}", exit_code, pattern)
    assert passed is False
    assert detail.startswith(f"invalid regex {pattern!r}: ")
    assert len(detail) > len(f"invalid regex {pattern!r}: ")
    assert "\n" not in detail


@pytest.mark.parametrize(
    "condition", [*EXIT_ONLY, *LEADING_DIRECTIVES, "contains:ok", "regex:ok", "ok"]
)
def test_no_exit_status_never_passes(condition: str) -> None:
    assert evaluate_pass_condition(condition, None, "ok exit 0") == (
        False,
        "no exit status (killed by a signal or timed out); pass requires exit 0",
    )


@pytest.mark.parametrize(
    ("passed", "policy", "expected"),
    [
        (True, "hard-gate", True),
        (False, "hard-gate", False),
        (True, "warn", True),
        (False, "warn", True),
    ],
)
def test_gate_policy(passed: bool, policy: ProofPolicy, expected: bool) -> None:
    assert gate_passed(passed, policy) is expected


def _run(
    command: str, cwd: Path, timeout_s: float = 30, env: dict[str, str] | None = None
) -> ProofRun:
    # The production launcher's isolation (this machine's facts, PAIR_ISOLATION from `env`).
    launcher = Launcher(lambda _s: ProcessRuntime(), host=isolation.probe_host)
    env = {"PATH": os.environ["PATH"]} if env is None else env
    return asyncio.run(run_proof_command(launcher, command, cwd, timeout_s=timeout_s, env=env))


def test_run_captures_exit_stdout_and_stderr(tmp_path: Path) -> None:
    run = _run("echo out; echo err >&2; pwd; exit 3", tmp_path)
    assert run == ProofRun(
        exit_code=3, stdout=f"out\n{tmp_path}\n", stderr="err\n", timed_out=False
    )


def test_run_success_feeds_the_evaluator(tmp_path: Path) -> None:
    run = _run("printf '5 passed'", tmp_path)
    assert (run.exit_code, run.timed_out) == (0, False)
    assert evaluate_pass_condition("regex:\\d+ passed", run.exit_code, run.stdout)[0] is True


def test_run_has_no_stdin(tmp_path: Path) -> None:
    assert _run("cat; echo done", tmp_path).stdout == "done\n"


def test_run_uses_the_given_env(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PROOF_MARKER": "m-42"}
    assert _run('echo "$PROOF_MARKER"', tmp_path, env=env).stdout == "m-42\n"


def test_run_decodes_invalid_utf8_with_replacement(tmp_path: Path) -> None:
    assert _run("printf 'a\\377b'", tmp_path).stdout == "a\ufffdb"


def test_run_killed_by_signal_never_passes(tmp_path: Path) -> None:
    # The shell that runs the command reports a child's death by SIGTERM as 128 + 15.
    run = _run("kill -TERM $$", tmp_path)
    assert (run.exit_code, run.timed_out) == (143, False)
    assert evaluate_pass_condition("", run.exit_code, run.stdout)[0] is False


def test_run_in_missing_directory_is_a_failed_run(tmp_path: Path) -> None:
    run = _run("true", tmp_path / "missing")
    assert (run.exit_code, run.timed_out, run.stdout) == (127, False, "")
    assert "missing" in run.stderr


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    # A zombie (state Z) is dead; it only waits for its new parent to reap it.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _running(marker: str) -> list[int]:
    """Live processes whose argv holds `marker` (pids inside a step's namespace mean nothing
    outside it, so the test looks for the process by what it runs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _alive(int(entry.name)):
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    marker = f"pbt-proof-{os.getpid()}-{time.monotonic_ns()}"
    # The background shell is a grandchild: only a group (or namespace) kill reaches it.
    command = f"sh -c 'sleep 30; :' {marker} & echo started; wait"
    run = _run(command, tmp_path, timeout_s=0.5)
    assert run.timed_out is True
    assert run.exit_code is None
    assert run.stdout == "started\n"
    deadline = time.monotonic() + 5
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(marker) == []


def test_timeout_of_a_plain_sleep(tmp_path: Path) -> None:
    started = time.monotonic()
    run = _run("sleep 30", tmp_path, timeout_s=0.5)
    assert (run.exit_code, run.timed_out) == (None, True)
    assert time.monotonic() - started < 20  # loose: far below the sleep itself


@given(condition=st.text(), exit_code=st.one_of(st.none(), st.integers()), stdout=st.text())
def test_evaluation_is_total_and_only_exit_zero_passes(
    condition: str, exit_code: int | None, stdout: str
) -> None:
    passed, detail = evaluate_pass_condition(condition, exit_code, stdout)
    assert detail
    if exit_code != 0:
        assert passed is False
