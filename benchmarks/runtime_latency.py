"""How fast the SWE-ReX runtime streams an agent's lines, and what a spawn costs.

    python benchmarks/runtime_latency.py              300 lines, 10 spawns per runtime
    python benchmarks/runtime_latency.py --lines 600 --repeats 20

For the `local` locus (swerex's LocalRuntime in-process) and the `remote` locus (a real
`swerex-remote` started on 127.0.0.1 with a random token, as the tests do), side by side in one
run:

    line delay   an agent prints `time.time()` stamps, flushed, every 13 ms; the delay is the
                 time from the stamp to the line reaching the event callback. Median and p95
                 with the default 300 ms poll. Target: p95 < 400 ms.
    overhead     a trivial agent (`python -c pass`), spawn → exit, median of `--repeats`,
                 against plain `subprocess.run` of the same command (and the plain-process
                 `ProcessRuntime` for reference), printed as ratios. With a 300 ms poll the
                 exit is seen on the first poll after the agent ends, so the cost is roughly
                 one poll interval plus a handful of swerex calls; a 20 ms poll shows the
                 swerex calls alone.

Everything runs on this machine (the remote server on loopback), so the clocks agree.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    # `python benchmarks/runtime_latency.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.agent import AgentEvent, AgentRuntime, AgentSpawnRequest
from app.runtime.process import ProcessRuntime
from app.runtime.rex import DEFAULT_POLL_INTERVAL_S, LocalLocus, RemoteLocus, RexRuntime
from tests.support.swerex_server import SwerexServer, swerex_server

TARGET_P95_S = 0.400
LINE_INTERVAL_S = 0.013  # not a divisor of the poll interval, so stamps land all over it
FAST_POLL_S = 0.02
ENV = {"PYTHONCOERCECLOCALE": "0"}


@dataclass(frozen=True)
class LineDelay:
    """Stamp-to-callback delays of one streaming run."""

    locus: str
    delays_s: list[float]

    @property
    def median_s(self) -> float:
        return statistics.median(self.delays_s)

    @property
    def p95_s(self) -> float:
        return statistics.quantiles(self.delays_s, n=20, method="inclusive")[18]


def _request(code: str, cwd: Path, timeout_ms: int = 120_000) -> AgentSpawnRequest:
    return AgentSpawnRequest(
        command=sys.executable,
        args=("-c", code),
        instructions="",
        cwd=str(cwd),
        env=ENV,
        timeout_ms=timeout_ms,
    )


def measure_line_delay(locus: str, runtime: AgentRuntime, lines: int, cwd: Path) -> LineDelay:
    """Run a stamping agent through `runtime` and collect each line's delay."""
    code = (
        "import sys, time\n"
        f"for i in range({lines}):\n"
        "    sys.stdout.write(f'{time.time()!r}\\n'); sys.stdout.flush()\n"
        f"    time.sleep({LINE_INTERVAL_S})\n"
    )
    delays: list[float] = []

    def on_event(event: AgentEvent) -> None:
        if event.kind == "stdout" and event.line:
            delays.append(time.time() - float(event.line))

    result = asyncio.run(runtime.spawn(_request(code, cwd), on_event))
    if result.exit_code != 0 or len(delays) != lines:
        raise RuntimeError(f"{locus}: stamping agent failed: {result.stderr.strip()}")
    return LineDelay(locus, delays)


def _median_s(run: Callable[[], object], repeats: int) -> float:
    times: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure_overhead(
    runtimes: dict[str, AgentRuntime], repeats: int, cwd: Path
) -> dict[str, float]:
    """Median spawn → exit of `python -c pass` per runtime, plus plain `subprocess.run`."""
    argv = [sys.executable, "-c", "pass"]
    medians = {
        "subprocess.run": _median_s(
            lambda: subprocess.run(argv, check=True, env=ENV, cwd=cwd), repeats
        )
    }
    for name, runtime in runtimes.items():

        def spawn_once(runtime: AgentRuntime = runtime, name: str = name) -> None:
            result = asyncio.run(runtime.spawn(_request("pass", cwd), lambda _: None))
            if result.exit_code != 0:
                raise RuntimeError(f"{name}: trivial agent failed: {result.stderr.strip()}")

        medians[name] = _median_s(spawn_once, repeats)
    return medians


def _report_delays(rows: list[LineDelay], out: Callable[[str], None]) -> None:
    out(f"line delay, {DEFAULT_POLL_INTERVAL_S * 1000:.0f} ms poll (stamp → event callback)")
    out(f"  {'locus':8} {'lines':>6} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}  target")
    for row in rows:
        verdict = "ok" if row.p95_s < TARGET_P95_S else "MISSED"
        out(
            f"  {row.locus:8} {len(row.delays_s):6d} {row.median_s * 1000:10.1f} "
            f"{row.p95_s * 1000:8.1f} {max(row.delays_s) * 1000:8.1f}  "
            f"p95 < {TARGET_P95_S * 1000:.0f} ms: {verdict}"
        )


def _report_overhead(medians: dict[str, float], repeats: int, out: Callable[[str], None]) -> None:
    floor = medians["subprocess.run"]
    out(f"spawn → exit of `python -c pass`, median of {repeats} (side by side, one run)")
    out(f"  {'runtime':34} {'median ms':>10} {'x subprocess.run':>17}")
    for name, seconds in medians.items():
        out(f"  {name:34} {seconds * 1000:10.1f} {seconds / floor:17.1f}")


def main(
    *, lines: int = 300, repeats: int = 10, out: Callable[[str], None] = print
) -> tuple[list[LineDelay], dict[str, float]]:
    """Measure both loci side by side and print the tables; returns the raw figures."""
    with (
        tempfile.TemporaryDirectory(prefix="pairbot-bench-") as scratch,
        swerex_server(Path(scratch)) as server,
    ):
        cwd = Path(scratch)
        delays = _line_delays(server, lines, cwd)
        medians = measure_overhead(_overhead_runtimes(server, cwd), repeats, cwd)
    _report_delays(delays, out)
    out("")
    _report_overhead(medians, repeats, out)
    return delays, medians


def _line_delays(server: SwerexServer, lines: int, cwd: Path) -> list[LineDelay]:
    return [
        measure_line_delay("local", RexRuntime(LocalLocus()), lines, cwd),
        measure_line_delay("remote", RexRuntime(RemoteLocus(server.settings(), cwd)), lines, cwd),
    ]


def _overhead_runtimes(server: SwerexServer, cwd: Path) -> dict[str, AgentRuntime]:
    remote = server.settings()
    return {
        "ProcessRuntime (plain process)": ProcessRuntime(),
        "rex local, 300 ms poll": RexRuntime(LocalLocus()),
        "rex remote, 300 ms poll": RexRuntime(RemoteLocus(remote, cwd)),
        "rex local, 20 ms poll": RexRuntime(LocalLocus(), poll_interval_s=FAST_POLL_S),
        "rex remote, 20 ms poll": RexRuntime(RemoteLocus(remote, cwd), poll_interval_s=FAST_POLL_S),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=10)
    arguments = parser.parse_args()
    main(lines=arguments.lines, repeats=arguments.repeats)
