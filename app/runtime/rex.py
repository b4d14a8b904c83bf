"""The SWE-ReX loci (local, docker, remote): run one agent through a swerex runtime.

pairbot drives SWE-ReX in-process: `local` uses swerex's `LocalRuntime`, `docker` the runtime
of a `DockerDeployment` (after a `docker info` pre-flight), `remote` a `RemoteRuntime` talking
to a `swerex-remote` server. `RexRuntime` implements the `AgentRuntime` seam
(app/engine/agent.py) the same way over all three, with the seed's streaming model:

1. `mktemp -d` a private run directory on the side where the agent runs, and `write_file` the
   prompt (the instructions), the environment script and a small launcher into it, each base64
   encoded so neither the server's locale nor a non-UTF-8 byte can bend them.
2. One `execute` decodes them and starts the launcher detached: `setsid` (its own session and
   process group), stdin from the prompt file, stdout to `out.log`. The launcher records its
   pid (= the group id), sources and deletes the 0600 environment script, enters the agent's
   working directory, runs the agent with its stderr in `err.log` (apart from the launcher's
   own, so the result's stderr is the agent's), and writes its exit status to the `exit`
   sentinel (atomically, by rename).
3. Every `poll_interval_s` (sooner at first: 50, 100, 200 ms…) one `execute` reports whether
   the group is alive and the sentinel, then the log bytes after the byte cursor
   (`tail -c +<cursor+1> | head -c <cap> | base64`).
   The cursor advances by the bytes decoded; an incremental UTF-8 decoder and a line assembler
   turn them into `stdout` events for complete lines only, in order, each exactly once. The
   sentinel is read before the log, so a short read after it means the log is drained; the
   last line without a newline is emitted once at the end.
4. On the per-agent timeout: SIGTERM to the group, `kill_grace_s` later SIGKILL. Afterwards the
   group is swept (SIGKILL), `err.log` is read for the result's stderr, and the run directory
   and the swerex session/runtime are closed.

A request with `run_as` (a local agent isolated as its own OS user, app/runtime/isolation.py)
stages in /tmp, hands the run directory to that user before step 2, starts the launcher as it,
and runs every later script of steps 3 and 4 as it (`as_agent`): with passwordless sudo
instead of root, pairbot cannot open the lent files itself. A request with `contain` starts the
launcher as the first process of a PID namespace of its own (isolation.contain): the prefix's
watchdog records the group instead of the launcher (whose pid inside is 1), and when the
launcher ends the kernel ends whatever the agent detached, so step 4 also waits, bounded, for
the namespace to be gone before the step ends.

The sentinel holds the shell's `$?`. A shell cannot tell `exit 137` from death by SIGKILL, so,
like the shell, a status 128+N (N a signal number) is read as "killed by signal N".

Failures never raise out of `spawn` (seed: no new outcome states). Whatever goes wrong in
swerex, aiohttp, Docker or the OS becomes `RexError` — internal, one actionable line, with the
auth token redacted — and `spawn` turns it into an `error` event plus a non-zero result
(`START_FAILURE_EXIT_CODE` when the agent never started, 1 when it was lost mid-run) with the
message in `stderr`, so the engine parks the step as blocked and resumable:

    RexError                   this module only; str() is safe to show a user
      (from) RemoteUrlError    the remote host's scheme rules refused it (remote_url.py)
      (from) _ServerError      swerex-remote answered 4xx/5xx, 511 carrying a swerexception
      (from) any Exception     a swerex call, aiohttp, the Docker deployment, the OS

swerex logs through rich to the terminal and its remote client `print()`s on a 511; every
swerex object here gets a silent logger, the remote client is the quiet subclass below, and
SWE_REX_LOG_STREAM_LEVEL is defaulted to CRITICAL before swerex is imported (the seed's
sidecar does the same) for the loggers swerex creates on its own, so only our events reach
the terminal.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import logging
import os
import re
import shlex
import signal
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, Literal, NoReturn, Protocol, TypeVar

# Read by swerex.utils.log when it is first imported; a value the operator set wins.
os.environ.setdefault("SWE_REX_LOG_STREAM_LEVEL", "CRITICAL")

# The imports below must follow the line above: swerex reads the level at import time.
import aiohttp
from swerex.runtime.abstract import (
    AbstractRuntime,
    CloseBashSessionRequest,
    Command,
    CommandResponse,
    CreateBashSessionRequest,
    WriteFileRequest,
    _ExceptionTransfer,
)
from swerex.runtime.local import LocalRuntime
from swerex.runtime.remote import RemoteRuntime

from app.engine.agent import (
    AgentEvent,
    AgentSpawnRequest,
    AgentSpawnResult,
    EventSink,
    RunAs,
)
from app.proc import START_FAILURE_EXIT_CODE, env_script
from app.runtime.isolation import CLEAN_PATH
from app.runtime.remote_url import RemoteUrlError, remote_base_url
from app.settings import DEFAULT_DOCKER_IMAGE, Locus, RemoteSettings

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "DEFAULT_POLL_INTERVAL_S",
    "DOCKER_WORKDIR",
    "FOREIGN_MACHINE_ENV",
    "DockerLocus",
    "LineAssembler",
    "LocalLocus",
    "RemoteLocus",
    "RexConnection",
    "RexError",
    "RexLocus",
    "RexRuntime",
    "docker_preflight",
    "env_script",
    "exit_from_status",
    "launcher_script",
    "map_project_path",
]

DEFAULT_POLL_INTERVAL_S: Final = 0.3
_FIRST_POLL_S: Final = 0.025  # the first wait; each next one doubles, up to the interval
DEFAULT_KILL_GRACE_S: Final = 2.0
DEFAULT_REQUEST_TIMEOUT_S: Final = 30.0
DEFAULT_IS_ALIVE_TIMEOUT_S: Final = 30.0
DEFAULT_LOST_CONTACT_S: Final = 30.0
DEFAULT_START_TIMEOUT_S: Final = 30.0
DEFAULT_DOCKER_PREFLIGHT_TIMEOUT_S: Final = 10.0
DEFAULT_DOCKER_STARTUP_TIMEOUT_S: Final = 180.0

# Where the docker locus bind-mounts the project root inside the container.
DOCKER_WORKDIR: Final = "/workspace"

# Variables that describe this machine, not the one a docker or remote agent runs on: exporting
# them would replace the server's own PATH and HOME with paths that do not exist there (macOS
# also sets a per-user TMPDIR under /var/folders). The shell keeps PWD, OLDPWD and SHLVL itself.
FOREIGN_MACHINE_ENV: Final = frozenset({"PATH", "HOME", "TMPDIR", "PWD", "OLDPWD", "SHLVL"})

_READ_CAP_BYTES: Final = 1 << 20  # log bytes fetched per poll; a full read polls again at once
_STDERR_CAP_BYTES: Final = 1 << 20  # the tail of err.log kept in the result
_CLEANUP_TIMEOUT_S: Final = 10.0
_POLL_HEADER = "pairbot-poll"


def _silent_logger() -> logging.Logger:
    logger = logging.getLogger("pairbot.swerex")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.setLevel(logging.CRITICAL + 1)  # above CRITICAL: nothing at all
    return logger


_QUIET: Final = _silent_logger()


class RexError(Exception):
    """A failure to run the agent through SWE-ReX. `str()` is one actionable, token-free line.

    `started` says whether the agent process was launched: it picks the result's exit code.
    """

    def __init__(self, message: str, *, started: bool = False) -> None:
        super().__init__(message)
        self.started = started


# --- pure helpers -----------------------------------------------------------------------------


def map_project_path(path: str, project_root: str, agent_root: str) -> str | None:
    """`path` as the agent sees it when `project_root` appears at `agent_root`; None if outside."""
    here, root = PurePosixPath(path), PurePosixPath(project_root)
    if here == root:
        return agent_root
    try:
        relative = here.relative_to(root)
    except ValueError:
        return None
    return str(PurePosixPath(agent_root) / relative)


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


def _launch_command(
    run_dir: str,
    *,
    isolated_env: bool,
    run_as: RunAs | None = None,
    contain: tuple[str, ...] = (),
) -> str:
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


def _poll_command(run_dir: str, cursor: int) -> str:
    run = shlex.quote(run_dir)
    # Order matters: liveness, then the sentinel, then the log. The launcher writes the sentinel
    # after the agent has exited and before it exits itself, so "dead without a sentinel" is
    # real, and a short read after the sentinel means every byte has been read.
    return "\n".join(
        [
            f"cd {run} 2>/dev/null || {{ echo '{_POLL_HEADER} gone'; exit 0; }}",
            "p=$(cat pgid 2>/dev/null); a=-",
            'if [ -n "$p" ]; then',
            '  if kill -s 0 -- "-$p" 2>/dev/null; then a=1; else a=0; fi',
            "fi",
            "s=$(cat exit 2>/dev/null)",
            f'echo "{_POLL_HEADER} $a $s"',
            f"tail -c +{cursor + 1} out.log | head -c {_READ_CAP_BYTES} | base64",
        ]
    )


def _signal_command(run_dir: str, sig: Literal["TERM", "KILL"]) -> str:
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


def _finish_command(run_dir: str, *, sweep: bool, log: str = "err.log") -> str:
    run = shlex.quote(run_dir)
    lines = [_signal_command(run_dir, "KILL")] if sweep else []
    lines.append(_WAIT_NAMESPACE.format(run=run))
    lines += [
        f"tail -c {_STDERR_CAP_BYTES} {run}/{log} 2>/dev/null | base64",
        f"cd / && rm -rf {run}",
    ]
    return "\n".join(lines)


PollState = Literal["starting", "alive", "dead", "gone"]


@dataclass(frozen=True)
class _Poll:
    state: PollState
    status: int | None
    data: bytes


def _parse_poll(stdout: str) -> _Poll:
    header, _, rest = stdout.partition("\n")
    words = header.split()
    if not words or words[0] != _POLL_HEADER:
        raise RexError(f"unexpected answer to a log poll: {header[:200]!r}", started=True)
    if words[1:] == ["gone"]:
        return _Poll("gone", None, b"")
    states: dict[str, PollState] = {"-": "starting", "1": "alive", "0": "dead"}
    state = states.get(words[1], "starting") if len(words) > 1 else "starting"
    status = int(words[2]) if len(words) > 2 and words[2].isdigit() else None
    return _Poll(state, status, _b64decode(rest))


def _b64decode(text: str) -> bytes:
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


class LineAssembler:
    """Bytes in, complete lines out: each line exactly once, in order, UTF-8 split-safe."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        """The lines `data` completes (without their newline)."""
        text = self._decoder.decode(data)
        if not text:
            return []
        *complete, tail = text.split("\n")
        lines: list[str] = []
        if complete:
            lines.append("".join([*self._partial, complete[0]]))
            lines.extend(complete[1:])
            self._partial = []
        if tail:
            self._partial.append(tail)
        return lines

    def finish(self) -> list[str]:
        """The last line if it had no newline (once), and any undecodable tail bytes."""
        self._partial.append(self._decoder.decode(b"", final=True))
        last = "".join(self._partial)
        self._partial = []
        return [last] if last else []


def _redactor(secret: str | None) -> Callable[[str], str]:
    if not secret:
        return lambda text: text
    return lambda text: text.replace(secret, "***")


# --- talking to swerex --------------------------------------------------------------------------


class _ServerError(Exception):
    """swerex-remote answered with an error status (511 carries a swerexception)."""

    def __init__(self, status: int, detail: str, class_path: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.class_path = class_path


class _QuietRemoteRuntime(RemoteRuntime):
    """swerex's RemoteRuntime minus its console output.

    Upstream logs error bodies at CRITICAL and `print()`s the class of a transferred exception
    (swerex/runtime/remote.py, `_handle_transfer_exception`); here both become `_ServerError`.
    """

    def _handle_transfer_exception(self, exc_transfer: _ExceptionTransfer) -> NoReturn:
        raise _ServerError(511, exc_transfer.message, exc_transfer.class_path)

    async def _handle_response_errors(self, response: aiohttp.ClientResponse) -> None:
        if response.status < 400:
            return
        try:
            data: object = await response.json(content_type=None)
        except (aiohttp.ClientError, ValueError):
            data = None
        if response.status == 511 and isinstance(data, dict):
            transfer = data.get("swerexception")
            if isinstance(transfer, dict):
                raise _ServerError(
                    511, str(transfer.get("message", "")), str(transfer.get("class_path", ""))
                )
        detail = data.get("detail") if isinstance(data, dict) else None
        raise _ServerError(response.status, str(detail or response.reason or ""))


_T = TypeVar("_T")


def _run_blocking(factory: Callable[[], Awaitable[_T]]) -> _T:
    # For swerex coroutines that block (LocalRuntime runs subprocess.run, DockerDeployment pulls
    # images and sleeps): run them on a worker thread's own loop, not on the caller's.
    async def call() -> _T:
        return await factory()

    return asyncio.run(call())


def _describe(exc: BaseException, where: str) -> str:
    if isinstance(exc, _ServerError):
        if exc.status in (401, 403):
            return (
                f"{where} rejected pairbot's auth token (HTTP {exc.status}); set "
                "`remote.authToken` to the value the server was started with (--auth-token)"
            )
        if exc.status == 511:
            kind = (exc.class_path or "").rpartition(".")[2] or "error"
            return f"{where} reported {kind}: {exc.detail}"
        return f"{where} answered HTTP {exc.status}: {exc.detail}"
    if isinstance(exc, TimeoutError):
        return f"{where} did not answer in time"
    if isinstance(exc, aiohttp.ClientError):
        return f"cannot reach {where}: {exc}"
    text = str(exc).strip().splitlines()
    return f"{where}: {type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class RexConnection:
    """A started swerex runtime, how to call it, and how to let go of it."""

    def __init__(
        self,
        runtime: AbstractRuntime,
        *,
        where: str,
        blocking: bool = False,
        release: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.runtime = runtime
        self.where = where  # "the swerex-remote server at …", named in every failure
        self._blocking = blocking
        self._release = release

    async def call(self, what: str, factory: Callable[[], Awaitable[_T]], timeout_s: float) -> _T:
        """Await one swerex call with a deadline; any failure becomes `RexError`."""
        try:
            if self._blocking:
                return await asyncio.wait_for(asyncio.to_thread(_run_blocking, factory), timeout_s)
            return await asyncio.wait_for(factory(), timeout_s)
        except Exception as exc:  # every swerex/aiohttp/OS failure is reported, never raised
            raise RexError(f"could not {what}: {_describe(exc, self.where)}") from None

    async def execute(self, what: str, script: str, timeout_s: float) -> CommandResponse:
        """Run a shell script where the agent runs; a non-zero exit is a `RexError`."""
        # The scripts are ours; request values reach them only through shlex.quote.
        command = Command(command=script, shell=True, timeout=timeout_s, check=False)  # noqa: S604
        response = await self.call(what, lambda: self.runtime.execute(command), timeout_s + 5)
        if response.exit_code != 0:
            detail = (response.stderr or response.stdout).strip()[-500:]
            raise RexError(f"could not {what} ({self.where}, exit {response.exit_code}): {detail}")
        return response

    async def write_file(self, what: str, path: str, content: str, timeout_s: float) -> None:
        """Write a text file where the agent runs."""
        request = WriteFileRequest(path=path, content=content)
        await self.call(what, lambda: self.runtime.write_file(request), timeout_s)

    async def release(self) -> None:
        """Close the session/runtime; a failure here cannot change the run's result."""
        if self._release is None:
            return
        release, self._release = self._release, None
        with contextlib.suppress(Exception):  # best effort: the run is over either way
            await asyncio.wait_for(release(), _CLEANUP_TIMEOUT_S)


