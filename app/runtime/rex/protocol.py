"""The command protocol: the shell scripts pairbot runs where the agent runs, and their answers.

Every script is run by one swerex `execute` (connection.py); request values reach them only
through shlex.quote. The protocol, a streaming model of run files polled from here:

1. `mktemp -d` a private run directory on the side where the agent runs, and `write_file` the
   prompt (the instructions), the environment script and a small launcher (`launcher_script`)
   into it, each base64 encoded so neither the server's locale nor a non-UTF-8 byte can bend
   them.
2. One `execute` (`launch_command`) decodes them and starts the launcher detached: `setsid` (its
   own session and process group), stdin from the prompt file, stdout to `out.log`. The
   launcher records its pid (= the group id), sources and deletes the 0600 environment script,
   enters the agent's working directory, runs the agent with its stderr in `err.log` (apart
   from the launcher's own, so the result's stderr is the agent's), and writes its exit status
   to the `exit` sentinel (atomically, by rename).
3. Every poll one `execute` (`poll_command`) reports whether the group is alive and the
   sentinel, then the log bytes after the byte cursor
   (`tail -c +<cursor+1> | head -c <cap> | base64`); `parse_poll` reads the answer. The
   sentinel is read before the log, so a short read after it means the log is drained.
4. On the per-agent timeout: SIGTERM to the group (`signal_command`), later SIGKILL.
   Afterwards the group is swept (SIGKILL), `err.log` is read for the result's stderr, and the
   run directory is removed (`finish_command`).

A request with `run_as` (a local agent isolated as its own OS user, app/runtime/isolation.py)
stages in /tmp, hands the run directory to that user before step 2, starts the launcher as it,
and runs every later script of steps 3 and 4 as it (`as_agent`): with passwordless sudo
instead of root, pairbot cannot open the lent files itself. A request with `contain` starts the
launcher as the first process of a PID namespace of its own (isolation.contain): the prefix's
watchdog records the group instead of the launcher (whose pid inside is 1), and when the
launcher ends the kernel ends whatever the agent detached, so step 4 also waits, bounded, for
the namespace to be gone before the step ends.

The sentinel holds the shell's `$?`. A shell cannot tell `exit 137` from death by SIGKILL, so,
like the shell, a status 128+N (N a signal number) is read as "killed by signal N"
(`exit_from_status`).
"""

from __future__ import annotations

import base64
import shlex
import signal
from dataclasses import dataclass
from typing import Final, Literal

from app.engine.agent import RunAs
from app.proc import START_FAILURE_EXIT_CODE
from app.runtime.isolation import CLEAN_PATH
from app.runtime.rex.errors import RexError

__all__ = [
    "POLL_HEADER",
    "READ_CAP_BYTES",
    "Poll",
    "PollState",
    "as_agent",
    "b64decode",
    "exit_from_status",
    "finish_command",
    "launch_command",
    "launcher_script",
    "parse_poll",
    "signal_command",
]

READ_CAP_BYTES: Final = 1 << 20  # log bytes fetched per poll; a full read polls again at once
_STDERR_CAP_BYTES: Final = 1 << 20  # the tail of err.log kept in the result
POLL_HEADER = "pairbot-poll"


