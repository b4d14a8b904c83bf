"""The load generator of the webhook benchmarks: a small keep-alive HTTP/1.1 client on asyncio
streams (cheap on uvloop, so the driver takes little from the servers), closed-loop (`max_rate`)
and open-loop (`fixed_rate`) runs, what each measured (`Measured`), a process's CPU time from
/proc (`cpu_seconds`), and its event loop's time on a CPU and waiting for one
(`loop_schedule`). benchmarks/webhook_load.py, command_path.py and edge_targets.py drive their
servers with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) the process `pid` has used; 0 without /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def loop_schedule(pid: int) -> tuple[float, float]:
    """Seconds the process's main thread (a served App's event loop) has run on a CPU, and
    seconds it has waited, runnable, for one (the scheduler's /proc/<pid>/task/<pid>/schedstat);
    (0, 0) without it. Over a run they split its wall time into working, waiting for a CPU
    other tasks held, and idle."""
    try:
        running, waiting, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(running) / 1e9, int(waiting) / 1e9


def descendants(pid: int) -> list[int]:
    """`pid`'s children, theirs, and so on (from /proc; none without it)."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and of its live descendants: a served App is its edge's process and
    its worker's (app.web.worker_process)."""
    return sum(cpu_seconds(each) for each in (pid, *descendants(pid)))


class Connection:
    """One keep-alive HTTP/1.1 connection: send a request, read one response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, request: bytes) -> int:
        self.writer.write(request)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length:
            await self.reader.readexactly(length)
        return status

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


@dataclass(frozen=True)
class Measured:
    """One run against one server."""

    requests: int
    seconds: float
    latencies_ms: tuple[float, ...]
    failures: int
    server_cpu_s: float = 0.0  # the server process's CPU time during the run
    driver_cpu_s: float = 0.0  # this process's
    jobs_done: int | None = None  # the App's jobs finished during the run (of `requests`)
    drain_s: float | None = None  # then how long until every job was done

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * self.server_cpu_s / self.requests if self.requests else 0.0

    def busy(self, cpu_s: float) -> float:
        """`cpu_s` as a share of the run's wall time, in %."""
        return 100 * cpu_s / self.seconds if self.seconds > 0 else 0.0

    @property
    def end_to_end(self) -> float | None:
        """Deliveries answered and their jobs run, per second of run plus drain."""
        if self.drain_s is None:
            return None
        return self.requests / (self.seconds + self.drain_s)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return float("nan")
        index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
        return ordered[index]


def pooled_measures(measured: Sequence[Measured]) -> Measured:
    """Rounds of one server and kind as one measure: their requests, wall time, latencies and
    failures added up (a benchmark interleaving servers round by round pools each one's)."""
    return Measured(
        requests=sum(m.requests for m in measured),
        seconds=sum(m.seconds for m in measured),
        latencies_ms=tuple(ms for m in measured for ms in m.latencies_ms),
        failures=sum(m.failures for m in measured),
    )


async def wait_ready(port: int, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while True:
        try:
            connection = await Connection.open(port)
            await connection.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def max_rate(
    port: int | Sequence[int], requests: Sequence[bytes], concurrency: int
) -> Measured:
    """Closed loop: `concurrency` connections, each sends its next request when answered.
    Several ports: the connections are spread over them in turn (replicas)."""
    ports = [port] if isinstance(port, int) else list(port)
    connections = [await Connection.open(ports[i % len(ports)]) for i in range(concurrency)]
    queue = iter(requests)
    latencies: list[float] = []
    failures = 0

    async def worker(connection: Connection) -> None:
        nonlocal failures
        for request in queue:
            began = time.perf_counter()
            status = await connection.send(request)
            latencies.append((time.perf_counter() - began) * 1000)
            failures += not 200 <= status < 300

    began = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    seconds = time.perf_counter() - began
    for connection in connections:
        await connection.close()
    return Measured(len(latencies), seconds, tuple(latencies), failures)


async def fixed_rate(
    port: int | Sequence[int], requests: Sequence[bytes], rate: float, connections: int = 16
) -> Measured:
    """Open loop: request i is due at start + i / rate; latency counts from when it was due (a
    late send counts). Several ports: the connections are spread over them (replicas)."""
    ports = [port] if isinstance(port, int) else list(port)
    pool: asyncio.Queue[Connection] = asyncio.Queue()
    for i in range(connections):
        pool.put_nowait(await Connection.open(ports[i % len(ports)]))
    latencies: list[float] = []
    failures = 0
    start = time.perf_counter() + 0.05

    async def one(index: int, request: bytes) -> None:
        nonlocal failures
        due = start + index / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        connection = await pool.get()
        try:
            status = await connection.send(request)
        finally:
            pool.put_nowait(connection)
        latencies.append((time.perf_counter() - due) * 1000)
        failures += not 200 <= status < 300

    await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
    seconds = time.perf_counter() - start
    while not pool.empty():
        await pool.get_nowait().close()
    return Measured(len(latencies), seconds, tuple(latencies), failures)