class RexLocus(Protocol):
    """Where a `RexRuntime` runs agents: how to reach that side and how paths and env map."""

    @property
    def name(self) -> Locus:
        """The locus this is."""
        ...

    @property
    def secret(self) -> str | None:
        """A credential to redact from everything `spawn` reports."""
        ...

    @property
    def isolated_env(self) -> bool:
        """True: the agent gets exactly the request's env; False: the server's env plus it."""
        ...

    def agent_cwd(self, cwd: str) -> str:
        """The request's cwd as the agent sees it; `RexError` when it cannot be seen there."""
        ...

    def agent_env(self, env: Mapping[str, str]) -> str:
        """The environment script for `env` (see `env_script`)."""
        ...

    async def connect(self, run_id: str) -> RexConnection:
        """Start or reach the swerex runtime; `RexError` on any failure."""
        ...


class LocalLocus:
    """`local`: swerex's LocalRuntime in-process; the agent runs on this machine."""

    name: Final[Locus] = "local"
    secret: Final = None
    isolated_env: Final = True

    def agent_cwd(self, cwd: str) -> str:
        """The cwd is already this machine's."""
        return cwd

    def agent_env(self, env: Mapping[str, str]) -> str:
        """Exactly the request's environment."""
        return env_script(env)

    async def connect(self, run_id: str) -> RexConnection:
        """A fresh LocalRuntime; its calls block, so they run on a worker thread."""
        runtime = LocalRuntime(logger=_QUIET)
        return RexConnection(
            runtime, where="the local swerex runtime", blocking=True, release=runtime.close
        )


