"""Proof-of-work: judge a phase's proof command and decide whether it gates the phase.

The verdict is pure: `evaluate_pass_condition` maps a pass condition, an exit status and stdout
to (passed, one-line detail), and `gate_passed` applies the phase's policy. `run_proof_command`
is the thin shell that runs the configured command with bash and reports what happened.

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

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ProofPolicy = Literal["hard-gate", "warn"]

# A directive is a whole token: "exit 0x", "exit 01" and "exit code 00" are ordinary substrings,
# and so is "exit 0.5" (a number, not a directive followed by a full stop).
_EXIT_DIRECTIVE = re.compile(r"(?:exit\s+code\s+0|exit-zero|exit\s+0)(?!\w|\.\d)", re.IGNORECASE)
_CONTAINS = "contains:"
_REGEX = "regex:"

# Grace between SIGTERM and SIGKILL when a proof command overruns (as for agents).
PROOF_KILL_GRACE_S = 2.0


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


@dataclass(frozen=True)
class ProofRun:
    """What one proof command did. `exit_code` is None when a signal or the timeout ended it."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool


async def run_proof_command(
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
) -> ProofRun:
    """Run `bash -c command` in `cwd`; on timeout stop its whole process group.

    A command that cannot be started (no bash, missing cwd) is a failed run with exit 127 and
    the reason in stderr, so the operator fixes it and reruns the proof like any other failure.
    """
    # Imported here: the manifest imports this module for its policy, and reading a manifest
    # (`pairbot batch status`) needs no event loop.
    import asyncio  # noqa: PLC0415

    from app.proc import (  # noqa: PLC0415
        START_FAILURE_EXIT_CODE,
        read_into,
        terminate_process_group,
    )

    try:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        message = f"pairbot: cannot run proof command in {str(cwd)!r}: {exc.strerror or exc}"
        return ProofRun(
            exit_code=START_FAILURE_EXIT_CODE, stdout="", stderr=message, timed_out=False
        )

    stdout, stderr = proc.stdout, proc.stderr
    if stdout is None or stderr is None:  # pragma: no cover - PIPE sets both
        raise RuntimeError("asyncio returned a subprocess without the requested pipes")

    out, err = bytearray(), bytearray()
    watched = {
        asyncio.create_task(read_into(stdout, out)),
        asyncio.create_task(read_into(stderr, err)),
        asyncio.create_task(proc.wait()),
    }
    timed_out = False
    try:
        _, pending = await asyncio.wait(watched, timeout=timeout_s)
        if pending:
            timed_out = True
            await terminate_process_group(proc, PROOF_KILL_GRACE_S)
            # Bounded: a process that escaped the group could hold a pipe open forever.
            await asyncio.wait(watched, timeout=PROOF_KILL_GRACE_S)
    finally:
        if proc.returncode is None:
            await terminate_process_group(proc, 0)
        for task in watched:
            task.cancel()
        await asyncio.gather(*watched, return_exceptions=True)

    returncode = proc.returncode
    exit_code = None if timed_out or returncode is None or returncode < 0 else returncode
    return ProofRun(
        exit_code=exit_code,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        timed_out=timed_out,
    )
