"""Run the project's configured test command in a worktree and read its JUnit report.

The card cycle runs `tests.command` before and after every apply / red / fix so the engine —
not the agent — knows which tests fail (`app.domain.testsets` decides what the difference
means). The command runs through the shell in the worktree with the agent's environment
(forge and App secrets stripped: it executes code the agent wrote), bounded by a timeout; the
JUnit file is removed first so a stale report from an earlier run is never read, and removed
after so it is never committed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from app.domain.testsets import NoTestCommand, TestRun, UnreadableJUnit, read_run
from app.proc import agent_environment

DEFAULT_TIMEOUT_S = 30 * 60.0


def run_tests(
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
    try:
        subprocess.run(  # noqa: S602  # the project's own configured command line, as written
            command,
            shell=True,
            cwd=worktree,
            env=agent_environment(env, {}),
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return UnreadableJUnit(
            junit or "(tests.junit unset)",
            f"the test command timed out after {timeout_s:.0f}s before finishing its report",
        )
    data = report.read_bytes() if report is not None and report.is_file() else None
    if report is not None:
        report.unlink(missing_ok=True)
    return read_run(data, junit)