def _stderr_summary(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    first = next((line for line in lines if line), "")
    return first[:300]


async def docker_preflight(
    *,
    docker: str = "docker",
    timeout_s: float = DEFAULT_DOCKER_PREFLIGHT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """None when `docker info` reaches an engine, else an actionable message (no exception).

    Runs before anything of swerex is touched, so a missing engine fails in seconds instead of
    after swerex's own start-up timeout. `env` is the CLI's environment (None: pairbot's).
    """
    remedy = (
        "Start Docker (or Docker Desktop) and retry, or run agents elsewhere: set `locus: local` "
        "or `locus: remote` under `batch:` in .pair/config.yaml, or PAIR_LOCUS=local."
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            docker,
            "info",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=None if env is None else dict(env),
        )
    except OSError as exc:
        return (
            f"locus docker: no Docker engine is reachable: cannot run {docker!r} "
            f"({exc.strerror or exc}); install the Docker CLI. {remedy}"
        )
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return (
            f"locus docker: no Docker engine is reachable: `docker info` did not answer within "
            f"{timeout_s:g} s. {remedy}"
        )
    if proc.returncode != 0:
        reason = _stderr_summary(stderr) or f"exit {proc.returncode}"
        return (
            f"locus docker: no Docker engine is reachable (`docker info` failed: {reason}). "
            f"{remedy}"
        )
    return None


class DockerLocus:
    """`docker`: a DockerDeployment with the project root bind-mounted at /workspace.

    Untested on the development machine (it has a Docker client but no engine); the tests
    cover the pre-flight. Files the agent creates in /workspace are owned by the container's
    user (root for the default image): swerex-remote is installed at start-up with pip, which
    needs root, so no `--user` is passed.
    """

    name: Final[Locus] = "docker"
    secret: Final = None
    isolated_env: Final = False

    def __init__(
        self,
        project_root: Path,
        image: str = DEFAULT_DOCKER_IMAGE,
        *,
        preflight_timeout_s: float = DEFAULT_DOCKER_PREFLIGHT_TIMEOUT_S,
        startup_timeout_s: float = DEFAULT_DOCKER_STARTUP_TIMEOUT_S,
    ) -> None:
        self._root = str(project_root)
        self._image = image
        self._preflight_timeout_s = preflight_timeout_s
        self._startup_timeout_s = startup_timeout_s

    def agent_cwd(self, cwd: str) -> str:
        """The cwd under /workspace; outside the project root the container cannot see it."""
        mapped = map_project_path(cwd, self._root, DOCKER_WORKDIR)
        if mapped is None:
            raise RexError(
                f"locus docker: the agent's working directory {cwd} is outside the project "
                f"root {self._root}, the only host directory mounted in the container"
            )
        return mapped

    def agent_env(self, env: Mapping[str, str]) -> str:
        """The request's env minus this machine's PATH/HOME/…; the project root → /workspace."""
        return env_script(env, drop=FOREIGN_MACHINE_ENV, value_map={self._root: DOCKER_WORKDIR})

    async def connect(self, run_id: str) -> RexConnection:
        """Pre-flight, then start the container (on a worker thread: swerex blocks in it)."""
        problem = await docker_preflight(timeout_s=self._preflight_timeout_s)
        if problem is not None:
            raise RexError(problem)
        from swerex.deployment.docker import DockerDeployment  # noqa: PLC0415  # docker only

        deployment = DockerDeployment(
            logger=_QUIET,
            image=self._image,
            docker_args=["-v", f"{self._root}:{DOCKER_WORKDIR}"],
            startup_timeout=self._startup_timeout_s,
        )

        async def start() -> None:
            await deployment.start()  # type: ignore[no-untyped-call]

        async def stop() -> None:
            await deployment.stop()  # type: ignore[no-untyped-call]

        try:
            await asyncio.wait_for(
                asyncio.to_thread(_run_blocking, start), self._startup_timeout_s + 60
            )
        except Exception as exc:  # image pull, container start, startup timeout
            with contextlib.suppress(Exception):
                await asyncio.to_thread(_run_blocking, stop)
            raise RexError(
                f"locus docker: could not start a container from image {self._image!r}: "
                f"{_describe(exc, 'docker')}. Check `docker run {self._image}` works and the "
                "image can install swe-rex (it needs network access on first start)."
            ) from None
        # The deployment's own client logs and prints on errors; talk to the same server
        # (port and per-container token) through the quiet one instead.
        config = deployment.runtime._config
        runtime = _QuietRemoteRuntime(logger=_QUIET, **config.model_dump())
        return RexConnection(
            runtime,
            where=f"the swerex runtime in the {self._image} container",
            release=lambda: asyncio.to_thread(_run_blocking, stop),
        )


class RemoteLocus:
    """`remote`: a swerex-remote server reached over its REST API with `X-API-Key`."""

    name: Final[Locus] = "remote"
    isolated_env: Final = False

    def __init__(
        self,
        remote: RemoteSettings | None,
        project_root: Path,
        *,
        is_alive_timeout_s: float = DEFAULT_IS_ALIVE_TIMEOUT_S,
    ) -> None:
        self._remote = remote
        self._root = str(project_root)
        self._workdir = (remote.workdir if remote is not None else None) or self._root
        self._is_alive_timeout_s = is_alive_timeout_s

    @property
    def secret(self) -> str | None:
        """The auth token, so that no message can carry it."""
        token = self._remote.auth_token if self._remote is not None else None
        return token.get_secret_value() if token is not None else None

    def agent_cwd(self, cwd: str) -> str:
        """The cwd under `remote.workdir` (default: the same path as here)."""
        if not PurePosixPath(self._workdir).is_absolute():
            raise RexError(
                f"locus remote: `remote.workdir` must be an absolute path, got {self._workdir!r}"
            )
        mapped = map_project_path(cwd, self._root, self._workdir)
        return cwd if mapped is None else mapped

    def agent_env(self, env: Mapping[str, str]) -> str:
        """The request's env minus this machine's PATH/HOME/…; the server's own env stays."""
        return env_script(env, drop=FOREIGN_MACHINE_ENV, value_map={self._root: self._workdir})

    async def connect(self, run_id: str) -> RexConnection:
        """Check the settings (no request yet), then `is_alive`, then `create_session`."""
        remote = self._remote
        if remote is None:
            raise RexError(
                "locus remote: no `remote:` settings (host, port, authToken) under `batch:` in "
                ".pair/config.yaml or the batch manifest"
            )
        token = self.secret
        if not token:
            raise RexError(
                "locus remote: no auth token; set `remote.authToken` to the value "
                "swerex-remote was started with (--auth-token). pairbot never talks to a server "
                "without one, because an empty token turns the server's authentication off."
            )
        try:
            base = remote_base_url(remote.host, insecure=remote.insecure)
        except RemoteUrlError as err:
            raise RexError(str(err)) from None
        where = f"the swerex-remote server at {base}:{remote.port}"
        runtime = _QuietRemoteRuntime(
            logger=_QUIET,
            host=base,
            port=remote.port,
            auth_token=token,
            timeout=self._is_alive_timeout_s,
        )
        try:
            alive = await asyncio.wait_for(
                runtime.is_alive(timeout=self._is_alive_timeout_s), self._is_alive_timeout_s + 5
            )
        except TimeoutError:
            raise RexError(
                f"{where} did not answer /is_alive within {self._is_alive_timeout_s:g} s"
            ) from None
        if not alive.is_alive:
            raise RexError(_not_alive_message(alive.message, where))
        session = f"pairbot-{run_id}"
        await RexConnection(runtime, where=where).call(
            "open a shell session",
            lambda: runtime.create_session(CreateBashSessionRequest(session=session)),
            DEFAULT_REQUEST_TIMEOUT_S,
        )

        async def close_session() -> None:
            # Only our session: POST /close would close every session on a server that other
            # runs (and other tools) may share.
            await runtime.close_session(CloseBashSessionRequest(session=session))

        return RexConnection(runtime, where=where, release=close_session)


_STATUS_CODE = re.compile(r"Status code (\d+)")


def _not_alive_message(message: str, where: str) -> str:
    # swerex's is_alive folds every failure into a message: "Status code 401 from …" for an
    # HTTP error, "Failed to connect to …" plus a traceback for a transport error.
    found = _STATUS_CODE.search(message)
    if found is not None:
        status = int(found.group(1))
        detail = message.partition("Message: ")[2].strip() or "no detail"
        return _describe(_ServerError(status, detail), where)
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    reason = lines[-1] if lines else "no answer"
    return (
        f"cannot reach {where} ({reason}); check that swerex-remote is running there and "
        "that `remote.host` and `remote.port` are right"
    )


# --- the runtime ------------------------------------------------------------------------------


@dataclass
class _Launched:
    run_dir: str
    run_as: RunAs | None = None
    swept: bool = False


class _Collector:
    """Forwards events and remembers the stdout lines for the result (token redacted)."""

    def __init__(self, on_event: EventSink, redact: Callable[[str], str]) -> None:
        self.lines: list[str] = []
        self._on_event = on_event
        self.redact = redact

    def line(self, line: str) -> None:
        line = self.redact(line)
        self.lines.append(line)
        self._on_event(AgentEvent(kind="stdout", line=line))

    def error(self, message: str) -> None:
        self._on_event(AgentEvent(kind="error", message=self.redact(message)))

    def exit(self, exit_code: int | None) -> None:
        self._on_event(AgentEvent(kind="exit", exit_code=exit_code))


class RexRuntime:
    """Runs one agent per `spawn` through a swerex runtime at `locus` (see module docstring)."""

    def __init__(
        self,
        locus: RexLocus,
        *,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        lost_contact_s: float = DEFAULT_LOST_CONTACT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self._locus = locus
        self._poll_interval_s = poll_interval_s
        self._kill_grace_s = kill_grace_s
        self._request_timeout_s = request_timeout_s
        self._lost_contact_s = lost_contact_s
        self._start_timeout_s = start_timeout_s

    @property
    def locus(self) -> Locus:
        """Where this runtime runs agents."""
        return self._locus.name

    async def spawn(self, request: AgentSpawnRequest, on_event: EventSink) -> AgentSpawnResult:
        """Start the agent, stream its stdout lines to `on_event`, and return how it ended."""
        events = _Collector(on_event, _redactor(self._locus.secret))
        run_id = uuid.uuid4().hex[:12]
        connection: RexConnection | None = None
        launched: _Launched | None = None
        try:
            cwd = self._locus.agent_cwd(request.cwd)
            connection = await self._connect(run_id)
            launched = await self._make_run_dir(connection, request.run_as)
            await self._launch(connection, launched, request, cwd)
            return await self._follow(connection, launched, request, events)
        except RexError as err:
            return self._failed(err, events)
        finally:
            if connection is not None:
                if launched is not None and not launched.swept:
                    await self._abandon(connection, launched)
                await connection.release()

    async def _connect(self, run_id: str) -> RexConnection:
        try:
            return await self._locus.connect(run_id)
        except RexError:
            raise
        except Exception as exc:  # a failure swerex did not fold into a response
            raise RexError(f"could not start the {self._locus.name} runtime: {exc}") from None

    def _failed(self, err: RexError, events: _Collector) -> AgentSpawnResult:
        exit_code = 1 if err.started else START_FAILURE_EXIT_CODE
        message = events.redact(f"pairbot: {err}")
        events.error(message)
        events.exit(exit_code)
        return AgentSpawnResult(
            exit_code=exit_code, signal=None, stdout="\n".join(events.lines), stderr=message + "\n"
        )

    async def _make_run_dir(self, connection: RexConnection, run_as: RunAs | None) -> _Launched:
        # mktemp: a fresh 0700 directory, so the env file is private before it is even written.
        # Another OS user cannot reach pairbot's own TMPDIR (often private): /tmp it is.
        parent = "/tmp" if run_as is not None else "${TMPDIR:-/tmp}"  # noqa: S108
        made = await connection.execute(
            "create the run directory",
            f'mktemp -d "{parent}/pairbot-run-XXXXXXXXXX"',
            self._request_timeout_s,
        )
        run_dir = made.stdout.strip()
        if not PurePosixPath(run_dir).is_absolute():
            raise RexError(f"could not create the run directory: mktemp printed {run_dir!r}")
        return _Launched(run_dir, run_as)

    async def _launch(
        self, connection: RexConnection, launched: _Launched, request: AgentSpawnRequest, cwd: str
    ) -> None:
        timeout = self._request_timeout_s
        run_dir = launched.run_dir
        contain = request.contain(run_dir) if request.contain is not None else ()
        files = {
            "prompt": request.instructions,
            "env": self._locus.agent_env(request.env),
            "run": launcher_script(
                run_dir, cwd, (request.command, *request.args), record_group=contain == ()
            ),
        }
        for name, text in files.items():
            encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
            await connection.write_file(
                f"write the agent's {name} file", f"{run_dir}/{name}.b64", encoded, timeout
            )
        script = _launch_command(
            run_dir, isolated_env=self._locus.isolated_env, run_as=launched.run_as, contain=contain
        )
        await connection.execute("start the agent", script, timeout)

    async def _follow(
        self,
        connection: RexConnection,
        launched: _Launched,
        request: AgentSpawnRequest,
        events: _Collector,
    ) -> AgentSpawnResult:
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + request.timeout_ms / 1000
        last_contact = started
        assembler = LineAssembler()
        cursor = 0
        sent: Literal["SIGTERM", "SIGKILL"] | None = None
        sent_at = 0.0
        poll = _Poll("starting", None, b"")
        polls = 0
        while True:
            try:
                poll = await self._poll(connection, launched, cursor)
            except RexError as err:
                if loop.time() - last_contact > self._lost_contact_s:
                    raise RexError(
                        f"lost contact with the agent for over {self._lost_contact_s:g} s "
                        f"({err}); it may still be running",
                        started=True,
                    ) from None
                await asyncio.sleep(self._poll_interval_s)
                continue
            last_contact = loop.time()
            if poll.state == "gone":
                raise RexError(
                    f"the agent's run directory {launched.run_dir} vanished while it ran",
                    started=True,
                )
            cursor += len(poll.data)
            for line in assembler.feed(poll.data):
                events.line(line)
            if len(poll.data) >= _READ_CAP_BYTES:
                continue  # more bytes are waiting: read them before sleeping
            if poll.status is not None or poll.state == "dead":
                break
            now = loop.time()
            if poll.state == "starting" and now - started > self._start_timeout_s:
                stderr = await self._finish(connection, launched, sweep=False, log="launcher.log")
                raise RexError(
                    f"the agent launcher did not start within {self._start_timeout_s:g} s: "
                    f"{stderr.strip()[-500:] or 'no output'}",
                    started=False,
                )
            if sent is None and now >= deadline:
                await self._signal(connection, launched, "TERM")
                sent, sent_at = "SIGTERM", now
            elif sent == "SIGTERM" and now >= sent_at + self._kill_grace_s:
                await self._signal(connection, launched, "KILL")
                sent, sent_at = "SIGKILL", now
            elif sent == "SIGKILL" and now >= sent_at + self._kill_grace_s:
                break  # the group is dead but unreaped (zombies); nothing more will come
            wake = deadline if sent is None else sent_at + self._kill_grace_s
            # Quick polls first, doubling up to the interval: a short step (a report, a check)
            # ends in tens of milliseconds, not a whole interval; a long one polls as before.
            polls += 1
            interval = min(self._poll_interval_s, _FIRST_POLL_S * 2**polls)
            await asyncio.sleep(max(0.0, min(interval, wake - now)))

        for line in assembler.finish():
            events.line(line)
        stderr = events.redact(await self._finish(connection, launched, sweep=poll.state != "dead"))

        exit_code: int | None
        ended_by: str | None
        if sent is not None:
            exit_code, ended_by = None, sent
            note = f"pairbot: agent timed out after {request.timeout_ms} ms; sent SIGTERM"
            if sent == "SIGKILL":
                note += f", then SIGKILL after {self._kill_grace_s:g} s grace"
            events.error(note)
            if stderr and not stderr.endswith("\n"):
                stderr += "\n"
            stderr += note + "\n"
        elif poll.status is not None:
            exit_code, ended_by = exit_from_status(poll.status)
        else:
            raise RexError(
                "the agent's processes vanished without an exit status (killed from outside "
                f"pairbot?); its stderr: {stderr.strip()[-500:] or 'empty'}",
                started=True,
            )
        events.exit(exit_code)
        return AgentSpawnResult(
            exit_code=exit_code, signal=ended_by, stdout="\n".join(events.lines), stderr=stderr
        )

    async def _poll(self, connection: RexConnection, launched: _Launched, cursor: int) -> _Poll:
        response = await connection.execute(
            "read the agent's output",
            as_agent(launched.run_as, _poll_command(launched.run_dir, cursor)),
            self._request_timeout_s,
        )
        try:
            return _parse_poll(response.stdout)
        except ValueError as exc:  # binascii.Error is a ValueError
            raise RexError(f"could not decode the agent's output: {exc}", started=True) from None

    async def _signal(
        self, connection: RexConnection, launched: _Launched, sig: Literal["TERM", "KILL"]
    ) -> None:
        script = as_agent(launched.run_as, _signal_command(launched.run_dir, sig)) + " || true"
        await connection.execute(f"send SIG{sig} to the agent", script, self._request_timeout_s)

    async def _finish(
        self, connection: RexConnection, launched: _Launched, *, sweep: bool, log: str = "err.log"
    ) -> str:
        """Sweep the group (if it may live), read a log's tail, remove the run directory."""
        response = await connection.execute(
            "collect the agent's stderr",
            as_agent(launched.run_as, _finish_command(launched.run_dir, sweep=sweep, log=log)),
            self._request_timeout_s,
        )
        launched.swept = True
        return _b64decode(response.stdout).decode("utf-8", errors="replace")

    async def _abandon(self, connection: RexConnection, launched: _Launched) -> None:
        # A failure or a cancellation left the agent behind: stop it and remove its files.
        launched.swept = True
        script = as_agent(launched.run_as, _finish_command(launched.run_dir, sweep=True))
        with contextlib.suppress(RexError):  # unreachable: nothing more can be done from here
            await connection.execute("clean up", script, _CLEANUP_TIMEOUT_S)