def launcher_script(
    run_dir: str, cwd: str, argv: tuple[str, ...], *, record_group: bool = True
) -> str:
    """The detached launcher: record the group id, load the env, run the agent, write `exit`.

    `record_group` is off in a PID namespace, where the launcher's pid is 1: it publishes the
    group the namespace's creator recorded instead (isolation.contain).

    It traps SIGTERM with a handler (not `''`, which the agent would inherit) so that a timed
    out agent's status still reaches the sentinel; SIGKILL ends it without one. `command -p`
    finds mv and rm on the standard path whatever PATH the agent's environment sets.
    """
    run = shlex.quote(run_dir)
    where = shlex.quote(cwd)
    sentinel = (
        f'echo "$pairbot_status" >{run}/exit.tmp && command -p mv -f {run}/exit.tmp {run}/exit'
    )
    record = f"echo $$ >{run}/pgid.tmp && command -p mv -f {run}/pgid.tmp {run}/pgid"
    if not record_group:
        record = f"command -p mv -f {run}/group {run}/pgid"
    return "\n".join(
        [
            "# pairbot agent launcher: generated for one run, removed with its run directory",
            record,
            "trap 'pairbot_stopping=1' TERM",
            f". {run}/env",
            f"command -p rm -f {run}/env",
            f"if cd {where}; then",
            # The subshell keeps the agent's stderr apart from the launcher's own: a shell
            # reports a foreground job killed by a signal ("Terminated") on its stderr.
            f"  ( exec {shlex.join(argv)} ) 2>{run}/err.log",
            "  pairbot_status=$?",
            "else",
            f"  echo {shlex.quote(f'pairbot: cannot enter the working directory {cwd}')} "
            f">{run}/err.log",
            f"  pairbot_status={START_FAILURE_EXIT_CODE}",
            "fi",
            sentinel,
            "",
        ]
    )


# What a command switched to the agent's OS user starts with: an empty environment. The swerex
# session's shell holds pairbot's own environment (its credentials), and the agent can read
# `/proc/<pid>/environ` of every process of its user — pairbot's polls and signals included.
_CLEAN_ENV = f"env -i PATH={CLEAN_PATH}"


def _become(run_as: RunAs) -> str:
    return f"{_CLEAN_ENV} {shlex.join(run_as.switch)}"


def as_agent(run_as: RunAs | None, script: str) -> str:
    """`script` run as the agent's OS user (as is without one): the run directory is the
    agent's once it started, and pairbot reads, signals and removes it as that user."""
    if run_as is None:
        return script
    return f"{_become(run_as)} /bin/sh -c {shlex.quote(script)}"


def launch_command(
    run_dir: str,
    *,
    isolated_env: bool,
    run_as: RunAs | None = None,
    contain: tuple[str, ...] = (),
) -> str:
    """The one script that decodes the run's files and starts the launcher detached (step 2)."""
    run = shlex.quote(run_dir)
    # `env -i`: a local agent gets exactly the request's environment, never pairbot's own
    # (which holds forge credentials). A server's environment is its own and stays.
    shell = "env -i /bin/sh" if isolated_env else "/bin/sh"
    # Another OS user: it gets the run directory (its prompt and its 0600 env file), and
    # becomes itself before `setsid`, so the group id the launcher records is its own.
    start = f"setsid {shell} {run}/run <{run}/prompt >{run}/out.log 2>{run}/launcher.log"
    lend: list[str] = []
    become = ""
    if run_as is not None:
        chown = shlex.join([*run_as.admin, "chown", "-R", run_as.owner, run_dir])
        lend = [f"{chown} || exit 94"]
        become = _become(run_as) + " "
        # The redirections are opened as the agent too: the directory is no longer pairbot's
        # (pairbot without root cannot open its files once they are lent).
        start = f"/bin/sh -c {shlex.quote('exec ' + start)}"
    if contain:
        # A new session first, then the namespace (whose prefix switches user, if any, inside
        # it); the redirections are opened by the launcher's shell, as the agent.
        inner = f"exec /bin/sh {run}/run <{run}/prompt >{run}/out.log 2>{run}/launcher.log"
        become = ""
        # The prefix's own stdio is /dev/null: it must not hold the session's output pipe open
        # (this script's caller waits for it) while the agent runs.
        start = (
            f"{_CLEAN_ENV} setsid {shlex.join(contain)} /bin/sh -c {shlex.quote(inner)} "
            "</dev/null >/dev/null 2>&1"
        )
    missing = "pairbot: setsid is not installed where the agent runs (it comes with util-linux)"
    return "\n".join(
        [
            f"cd {run} || exit 90",
            "umask 077",
            "for f in prompt env run; do",
            '  base64 -d "$f.b64" >"$f" || exit 91',
            '  rm -f "$f.b64"',
            "done",
            f"command -v setsid >/dev/null 2>&1 || {{ echo {shlex.quote(missing)} >&2; exit 92; }}",
            ": >out.log && : >err.log && : >launcher.log || exit 93",
            *lend,
            f"{become}{start} &",
            "echo launched",
        ]
    )


