"""Proof-of-work: judge a phase's proof command and decide whether it gates the phase.

The verdict is pure: `evaluate_pass_condition` maps a pass condition, an exit status and stdout
to (passed, one-line detail), and `gate_passed` applies the phase's policy. `run_proof_command`
is the thin shell that runs the configured command with bash, isolated as the agent is, and
reports what happened.

Pass conditions (the condition is stripped; directives and prefixes match case-insensitively):

    "" / "exit 0" / "exit-zero" / "exit code 0"   exit 0
    one of those directives, then punctuation/prose
        ("exit code 0 — new tests pass")          exit 0; the prose is not matched against stdout
    "contains:<text>"                             exit 0 and <text> occurs in stdout
    "regex:<pattern>"                             exit 0 and re.search(<pattern>, stdout)
    anything else                                 exit 0 and the whole condition occurs in stdout

No exit status (killed by a signal, timed out) never passes.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from app.engine.agent import AgentLauncher, CommandResult, CommandRun

if TYPE_CHECKING:
    # The manifest's model owns the policy's values; reading a manifest (`pairbot batch
    # status`) needs no event loop, so the manifest does not import this module.
    from app.engine.manifest import ProofPolicy

# A directive is a whole token: "exit 0x", "exit 01" and "exit code 00" are ordinary substrings,
# and so is "exit 0.5" (a number, not a directive followed by a full stop).
_EXIT_DIRECTIVE = re.compile(r"(?:exit\s+code\s+0|exit-zero|exit\s+0)(?!\w|\.\d)", re.IGNORECASE)
_CONTAINS = "contains:"
_REGEX = "regex:"


def _exit_verdict(exit_code: int | None) -> tuple[bool, str]:
    if exit_code is None:
        return False, "no exit status (killed by a signal or timed out); pass requires exit 0"
    if exit_code != 0:
        return False, f"exit {exit_code} (pass requires exit 0)"
    return True, "exit 0"


def evaluate_pass_condition(condition: str, exit_code: int | None, stdout: str) -> tuple[bool, str]:
    """Judge one proof run against its pass condition; return (passed, one-line detail)."""
    stripped = condition.strip()
    lowered = stripped.lower()

    if lowered.startswith(_REGEX):
        # Text after the prefix is stripped too: users write "regex: ^ok$" and mean "^ok$".
        pattern = stripped[len(_REGEX) :].strip()
        try:
            compiled = re.compile(pattern)
        except re.error as err:
            # Checked before the exit status: no run can pass until the manifest is fixed.
            return False, f"invalid regex {pattern!r}: {err}"
        passed, detail = _exit_verdict(exit_code)
        if not passed:
            return passed, detail
        if compiled.search(stdout) is None:
            return False, f"stdout does not match regex {pattern!r}"
        return True, f"exit 0 and stdout matches regex {pattern!r}"

    passed, detail = _exit_verdict(exit_code)
    if not stripped or _EXIT_DIRECTIVE.match(stripped):
        return passed, detail
    if not passed:
        return passed, detail

    is_contains = lowered.startswith(_CONTAINS)
    needle = stripped[len(_CONTAINS) :].strip() if is_contains else stripped
    if needle not in stdout:
        return False, f"stdout does not contain {needle!r}"
    return True, f"exit 0 and stdout contains {needle!r}"


def gate_passed(passed: bool, policy: ProofPolicy) -> bool:
    """Whether the next phase may start: the proof passed, or the policy only warns."""
    return passed or policy == "warn"


# What one proof command did: the launcher's result (exit_code None: a signal or the timeout).
ProofRun = CommandResult


async def run_proof_command(
    launcher: AgentLauncher,
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
) -> ProofRun:
    """Run `bash -c command` in `cwd` through the launcher's `run_command`: the proof executes
    the tree the agent wrote, so it runs as the agent would, isolated, with no credential.

    A command that cannot be started (no bash, missing cwd) is a failed run with exit 127 and
    the reason in stderr, so the operator fixes it and reruns the proof like any other failure.
    """
    run = CommandRun(shlex.join(["bash", "-c", command]), cwd, env, timeout_s)
    return await asyncio.to_thread(launcher.run_command, run)
