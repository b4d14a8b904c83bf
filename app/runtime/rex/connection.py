"""The swerex session: reach a swerex runtime, call it with a deadline, let go of it.

`RexConnection` wraps one started swerex runtime (local, a container's, or a swerex-remote
server's): every call has a deadline, every failure becomes a `RexError` naming where it
happened (`describe`), and `release` closes what the locus opened, best effort.

swerex logs through rich to the terminal and its remote client `print()`s on a 511; every
swerex object here gets a silent logger (`QUIET`), the remote client is the quiet subclass
below, and SWE_REX_LOG_STREAM_LEVEL is defaulted to CRITICAL before swerex is imported (the
package's `__init__`) for the loggers swerex creates on its
own, so only our events reach the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn, TypeVar

import aiohttp
from swerex.runtime.abstract import (
    AbstractRuntime,
    Command,
    CommandResponse,
    WriteFileRequest,
    _ExceptionTransfer,
)
from swerex.runtime.remote import RemoteRuntime

from app.runtime.rex.errors import RexError

__all__ = [
    "CLEANUP_TIMEOUT_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "QUIET",
    "QuietRemoteRuntime",
    "RexConnection",
    "ServerError",
    "describe",
    "run_blocking",
]

DEFAULT_REQUEST_TIMEOUT_S: Final = 30.0
CLEANUP_TIMEOUT_S: Final = 10.0


def _silent_logger() -> logging.Logger:
    logger = logging.getLogger("pairbot.swerex")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.setLevel(logging.CRITICAL + 1)  # above CRITICAL: nothing at all
    return logger


QUIET: Final = _silent_logger()


class ServerError(Exception):
    """swerex-remote answered with an error status (511 carries a swerexception)."""

    def __init__(self, status: int, detail: str, class_path: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.class_path = class_path


class QuietRemoteRuntime(RemoteRuntime):
    """swerex's RemoteRuntime minus its console output.

    Upstream logs error bodies at CRITICAL and `print()`s the class of a transferred exception
    (swerex/runtime/remote.py, `_handle_transfer_exception`); here both become `ServerError`.
    """

    def _handle_transfer_exception(self, exc_transfer: _ExceptionTransfer) -> NoReturn:
        raise ServerError(511, exc_transfer.message, exc_transfer.class_path)

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
                raise ServerError(
                    511, str(transfer.get("message", "")), str(transfer.get("class_path", ""))
                )
        detail = data.get("detail") if isinstance(data, dict) else None
        raise ServerError(response.status, str(detail or response.reason or ""))


_T = TypeVar("_T")


def run_blocking(factory: Callable[[], Awaitable[_T]]) -> _T:
    # For swerex coroutines that block (LocalRuntime runs subprocess.run, DockerDeployment pulls
    # images and sleeps): run them on a worker thread's own loop, not on the caller's.
    async def call() -> _T:
        return await factory()

    return asyncio.run(call())


def describe(exc: BaseException, where: str) -> str:
    if isinstance(exc, ServerError):
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
                return await asyncio.wait_for(asyncio.to_thread(run_blocking, factory), timeout_s)
            return await asyncio.wait_for(factory(), timeout_s)
        except Exception as exc:  # every swerex/aiohttp/OS failure is reported, never raised
            raise RexError(f"could not {what}: {describe(exc, self.where)}") from None

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
            await asyncio.wait_for(release(), CLEANUP_TIMEOUT_S)