def poll_command(run_dir: str, cursor: int) -> str:
    """Liveness, the sentinel, then the log bytes after `cursor` (step 3)."""
    run = shlex.quote(run_dir)
    # Order matters: liveness, then the sentinel, then the log. The launcher writes the sentinel
    # after the agent has exited and before it exits itself, so "dead without a sentinel" is
    # real, and a short read after the sentinel means every byte has been read.
    return "\n".join(
        [
            f"cd {run} 2>/dev/null || {{ echo '{POLL_HEADER} gone'; exit 0; }}",
            "p=$(cat pgid 2>/dev/null); a=-",
            'if [ -n "$p" ]; then',
            '  if kill -s 0 -- "-$p" 2>/dev/null; then a=1; else a=0; fi',
            "fi",
            "s=$(cat exit 2>/dev/null)",
            f'echo "{POLL_HEADER} $a $s"',
            f"tail -c +{cursor + 1} out.log | head -c {READ_CAP_BYTES} | base64",
        ]
    )


def signal_command(run_dir: str, sig: Literal["TERM", "KILL"]) -> str:
    """Send `sig` to the agent's process group, if it recorded one."""
    run = shlex.quote(run_dir)
    return f'p=$(cat {run}/pgid 2>/dev/null) && [ -n "$p" ] && kill -s {sig} -- "-$p" 2>/dev/null'


# The namespace's creator (unshare, whose pid is in `leader`) exits only once every process of
# the namespace has: wait for it, bounded (200 x 50 ms), so nothing the agent left runs into the
# next step. A zombie counts as gone: it has exited.
_WAIT_NAMESPACE = (
    "l=$(cat {run}/leader 2>/dev/null); i=0; "
    'while [ -n "$l" ] && [ "$i" -lt 200 ] && [ -r "/proc/$l/stat" ]; do '
    's=; read -r _ _ s _ <"/proc/$l/stat" 2>/dev/null; [ "$s" = Z ] && break; '
    "i=$((i+1)); sleep 0.05; done"
)


def finish_command(run_dir: str, *, sweep: bool, log: str = "err.log") -> str:
    """Sweep the group (`sweep`), wait for its namespace, print a log's tail, remove the run."""
    run = shlex.quote(run_dir)
    lines = [signal_command(run_dir, "KILL")] if sweep else []
    lines.append(_WAIT_NAMESPACE.format(run=run))
    lines += [
        f"tail -c {_STDERR_CAP_BYTES} {run}/{log} 2>/dev/null | base64",
        f"cd / && rm -rf {run}",
    ]
    return "\n".join(lines)


PollState = Literal["starting", "alive", "dead", "gone"]


@dataclass(frozen=True)
class Poll:
    """One poll's answer: the group's state, the exit sentinel, the new log bytes."""

    state: PollState
    status: int | None
    data: bytes


def parse_poll(stdout: str) -> Poll:
    """The answer of `poll_command`; `RexError` when it is not one."""
    header, _, rest = stdout.partition("\n")
    words = header.split()
    if not words or words[0] != POLL_HEADER:
        raise RexError(f"unexpected answer to a log poll: {header[:200]!r}", started=True)
    if words[1:] == ["gone"]:
        return Poll("gone", None, b"")
    states: dict[str, PollState] = {"-": "starting", "1": "alive", "0": "dead"}
    state = states.get(words[1], "starting") if len(words) > 1 else "starting"
    status = int(words[2]) if len(words) > 2 and words[2].isdigit() else None
    return Poll(state, status, b64decode(rest))


def b64decode(text: str) -> bytes:
    """Base64 as `base64` prints it (wrapped lines) decoded."""
    return base64.b64decode("".join(text.split()))


def exit_from_status(status: int) -> tuple[int | None, str | None]:
    """The (exit_code, signal) a shell status means: 128+N is signal N, as the shell reports it."""
    number = status - 128
    if 0 < number < signal.NSIG:
        try:
            return None, signal.Signals(number).name
        except ValueError:  # a real-time signal has no enum member
            return None, f"SIG{number}"
    return status, None
