"""Signed deliveries through a flood of idle or slow connections, beside a baseline without one.

    python benchmarks/edge_flood.py                        10,000 idle, then 10,000 slow
    python benchmarks/edge_flood.py --connections 2000 --probes 20 --runs 3

`pairbot serve --dev` (the installed console script, as an operator runs it, with its default
limits) serves on loopback, and one run measures, in order:

    baseline   an honest signed delivery (the real `issue_comment` example, a new delivery id
               each) and `/healthz`, one at a time, each on a new connection as GitHub opens one
    idle       the same, while `--connections` connections are open that send nothing
    slow       the same, while `--connections` connections send their headers a byte every
               `--every` seconds (slowloris: the headers never end)

Each flooding connection the server closes is opened again `--reopen` seconds later, so the
flood stays at its size however many the server sheds. For each phase: delivery and `/healthz`
latency p50 / p99 (a probe counts only if answered 2xx within `--timeout`, GitHub's 10 s), the
probes that failed, and the server's open file descriptors (entries of /proc/<pid>/fd, sampled
every 50 ms: the peak) against its cap on connections. Wall-clock numbers depend on the
machine (the flood runs on it too), so compare the columns of one run.
tests/web/test_edge_flood.py runs the same floods, small, and asserts what must hold.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import multiprocessing
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python benchmarks/edge_flood.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.web.settings import EdgeLimits
from benchmarks.edge_abuse import Probes, app_server, probe

GITHUB_TIMEOUT_S = 10.0  # GitHub gives up on a delivery not answered within this
_START_S = 120.0  # deadlines against hanging, never measured
_STOP_S = 30.0
# Headers that never end: a header line padded forever, a byte at a time.
SLOW_HEAD = b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 65536


def raise_open_file_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit in this process (the flood's sockets are its
    files); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    return soft


def open_fds(pid: int) -> int:
    """How many file descriptors `pid` has open (entries of /proc/<pid>/fd)."""
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


class FdPeak:
    """Samples a process's open descriptors every 50 ms in a thread while the block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = open_fds(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="fds", daemon=True)

    def __enter__(self) -> FdPeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(_STOP_S)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, open_fds(self.pid))


# -- the flood ------------------------------------------------------------------------------------


_ANSWERS = ("408", "closed", "reset", "other")
_COUNTS = ("opened", "open", "closed_by_server", "connect_errors", *_ANSWERS)


@dataclass
class FloodStats:
    opened: int = 0  # connections the flood opened, reopenings included
    open: int = 0  # open now, as the flood sees it
    closed_by_server: int = 0
    connect_errors: int = 0
    answers: dict[str, int] = field(default_factory=dict)  # what the server said before closing


