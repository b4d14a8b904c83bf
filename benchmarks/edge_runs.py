"""The measuring half of benchmarks/edge_targets.py: the deliveries it sends, one measured run
(the load's figures and the servers' CPU), and several rounds of one kind added up.

Not run on its own; `python benchmarks/edge_targets.py` drives it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.edge_meters import CpuMeter, drained
from benchmarks.load_client import Measured, fixed_rate, max_rate

CONCURRENCY = 16


@dataclass(frozen=True)
class Run:
    """One measured run: the load's figures, and the CPU of the servers measured."""

    load: Measured
    cpu_s: float  # the measured processes, while the requests were answered
    total_cpu_s: float | None = None  # and until every job they queued was done
    drain_s: float | None = None

    def us_per_request(self, cpu_s: float | None = None) -> float:
        spent = self.cpu_s if cpu_s is None else cpu_s
        return 1e6 * spent / self.load.requests if self.load.requests else 0.0


async def measure(
    port: int,
    requests: Sequence[bytes],
    pids: Callable[[], Sequence[int]],
    *,
    rate: float | None = None,
    open_jobs: Callable[[], int] | None = None,
) -> Run:
    """`requests` to `port` at max rate (or at `rate` a second); with `open_jobs`, also wait
    until the jobs they queued are done, and count the CPU until then."""
    meter = CpuMeter(pids)
    if rate is None:
        load = await max_rate(port, requests, CONCURRENCY)
    else:
        load = await fixed_rate(port, requests, rate, CONCURRENCY)
    cpu_s = meter.used()
    if open_jobs is None:
        return Run(load, cpu_s)
    drain_s = drained(open_jobs)
    return Run(load, cpu_s, total_cpu_s=meter.used(), drain_s=drain_s)


def round_sizes(requests: int, rounds: int) -> list[int]:
    """`requests` split into at most `rounds` shares that add up to it."""
    count = max(1, min(rounds, requests))
    return [requests // count + (1 if i < requests % count else 0) for i in range(count)]


def combined(runs: Sequence[Run]) -> Run:
    """Several runs of one kind as one: their requests, time, latencies and CPU added up."""

    def total(values: Sequence[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    load = Measured(
        requests=sum(run.load.requests for run in runs),
        seconds=sum(run.load.seconds for run in runs),
        latencies_ms=tuple(ms for run in runs for ms in run.load.latencies_ms),
        failures=sum(run.load.failures for run in runs),
    )
    return Run(
        load,
        sum(run.cpu_s for run in runs),
        total_cpu_s=total([run.total_cpu_s for run in runs]),
        drain_s=total([run.drain_s for run in runs]),
    )
