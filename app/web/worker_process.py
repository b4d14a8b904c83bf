"""The App's worker in a process of its own (`PAIR_WORKER_PROCESS=own`), seen from the edge's.

    WorkerProcess(WorkerRecipe(settings, parts))    what `pairbot serve` hands `create_app`

The edge's process answers, verifies, stores and wakes; the worker's (app.web.worker_child)
claims and runs the jobs, with its own store connection, GitHub sessions and write pacer. Its
jobs' CPU (HTTP to GitHub, githubkit's models, JSON) then no longer shares the edge's GIL and
event loop.

- **Start**: `python -m app.web.worker_child` (a fresh interpreter: never a `fork` of a process
  that has threads), after the edge opened and migrated the store; its recipe — the settings
  and an importable factory of its executor and tick — is pickled to its stdin, so no secret
  shows in its argv or environment beyond what the edge's own had.
- **Wake**: one end of a Unix socket pair is the child's. The edge writes a byte for each turn
  of its loop in which it queued jobs (a group commit answers a burst together; never blocking:
  a full buffer already holds a wake-up); the child's worker wakes at once, and its poll
  (`poll_s`) stays the backstop. The child writes `R` once its worker runs.
- **Health and restart**: the socket reaching end-of-file is the child's death, seen at once.
  `/healthz` is 503 from then until a new child says it runs (after 0.5 s, doubling to 30 s
  for a child that keeps dying young); the jobs the dead one held are queued again by the new
  one's `Store.recover` — only the worker's process recovers, never the edge.
- **Stop**: SIGTERM to the child, which lets its running jobs finish for up to their drain
  time; killed if it is still there `stop_s` later.
- **No orphan**: the child asks the kernel for SIGTERM when its parent dies
  (`PR_SET_PDEATHSIG`), and stops when the socket reaches end-of-file (the edge's process
  gone, however).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from app.store.base import Store
from app.web.settings import AppSettings

if TYPE_CHECKING:
    from app.web.forge import Forges
    from app.web.handling import Executor
    from app.web.ticker import Tick

log = logging.getLogger(__name__)

READY = b"R"
WAKE = b"w"
FIRST_RESTART_S = 0.5
LAST_RESTART_S = 30.0
# A child that ran this long before dying was not dying young: its successor starts soon.
YOUNG_S = 60.0


@dataclass(frozen=True)
class WorkerParts:
    """What the worker's process runs its jobs with, beside the settings: the executor
    (`execution: worker`), the tick, and the GitHub forges (None: the App's own, from the
    settings)."""

    executor: Executor | None = None
    tick: Tick | None = None
    github: Forges | None = None


@dataclass(frozen=True)
class WorkerRecipe:
    """What the child is built from, pickled to it: `parts(settings, store)` builds its
    `WorkerParts` there (an importable function or a `functools.partial` of one)."""

    settings: AppSettings
    parts: Callable[[AppSettings, Store], WorkerParts] | None = None
    poll_s: float = 1.0


State = Literal["stopped", "starting", "running", "restarting"]


class WorkerProcess:
    """The worker's process, as the edge's `Service` holds it (in place of a `Worker`)."""

    def __init__(self, recipe: WorkerRecipe, *, stop_s: float = 20.0) -> None:
        self.recipe = recipe
        self.stop_s = stop_s
        self.state: State = "stopped"
        self.restarts = 0
        self.pid: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._watch: asyncio.Task[None] | None = None
        self._stopping = False
        self._wake_due = False

    @property
    def healthy(self) -> bool:
        """The child runs its worker."""
        return self.state == "running"

    def wake(self) -> None:
        """A job was queued: tell the child, once for all the jobs queued in this turn of the
        loop (a group commit answers a burst's deliveries together: one byte, not one each)."""
        if self._wake_due:
            return
        self._wake_due = True
        asyncio.get_running_loop().call_soon(self._send_wake)

    def _send_wake(self) -> None:
        self._wake_due = False
        sock = self._sock
        if sock is None:
            return
        with contextlib.suppress(BlockingIOError, OSError):
            sock.send(WAKE)  # never waits: a full buffer already holds a wake-up

    async def start(self) -> None:
        self._stopping = False
        self._spawn()
        self._watch = asyncio.create_task(self._watch_child(), name="pairbot-worker-process")

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after `stop_s`; nothing left behind."""
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self._end_child()
        self.state = "stopped"

    # -- the child ----------------------------------------------------------------------------

    def _spawn(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "app.web.worker_child",
                    "--fd",
                    str(theirs.fileno()),
                    "--parent",
                    str(os.getpid()),
                ],
                stdin=subprocess.PIPE,
                pass_fds=[theirs.fileno()],
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        assert process.stdin is not None  # noqa: S101 - stdin=PIPE
        try:
            # A few kilobytes: within the pipe's buffer, so this never waits for the child.
            process.stdin.write(pickle.dumps(self.recipe))
            process.stdin.close()
        except OSError:
            pass  # the child died at once: its socket's end-of-file says so
        ours.setblocking(False)
        self._process, self._sock, self.pid = process, ours, process.pid
        self.state = "starting"
        log.info("the worker runs in process %d", process.pid)

    async def _watch_child(self) -> None:
        delay = FIRST_RESTART_S
        while not self._stopping:
            began = time.monotonic()
            code = await self._until_gone()
            if self._stopping:
                return
            self.state = "restarting"
            if time.monotonic() - began >= YOUNG_S:
                delay = FIRST_RESTART_S
            log.error(
                "the worker's process %s exited (%s); /healthz answers 503 until a new one runs, "
                "in %.1f s",
                self.pid,
                _exit_text(code),
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(LAST_RESTART_S, delay * 2)
            while not self._respawned():
                await asyncio.sleep(delay)  # the machine refused a process: try again later
                delay = min(LAST_RESTART_S, delay * 2)
            self.restarts += 1

    def _respawned(self) -> bool:
        try:
            self._spawn()
        except OSError as err:
            log.error("the worker's process could not be started: %s", err)
            return False
        return True

    async def _until_gone(self) -> int | None:
        """Read the child's socket: `R` is its worker running; end-of-file its death. Its
        exit code, once reaped."""
        loop = asyncio.get_running_loop()
        sock, process = self._sock, self._process
        assert sock is not None and process is not None  # noqa: S101 - spawned first
        while True:
            try:
                data = await loop.sock_recv(sock, 64)
            except OSError:
                data = b""
            if not data:
                break
            if READY in data:
                self.state = "running"
        sock.close()
        self._sock = None
        return await asyncio.to_thread(process.wait)

    async def _end_child(self) -> None:
        process, sock = self._process, self._sock
        self._process = self._sock = None
        if sock is not None:
            sock.close()
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, self.stop_s)
        except subprocess.TimeoutExpired:
            log.error(
                "the worker's process %d did not stop in %.0f s: killed", process.pid, self.stop_s
            )
            process.kill()
            await asyncio.to_thread(process.wait)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown status"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def describe(worker: Any) -> dict[str, object]:
    """What /healthz says of the worker: its state, and its restarts when it is a process."""
    if isinstance(worker, WorkerProcess):
        return {"worker": worker.state, "process": worker.pid, "restarts": worker.restarts}
    return {"worker": "running" if worker.healthy else "stopped"}