class Flood:
    """`count` connections to 127.0.0.1:`port` that send nothing (`slow=False`) or endless
    headers a byte every `every_s` seconds, from `__enter__` until `__exit__`; each one the
    server closes is opened again `reopen_s` later (never, with None). They run on an asyncio
    loop in a process of their own, so that the probes' timings in this one never wait for the
    flood's share of the interpreter lock; its counts are shared memory (`stats`)."""

    def __init__(
        self,
        port: int,
        count: int,
        *,
        slow: bool,
        every_s: float = 1.0,
        reopen_s: float | None = 0.0,
    ) -> None:
        self.port = port
        self.count = count
        self.slow = slow
        self.every_s = every_s
        self.reopen_s = reopen_s
        context = multiprocessing.get_context("fork")
        self._counts = context.Array("q", len(_COUNTS), lock=False)
        self._stopping = context.Event()
        self._process = context.Process(target=self._run, name="flood", daemon=True)

    @property
    def stats(self) -> FloodStats:
        counts = dict(zip(_COUNTS, self._counts, strict=True))
        return FloodStats(
            counts["opened"],
            counts["open"],
            counts["closed_by_server"],
            counts["connect_errors"],
            {answer: counts[answer] for answer in _ANSWERS if counts[answer]},
        )

    def __enter__(self) -> Flood:
        self._process.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        self._process.join(_STOP_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(_STOP_S)

    def ramped(self, timeout_s: float = _START_S) -> None:
        """Until every connection of the flood has been opened once (a deadline against
        hanging, never a measured time)."""
        deadline = time.monotonic() + timeout_s
        while self.stats.opened < self.count:
            if time.monotonic() > deadline or not self._process.is_alive():
                raise AssertionError(f"the flood did not ramp up: {self.stats}")
            time.sleep(0.05)

    # -- in the flood's process -------------------------------------------------------------------

    def _count(self, name: str, by: int = 1) -> None:
        self._counts[_COUNTS.index(name)] += by

    def _run(self) -> None:
        run_loop(self._main())

    async def _main(self) -> None:
        tasks = [asyncio.create_task(self._connection()) for _ in range(self.count)]
        await asyncio.to_thread(self._stopping.wait)  # a process's event: wait in a thread
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _connection(self) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                self._count("connect_errors")
                await asyncio.sleep(max(self.reopen_s or 0.0, 0.1))
                continue
            self._count("opened")
            self._count("open")
            try:
                answer = await self._hold(reader, writer)
                self._count("closed_by_server")
                self._count(_status(answer))
            finally:
                self._count("open", -1)
                writer.close()
            if self.reopen_s is None:
                return
            await asyncio.sleep(self.reopen_s)

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """Whatever the server sends until it closes the connection (`reset` on a reset)."""
        closed = asyncio.ensure_future(reader.read())  # until the end of the stream
        try:
            if self.slow:
                for position in range(len(SLOW_HEAD)):
                    if closed.done():
                        break
                    writer.write(SLOW_HEAD[position : position + 1])
                    await asyncio.sleep(self.every_s)
            return await closed
        except OSError:
            return b"reset"
        finally:
            closed.cancel()


def _status(answer: bytes) -> str:
    if answer == b"reset":
        return "reset"
    if not answer:
        return "closed"
    parts = answer.split(b" ", 2)
    status = parts[1].decode() if len(parts) > 1 and answer.startswith(b"HTTP/") else ""
    return status if status in _ANSWERS else "other"


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """`main` on uvloop when installed (a cheaper client: the flood shares the machine)."""
    if importlib.util.find_spec("uvloop"):
        import uvloop  # noqa: PLC0415

        uvloop.run(main)
    else:
        asyncio.run(main)


# -- the run --------------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    probes: Probes
    fd_peak: int
    flood: FloodStats | None = None


def measure(
    server_pid: int,
    url: str,
    probes: int,
    name: str,
    *,
    interval_s: float,
    flood: Flood | None = None,
) -> Phase:
    """`probes` deliveries and /healthz probes, one every `interval_s` (so the phase spans the
    server's deadlines), with the fd peak meanwhile."""
    answered = Probes()
    with FdPeak(server_pid) as fds:
        for _ in range(probes):
            one = probe(url, 1, timeout_s=GITHUB_TIMEOUT_S)
            answered.healthz += one.healthz
            answered.delivery += one.delivery
            answered.failures += one.failures
            time.sleep(interval_s)
    return Phase(name, answered, fds.peak, flood.stats if flood else None)


def main(
    *,
    connections: int = 10_000,
    probes: int = 50,
    every_s: float = 1.0,
    reopen_s: float | None = 0.0,
    interval_s: float = 0.25,
    settle_s: float = 3.0,
    env: dict[str, str] | None = None,
    out: Callable[[str], None] = print,
) -> list[Phase]:
    limit = raise_open_file_limit()
    if limit < connections + 1024:
        raise SystemExit(f"the open-file limit ({limit}) is too low for {connections} connections")
    phases: list[Phase] = []
    with (
        tempfile.TemporaryDirectory(prefix="edge-flood-") as temp,
        app_server(Path(temp), env or {}) as server,
    ):
        pid = server.process.pid
        probe(server.url, 10, timeout_s=5.0)  # warm-up: first requests import and connect
        phases.append(measure(pid, server.url, probes, "baseline", interval_s=interval_s))
        for slow in (False, True):
            with Flood(
                server.port, connections, slow=slow, every_s=every_s, reopen_s=reopen_s
            ) as flood:
                flood.ramped()
                time.sleep(settle_s)  # into the flood's steady state: the server shedding
                name = "slow" if slow else "idle"
                phases.append(
                    measure(pid, server.url, probes, name, interval_s=interval_s, flood=flood)
                )
    cap = EdgeLimits.from_env((env or {}).get).max_connections
    report(phases, connections=connections, every_s=every_s, reopen_s=reopen_s, cap=cap, out=out)
    return phases


def _ms(samples: list[float], quantile: float) -> str:
    if not samples:
        return "—"
    ordered = sorted(samples)
    return f"{ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1000:.1f}"


def report(
    phases: list[Phase],
    *,
    connections: int,
    every_s: float,
    reopen_s: float | None,
    cap: int,
    out: Callable[[str], None],
) -> None:
    reopened = (
        "held, never reopened"
        if reopen_s is None
        else f"each reopened {reopen_s:g} s after the server closes it"
    )
    out(
        f"edge flood: {connections} connections (idle: send nothing; slow: headers a byte every "
        f"{every_s:g} s), {reopened}; server cap "
        f"{cap} connections (PAIR_MAX_CONNECTIONS); probes time out at {GITHUB_TIMEOUT_S:g} s"
    )
    out(f"{'':28}" + "".join(f"{phase.name:>14}" for phase in phases))
    for label, pick in (("delivery", "delivery"), ("healthz", "healthz")):
        for quantile, name in ((0.5, "p50"), (0.99, "p99")):
            row = "".join(f"{_ms(getattr(p.probes, pick), quantile):>14}" for p in phases)
            out(f"{label + ' ' + name + ' ms':28}{row}")
    out(f"{'failed probes':28}" + "".join(f"{len(p.probes.failures):>14}" for p in phases))
    out(f"{'server fds, peak':28}" + "".join(f"{p.fd_peak:>14}" for p in phases))
    for phase in phases:
        if phase.flood is not None:
            stats = phase.flood
            out(
                f"{phase.name} flood: {stats.opened} connections opened, {stats.closed_by_server} "
                f"closed by the server (answers {stats.answers}), {stats.connect_errors} "
                "connect errors"
            )
    if phases and all(p.probes.failures == [] for p in phases):
        out(f"every delivery answered 2xx within {GITHUB_TIMEOUT_S:g} s in every phase")


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--reopen", type=float, default=0.0)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=1)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _arguments(sys.argv[1:])
    for _ in range(args.runs):
        main(
            connections=args.connections,
            probes=args.probes,
            every_s=args.every,
            reopen_s=args.reopen,
            interval_s=args.interval,
            settle_s=args.settle,
        )
