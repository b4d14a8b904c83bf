"""The three loci a `RexRuntime` runs agents at: how each is reached, and how paths and env map.

    local    swerex's LocalRuntime in-process; the agent runs on this machine
    docker   a DockerDeployment (after a `docker info` pre-flight), the project root mounted
             at /workspace
    remote   a RemoteRuntime talking to a swerex-remote server with `X-API-Key`

Each implements `RexLocus`: `connect` starts or reaches the swerex runtime (a `RexConnection`),
`agent_cwd` and `agent_env` say what the request's cwd and environment are on that side.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final, Protocol

from swerex.runtime.abstract import CloseBashSessionRequest, CreateBashSessionRequest
from swerex.runtime.local import LocalRuntime

from app.proc import env_script
from app.runtime.remote_url import RemoteUrlError, remote_base_url
from app.runtime.rex.connection import (
    DEFAULT_REQUEST_TIMEOUT_S,
    QUIET,
    QuietRemoteRuntime,
    RexConnection,
    ServerError,
    describe,
    run_blocking,
)
from app.runtime.rex.errors import RexError
from app.settings import DEFAULT_DOCKER_IMAGE, Locus, RemoteSettings

__all__ = [
    "DEFAULT_DOCKER_PREFLIGHT_TIMEOUT_S",
    "DEFAULT_DOCKER_STARTUP_TIMEOUT_S",
    "DEFAULT_IS_ALIVE_TIMEOUT_S",
    "DOCKER_WORKDIR",
    "FOREIGN_MACHINE_ENV",
    "DockerLocus",
    "LocalLocus",
    "RemoteLocus",
    "RexLocus",
    "docker_preflight",
    "map_project_path",
]

DEFAULT_IS_ALIVE_TIMEOUT_S: Final = 30.0
DEFAULT_DOCKER_PREFLIGHT_TIMEOUT_S: Final = 10.0
DEFAULT_DOCKER_STARTUP_TIMEOUT_S: Final = 180.0

# Where the docker locus bind-mounts the project root inside the container.
DOCKER_WORKDIR: Final = "/workspace"

# Variables that describe this machine, not the one a docker or remote agent runs on: exporting
# them would replace the server's own PATH and HOME with paths that do not exist there (macOS
# also sets a per-user TMPDIR under /var/folders). The shell keeps PWD, OLDPWD and SHLVL itself.
FOREIGN_MACHINE_ENV: Final = frozenset({"PATH", "HOME", "TMPDIR", "PWD", "OLDPWD", "SHLVL"})


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
        runtime = LocalRuntime(logger=QUIET)
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
        """The request's env minus this machine's PATH/HOME/…; the project root → /workspace;
        and `IS_SANDBOX=1`: the agent runs as the container's root, and claude refuses
        full-autonomy (`bypassPermissions`) as root unless told it runs in a deliberate
        sandbox — which the container is, the reason to choose this locus."""
        return env_script(
            {**env, "IS_SANDBOX": "1"},
            drop=FOREIGN_MACHINE_ENV,
            value_map={self._root: DOCKER_WORKDIR},
        )

    async def connect(self, run_id: str) -> RexConnection:
        """Pre-flight, then start the container (on a worker thread: swerex blocks in it)."""
        problem = await docker_preflight(timeout_s=self._preflight_timeout_s)
        if problem is not None:
            raise RexError(problem)
        from swerex.deployment.docker import DockerDeployment  # noqa: PLC0415  # docker only

        deployment = DockerDeployment(
            logger=QUIET,
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
                asyncio.to_thread(run_blocking, start), self._startup_timeout_s + 60
            )
        except Exception as exc:  # image pull, container start, startup timeout
            with contextlib.suppress(Exception):
                await asyncio.to_thread(run_blocking, stop)
            raise RexError(
                f"locus docker: could not start a container from image {self._image!r}: "
                f"{describe(exc, 'docker')}. Check `docker run {self._image}` works and the "
                "image can install swe-rex (it needs network access on first start)."
            ) from None
        # The deployment's own client logs and prints on errors; talk to the same server
        # (port and per-container token) through the quiet one instead.
        config = deployment.runtime._config
        runtime = QuietRemoteRuntime(logger=QUIET, **config.model_dump())
        return RexConnection(
            runtime,
            where=f"the swerex runtime in the {self._image} container",
            release=lambda: asyncio.to_thread(run_blocking, stop),
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
        runtime = QuietRemoteRuntime(
            logger=QUIET,
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
        return describe(ServerError(status, detail), where)
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    reason = lines[-1] if lines else "no answer"
    return (
        f"cannot reach {where} ({reason}); check that swerex-remote is running there and "
        "that `remote.host` and `remote.port` are right"
    )
