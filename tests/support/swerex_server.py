"""A real `swerex-remote` server for tests: loopback only, always with a non-empty token.

`swerex_server()` starts the venv's `swerex-remote` console script as a subprocess on a free
127.0.0.1 port with a random `--auth-token`, waits until `GET /is_alive` answers 200 with that
token, yields where it listens, and kills the server (and anything it started) at the end.
The server binds 0.0.0.0 and skips auth with an empty token by default (CONVENTIONS, traps),
so both are always passed explicitly here.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from app.settings import RemoteSettings

SWEREX_REMOTE = Path(sys.executable).parent / "swerex-remote"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class SwerexServer:
    """Where a test server listens and the token it accepts."""

    port: int
    token: str
    log: Path
    pid: int  # the server's process, leader of its own process group

    def kill(self) -> None:
        """Kill the server now (a test of a server dying mid-run); idempotent."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def settings(self, *, token: str | None = None, **extra: object) -> RemoteSettings:
        """`RemoteSettings` for this server (another `token` to test refusals)."""
        return RemoteSettings.model_validate(
            {
                "host": HOST,
                "port": self.port,
                "auth_token": SecretStr(self.token if token is None else token),
                **extra,
            }
        )


def free_port() -> int:
    """A TCP port nothing listens on right now (bound and released on loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _alive(port: int, token: str) -> bool:
    request = urllib.request.Request(  # a fixed http://127.0.0.1 URL
        f"http://{HOST}:{port}/is_alive", headers={"X-API-Key": token}
    )
    try:
        with urllib.request.urlopen(request, timeout=1) as response:  # noqa: S310
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@contextlib.contextmanager
def swerex_server(
    log_dir: Path,
    *,
    startup_timeout_s: float = 30.0,
    path: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[SwerexServer]:
    """Run `swerex-remote` on 127.0.0.1 with a random token for the `with` block.

    `path` goes in front of the server's PATH (the directory of an agent CLI the server has
    installed) and `env` over its environment (a HOME of its own): a remote agent gets the
    server's PATH and HOME, never pairbot's (docs/runtime.md)."""
    token = secrets.token_urlsafe(24)
    server_env = {**os.environ, **(env or {})}
    dirs = [*map(str, path), str(SWEREX_REMOTE.parent), server_env["PATH"]]
    server_env["PATH"] = os.pathsep.join(dirs)
    proc, port, log = _start(log_dir, token, startup_timeout_s, server_env)
    try:
        yield SwerexServer(port=port, token=token, log=log, pid=proc.pid)
    finally:
        _stop(proc)


# A free port is only free until someone binds it: another server of a test running beside
# this one can take it between `free_port()` and swerex-remote's own bind. Such a start dies
# at once, so it is tried again on a new port a bounded number of times.
START_ATTEMPTS = 3


def _start(
    log_dir: Path, token: str, startup_timeout_s: float, env: Mapping[str, str]
) -> tuple[subprocess.Popen[bytes], int, Path]:
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        log = log_dir / f"swerex-remote-{port}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                # `=` binds the value: a token that starts with `-` (token_urlsafe draws from
                # `A-Za-z0-9-_`, so one start in 64) would otherwise be read as an option.
                [str(SWEREX_REMOTE), "--host", HOST, "--port", str(port), f"--auth-token={token}"],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group, so the kill below reaches its children
                # The server side has pairbot installed (agents report with `pairbot batch report`):
                # the venv's bin directory is on its PATH.
                env=env,
            )
        deadline = time.monotonic() + startup_timeout_s
        try:
            while not _alive(port, token):
                if proc.poll() is not None:
                    if attempt < START_ATTEMPTS and b"address already in use" in log.read_bytes():
                        break
                    raise RuntimeError(f"swerex-remote exited ({proc.returncode}); see {log}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"swerex-remote did not answer within {startup_timeout_s} s")
                time.sleep(0.05)
            else:
                return proc, port, log
        except BaseException:
            _stop(proc)
            raise
    raise AssertionError("unreachable: the last attempt raises")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
