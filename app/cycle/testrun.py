"""Run the project's configured test command in a worktree and read its JUnit report.

The card cycle runs `tests.command` before and after every apply / red / fix so the engine —
not the agent — knows which tests fail (`app.domain.review.testsets` decides what the difference
means). The command executes code the agent wrote (a test, a conftest, the runner's own
config), so it runs through the launcher's `run_command`: as the agent user, with no
credential in its environment, in a PID namespace of its own (app/runtime/sandbox.py), bounded
by a timeout. The JUnit file is removed first so a stale report from an earlier run is never
read, and removed after so it is never committed. A command that wrote no report says why
(its exit status and the last line it printed: `pytest: not found`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from app.domain.review.testsets import NoTestCommand, TestRun, UnreadableJUnit, read_run
from app.engine.agent import AgentLauncher, CommandRun

DEFAULT_TIMEOUT_S = 30 * 60.0


def run_tests(
    launcher: AgentLauncher,
    worktree: Path,
    command: str | None,
    junit: str | None,
    env: Mapping[str, str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> TestRun:
    """Run `command` in `worktree`; the report at `junit` (relative to the worktree), read."""
    if not command:
        return NoTestCommand()
    report = (worktree / junit) if junit else None
    if report is not None:
        report.unlink(missing_ok=True)
    done = launcher.run_command(CommandRun(command, worktree, env, timeout_s))
    if done.timed_out:
        return UnreadableJUnit(
            junit or "(tests.junit unset)",
            f"the test command timed out after {timeout_s:.0f}s before finishing its report",
        )
    data = report.read_bytes() if report is not None and report.is_file() else None
    if report is not None:
        report.unlink(missing_ok=True)
    cause = None
    if data is None and done.exit_code != 0:
        said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        status = "was stopped" if done.exit_code is None else f"exited {done.exit_code}"
        cause = f"it {status}" + (f": {said[-1][:300]}" if said else " and printed nothing")
        if done.exit_code in (126, 127):
            cause += " (the test runner is not installed, or not executable, where pairbot runs)"
    return read_run(data, junit, cause)
