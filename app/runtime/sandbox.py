"""Run a project command from the agent's tree the way the agent runs: isolated and bounded.

The test command, a conftest it loads, a package.json script, a proof-of-work: each executes
code the agent may have written. Run with pairbot's rights it would read the forge token and
the App key from other processes' environments, so it gets exactly the agent's isolation
(app/runtime/isolation.py):

    Switch       the agent user, lent the tree for the run and given a fresh HOME; started with
                 an empty environment (`env -i`) and handed the command's own — every
                 credential stripped (app.proc.command_environment) — in a 0600 file in that
                 HOME, never in argv; in a PID namespace of its own where the machine allows
    NoIsolation  pairbot's own user, credentials stripped, in a PID namespace where a user
                 namespace allows one
    Refused      nothing runs (PAIR_ISOLATION=required and no way to isolate)

The command is always decided as a `local` one: it runs on this machine whatever the agent's
locus. A timeout kills the whole group (through `sudo -n kill` when pairbot is not root: the
agent user's processes are not pairbot's to signal); the namespace takes whatever left it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from app.engine.agent import CommandResult, CommandRun
from app.errors import UserError
from app.proc import START_FAILURE_EXIT_CODE, command_environment, env_script
from app.runtime import isolation, lending

__all__ = ["run_isolated"]

# $1 is the environment file (read, then removed), $2 the project's command line. Not `exec`:
# the first process of a PID namespace ignores signals it has no handler for, and the project's
# command should not be that process (a test that signals itself must still see it arrive).
_ENTER: Final = '. "$1" && command -p rm -f "$1" && /bin/sh -c "$2"; exit $?'
_RUN: Final = '/bin/sh -c "$1"; exit $?'
_ENV_FILE: Final = "command.env"
_KILL_GRACE_S: Final = 10.0


def run_isolated(
    plan: isolation.Plan, account: isolation.AgentAccount | None, run: CommandRun
) -> CommandResult:
    """Run `run.command` in `run.cwd` under `plan`; `account` is the plan's agent user."""
    if isinstance(plan, isolation.Refused):
        return CommandResult(START_FAILURE_EXIT_CODE, "", plan.reason + "\n")
    env = command_environment(run.env)
    if isinstance(plan, isolation.Switch) and account is not None:
        return _as_agent(plan, account, run, env)
    prefix = plan.contained(os.getpid()) if isinstance(plan, isolation.NoIsolation) else ()
    return _execute([*prefix, "/bin/sh", "-c", _RUN, "pairbot-command", run.command], run, env, ())


def _as_agent(
    switch: isolation.Switch,
    account: isolation.AgentAccount,
    run: CommandRun,
    env: dict[str, str],
) -> CommandResult:
    for name in isolation.HOME_VARS:
        env.pop(name, None)

    def files(made: Path) -> dict[str, str]:
        scratch = str(made / "tmp")
        env.update(HOME=str(made), USER=switch.user, LOGNAME=switch.user)
        env.update(TMPDIR=scratch, TMP=scratch, TEMP=scratch)
        return {_ENV_FILE: env_script(env)}

    home: Path | None = None
    try:
        home = account.make_home(files)
        lent = lending.lend(account, run.cwd, (), home)
    except UserError as err:
        if home is not None:
            with contextlib.suppress(UserError):
                account.remove_home(home)
        return CommandResult(START_FAILURE_EXIT_CODE, "", f"pairbot: {err}\n")
    argv = [
        "env",
        "-i",
        f"PATH={isolation.CLEAN_PATH}",
        *switch.contained(os.getpid()),
        "/bin/sh",
        "-c",
        _ENTER,
        "pairbot-command",
        str(home / _ENV_FILE),
        run.command,
    ]
    try:
        result = _execute(argv, run, {}, switch.admin())
    finally:
        try:
            problem = lending.take_back(lent)  # the HOME goes with it
        except UserError as err:
            problem = str(err)
    if problem is None:
        return result
    return CommandResult(1, result.stdout, f"{result.stderr}pairbot: {problem}\n", False)


def _execute(
    argv: Sequence[str], run: CommandRun, env: dict[str, str], admin: Sequence[str]
) -> CommandResult:
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=run.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        said = f"pairbot: cannot run {run.command!r} in {str(run.cwd)!r}: {exc.strerror or exc}"
        return CommandResult(START_FAILURE_EXIT_CODE, "", said + "\n")
    try:
        out, err = proc.communicate(timeout=run.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid, admin)
        try:
            out, err = proc.communicate(timeout=_KILL_GRACE_S)
        except subprocess.TimeoutExpired:  # a pipe held open past the kill: give up reading
            proc.kill()
            out, err = b"", b""
        note = f"pairbot: the command timed out after {run.timeout_s:g} s and was stopped\n"
        return CommandResult(None, _text(out), _text(err) + note, timed_out=True)
    code = proc.returncode
    return CommandResult(code if code >= 0 else None, _text(out), _text(err))


def _kill_group(pgid: int, admin: Sequence[str]) -> None:
    if admin:
        # The group holds the agent user's processes: pairbot's own user may not signal them.
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [*admin, "kill", "-s", "KILL", "--", f"-{pgid}"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_KILL_GRACE_S,
                check=False,
            )
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
