"""The worker's own process (`PAIR_WORKER_PROCESS=own`): claims and runs the App's jobs.

    python -m app.web.worker_child --fd N --parent PID     started by app.web.worker_process,
                                                          its recipe pickled on stdin

It is the App's `Service` with its edge off: the same job handler, worker and ticker, on a
store connection, GitHub sessions and write pacer of its own, no HTTP server and no catch-up
(the edge's process keeps those). A byte on the socket `--fd` wakes its worker; it answers
`R` there once the worker runs; the socket's end-of-file, SIGTERM or SIGINT stop it, letting
running jobs finish for up to the worker's drain time. It dies with its parent
(`PR_SET_PDEATHSIG`), so no orphan is left when the edge's process is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import pickle
import signal
import socket
import sys
import time
from collections.abc import Sequence

import uvloop

from app.store.factory import make_store
from app.web.app import github_forges
from app.web.events import route_github
from app.web.forge import AzureForges
from app.web.service import Service
from app.web.worker_process import READY, WorkerParts, WorkerRecipe

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# The worker's process yields the CPU to the edge's: on a busy machine the kernel runs the
# process answering a delivery first, and the jobs (whose answers nobody waits on) take the
# rest. Inherited by what a job starts (an agent's step, its tests).
NICENESS = 5


def die_with_parent(parent: int) -> None:
    """SIGTERM to this process when its parent dies (Linux); gone already: exit now."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request was made
        raise SystemExit(0)


async def serve_jobs(recipe: WorkerRecipe, sock: socket.socket) -> None:
    """Run the worker until stopped (see the module docstring)."""
    settings = recipe.settings
    url = settings.store_url
    store = make_store(
        settings.store, url.get_secret_value() if url else None, lease_s=settings.store_lease_s
    )
    parts = recipe.parts(settings, store) if recipe.parts is not None else WorkerParts()
    service = Service(
        settings,
        store=store,
        github=parts.github if parts.github is not None else github_forges(settings),
        azure=AzureForges(settings.hosts, settings.root),
        executor=parts.executor,
        clock=time.monotonic,
        after_body=None,
        poll_s=recipe.poll_s,
        tick=parts.tick,
        github_router=route_github,
        hook_deliveries=None,  # the catch-up is the edge's
        role="runs jobs in the worker's own process",
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    sock.setblocking(False)

    def readable() -> None:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            service.worker.wake()
        else:  # the edge's process is gone, or stops us
            stop.set()

    async with service.lifespan(None):  # type: ignore[arg-type]  # the app is not used
        loop.add_reader(sock.fileno(), readable)
        with contextlib.suppress(OSError):
            sock.send(READY)
        service.worker.wake()  # jobs queued before this worker ran
        await stop.wait()
        loop.remove_reader(sock.fileno())
    sock.close()


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(list(argv))
    die_with_parent(args.parent)
    os.nice(NICENESS)
    recipe = pickle.load(sys.stdin.buffer)  # noqa: S301 - written by our parent, over a pipe
    if not isinstance(recipe, WorkerRecipe):
        raise SystemExit("pairbot worker: stdin did not hold a WorkerRecipe")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    sock = socket.socket(fileno=args.fd)
    uvloop.run(serve_jobs(recipe, sock))  # the loop uvicorn's "auto" picks for the edge
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
