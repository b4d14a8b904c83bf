"""Child-process helpers shared by the agent runtime, proof-of-work and the cycle's test runs.

A leaf: it imports nothing else from `app`, so the engine (`proof.py`), the runtime
(`process.py`, `rex/`, `launcher.py`) and the cycle (`testrun.py`) can all use it without
depending on each other.

    START_FAILURE_EXIT_CODE   the exit status reported when a child cannot even start
    terminate_process_group   the one "stop this child and everything it started"
    signal_name               asyncio's negative return code → "SIGTERM"
    read_into                 drain a pipe into a buffer, keeping what arrived so far
    agent_environment         a child's environment: forge and App secrets stripped
    command_environment       a project command's environment: every credential stripped
    credential_values         the credential values of an environment, to scrub from output
    env_script                an environment as a POSIX sh script, handed to another OS user
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
from collections.abc import Mapping

# Exit status a shell reports for "command not found"; a start failure reuses it so the engine
# maps it like any other failed agent or proof command.
START_FAILURE_EXIT_CODE = 127

_CHUNK_BYTES = 64 * 1024


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The group may already be gone (ESRCH); on some kernels a group of only zombies answers
    # EPERM. Either way there is nothing left to signal.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def terminate_process_group(proc: asyncio.subprocess.Process, grace_s: float) -> str:
    """SIGTERM `proc`'s process group, SIGKILL it after `grace_s`; return the signal that ended it.

    `proc` must have been started with `start_new_session=True`, so its pid is its group id and
    the signal reaches every process it started, not just the direct child.
    """
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        return signal.SIGKILL.name
    # The leader stopped on SIGTERM, but a grandchild that ignores it would outlive the run and
    # keep our pipes open; the run is over either way, so sweep the group.
    _signal_group(proc.pid, signal.SIGKILL)
    return signal.SIGTERM.name


def signal_name(returncode: int) -> str:
    """Name the signal behind asyncio's negative return code (e.g. -15 → "SIGTERM")."""
    try:
        return signal.Signals(-returncode).name
    except ValueError:  # a real-time signal has no enum member
        return f"SIG{-returncode}"


async def read_into(stream: asyncio.StreamReader, sink: bytearray) -> None:
    """Append everything `stream` yields to `sink` until EOF.

    Chunked rather than one `read()`, so a caller that has to give up early keeps what arrived.
    """
    while chunk := await stream.read(_CHUNK_BYTES):
        sink.extend(chunk)


# Forge and app credentials never reach an agent: the engine does every write to the forge.
# Git configuration passed through the environment can carry an Authorization header.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PRIVATE_KEY|PASSWORD|(?:^|_)PAT$|^INPUT_|^GIT_CONFIG_(?:COUNT|KEY_|VALUE_|PARAMETERS)"
)
# Agents' own credentials are how they reach their model: they are passed through.
_AGENT_CREDENTIAL = re.compile(
    r"^(ANTHROPIC_|CLAUDE_|OPENAI_|CODEX_|GEMINI_|GOOGLE_|CURSOR_|OPENCODE_|OPENROUTER_)"
)


# claude on Amazon Bedrock reaches its model with the AWS credentials in the environment
# (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_BEARER_TOKEN_BEDROCK): they are the agent's
# own only when the operator chose Bedrock (CLAUDE_CODE_USE_BEDROCK), and pass only then.


def _on(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


# Names whose values are credentials to keep out of anything pairbot shows (an agent's output
# on the status pages): the forge's, and the agents' own model keys passed through above.
_CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PRIVATE_KEY|API_KEY|(?:^|_)KEY$|(?:^|_)PAT$")
# Shorter values are too likely to be ordinary words to replace wherever they appear.
_CREDENTIAL_MIN_LEN = 8


def credential_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values in `env` that are credentials by their names, longest first (for scrubbing)."""
    found = {
        value
        for name, value in env.items()
        if _CREDENTIAL_NAME.search(name.upper()) and len(value.strip()) >= _CREDENTIAL_MIN_LEN
    }
    return tuple(sorted(found, key=len, reverse=True))


def command_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The environment of a project command run from the agent's tree (tests, proof-of-work):
    `base` with no credential at all — neither the forge's nor the agents' model keys."""
    return {
        name: value
        for name, value in base.items()
        if not (
            _SECRET_NAME.search(name)
            or _CREDENTIAL_NAME.search(name.upper())
            or _AGENT_CREDENTIAL.match(name)
        )
    }


def agent_environment(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment: `base` without forge/app secrets, plus pairbot's PAIR_* keys.

    The cycle's test runs use it too (with no extra keys): they execute code the agent wrote.
    """
    bedrock = _on(base.get("CLAUDE_CODE_USE_BEDROCK"))
    env = {
        name: value
        for name, value in base.items()
        if _AGENT_CREDENTIAL.match(name)
        or not _SECRET_NAME.search(name)
        or (bedrock and name.startswith("AWS_"))
    }
    env.update(extra)
    return env


_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_script(
    env: Mapping[str, str],
    *,
    drop: frozenset[str] = frozenset(),
    value_map: Mapping[str, str] | None = None,
) -> str:
    """A POSIX sh script exporting `env` (values shell-quoted), minus the names in `drop`.

    A value equal to a key of `value_map` is replaced (the project root becomes the agent-side
    root). Names a shell cannot export (e.g. `BASH_FUNC_f%%`) are left out.
    """
    lines = ["# pairbot: the agent's environment (0600, deleted by the launcher once read)"]
    for name in sorted(env):
        if name in drop or not _SHELL_NAME.fullmatch(name):
            continue
        value = env[name]
        if value_map is not None:
            value = value_map.get(value, value)
        lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"
