"""The webhook edge against its floor: non-command throughput, a duplicate's cost, p99.

    python benchmarks/edge_targets.py                  2,000 requests per run, 5 s at 100/s
    python benchmarks/edge_targets.py --runs 3         three runs in a row, then a summary
    python benchmarks/edge_targets.py --requests 5000 --seconds 10 --latency-ms 20
    python benchmarks/edge_targets.py --profile DIR    also: each server's cProfile in DIR
                                                       (floor.prof, app.prof; CPU of the
                                                       event loop's thread; it slows the
                                                       servers: read that run's ratios as
                                                       indicative)

Three processes on loopback, one after the other measured (never two at once), each as
`pairbot serve` runs it (httptools, uvloop, access log off, INFO logging to a file):

    forge      benchmarks/answering_forge.py: FakeGitHub's real shapes, ETags, minted
               installation tokens; every answer `--latency-ms` late (5 by default)
    floor      read the body, verify X-Hub-Signature-256, parse the JSON, answer 202 — what
               every checking edge must do (benchmarks/webhook_servers.py's floor)
    app        `create_app` as `pairbot serve` builds it, SQLite store in a temp dir, the
               worker in the same process, the production `GitHubForges` against the forge
               (writes unspaced, as in command_path.py)

Deliveries are signed `issue_comment` deliveries of about 16 KB (the corpus example): a
*non-command* one is a comment that addresses no one (nothing to queue, no API call), a
*command* one is `/pair status` (its comment stored on the forge first; durably queued, then
run by the worker against the forge), a *duplicate* is a command delivery sent again with its
delivery id. Printed, each with its target and its baseline from the same run:

    non-command   App throughput / floor throughput at max rate              (>= 0.8)
    duplicate     App CPU per duplicate / App CPU per new non-command delivery (<= 0.3)
    p99           at 100 requests/s, and at max rate with 16 connections     (< 50 ms)

The max-rate runs are split into `ROUNDS` rounds, floor and App alternating within each, and
added up: on a machine shared with other work, one long run of each after the other let a
burst of that work land on one of them only. A server's CPU is read from /proc/<pid>/stat
(user + system, all threads) around each run; the load generator runs on the same cores as the
servers, and its CPU is printed so a run whose client starved the servers can be told apart.

Command deliveries answered and run (CPU per command against a floor making the same API calls,
command p99) and two App replicas on PostgreSQL against one on SQLite are
benchmarks/command_path.py's (`--replicas`): this benchmark sends commands only to have
duplicates of them, and for the p99 of an edge whose worker is busy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.answering_forge import fetch_stats, forge_process
from benchmarks.command_servers import new_key
from benchmarks.deliveries import Deliveries
from benchmarks.edge_meters import CpuMeter, Database, drained, sqlite_jobs, sqlite_open_jobs
from benchmarks.edge_report import RATE, Result, report, summary
from benchmarks.edge_runs import CONCURRENCY, Run, combined, measure, round_sizes
from benchmarks.load_client import max_rate, wait_ready
from benchmarks.webhook_servers import SECRET, Server, server_options, start_server

# command_path.py and command_replicas.py import these from here.
__all__ = ["CpuMeter", "Database", "Result", "main", "sqlite_open_jobs"]

ROUNDS = 4  # the max-rate runs, each split into this many, floor and App alternating
_ROUNDED = ("floor_plain", "app_plain", "app_command", "app_duplicate")
T = TypeVar("T")


@dataclass(frozen=True)
class _Bench:
    """What one benchmark drives: the floor, the App, the forge's port, the deliveries."""

    floor: Server
    app: Server
    forge: int
    made: Deliveries

    def open_jobs(self) -> int:
        assert self.app.store is not None  # start_server gives the App its store
        return sqlite_open_jobs(self.app.store)

    def failed_jobs(self) -> int:
        assert self.app.store is not None
        return sqlite_jobs(self.app.store, "failed")


def _pids(server: Server) -> Callable[[], list[int]]:
    return lambda: [server.process.pid]


async def _warm(bench: _Bench, requests: int) -> None:
    """Both servers up, their caches and connections (the App's token, pools) warm."""
    for server in (bench.floor, bench.app):
        await wait_ready(server.port)
        plain = bench.made.build(min(200, requests), command=False)[0]
        await max_rate(server.port, plain, CONCURRENCY)
    commands = bench.made.build(min(50, requests), command=True)[0]
    await max_rate(bench.app.port, commands, CONCURRENCY)
    drained(bench.open_jobs)


async def _rounds(bench: _Bench, requests: int) -> tuple[dict[str, Run], int]:
    """The max-rate runs, rounds added up; and the forge's requests for the commands."""
    floor, app, made = bench.floor, bench.app, bench.made
    rounds: dict[str, list[Run]] = {name: [] for name in _ROUNDED}
    forge_requests = 0
    for size in round_sizes(requests, ROUNDS):
        # Floor and App alternate, a share of the requests each round: whatever else the
        # machine runs meanwhile weighs on both alike.
        plain = made.build(size, command=False)[0], made.build(size, command=False)[0]
        rounds["floor_plain"].append(await measure(floor.port, plain[0], _pids(floor)))
        rounds["app_plain"].append(await measure(app.port, plain[1], _pids(app)))
        commands = made.build(size, command=True)[0]
        before = fetch_stats(bench.forge)["requests"]
        run = await measure(app.port, commands, _pids(app), open_jobs=bench.open_jobs)
        forge_requests += fetch_stats(bench.forge)["requests"] - before
        rounds["app_command"].append(run)
        # The same requests again: each a delivery id the App has seen.
        rounds["app_duplicate"].append(await measure(app.port, commands, _pids(app)))
    return {name: combined(runs) for name, runs in rounds.items()}, forge_requests


async def _one_run(bench: _Bench, requests: int, seconds: float) -> Result:
    app, made = bench.app, bench.made
    began, driver_began = time.perf_counter(), time.process_time()
    failed_before = bench.failed_jobs()
    max_runs, forge_requests = await _rounds(bench, requests)
    rate_n = max(1, int(RATE * seconds))
    plain = made.build(rate_n, command=False)[0]
    plain_rate = await measure(app.port, plain, _pids(app), rate=RATE)
    commands = made.build(rate_n, command=True)[0]
    command_rate = await measure(
        app.port, commands, _pids(app), rate=RATE, open_jobs=bench.open_jobs
    )
    return Result(
        **max_runs,
        app_plain_rate=plain_rate,
        app_command_rate=command_rate,
        driver_cpu_s=time.process_time() - driver_began,
        wall_s=time.perf_counter() - began,
        failed_jobs=bench.failed_jobs() - failed_before,
        forge_per_command=forge_requests / max_runs["app_command"].load.requests,
    )


async def _measure_all(
    bench: _Bench, requests: int, seconds: float, runs: int, out: Callable[[str], None]
) -> list[Result]:
    await _warm(bench, requests)
    results: list[Result] = []
    for number in range(1, runs + 1):
        result = await _one_run(bench, requests, seconds)
        results.append(result)
        out(f"run {number}:")
        for line in report(result):
            out(f"  {line}" if line else line)
    return results


def main(
    requests: int = 2_000,
    seconds: float = 5.0,
    *,
    runs: int = 1,
    latency_ms: float = 5.0,
    profile: Path | None = None,
    out: Callable[[str], None] = print,
) -> list[Result]:
    """Start the forge, the floor and one SQLite App; measure `runs` times; print each run."""
    http, loop = server_options()
    out(
        f"edge targets: signed ~16 KB issue_comment deliveries over loopback, {requests:,} per "
        f"max-rate run ({CONCURRENCY} connections), {RATE:.0f}/s for {seconds:g} s, {runs} "
        f"run(s); uvicorn with {http} and {loop}; forge latency {latency_ms:g} ms; "
        f"{os.cpu_count()} CPU(s) shared by the load generator, the forge and the servers"
    )
    with tempfile.TemporaryDirectory(prefix="pairbot-edge-targets-") as tmp:
        workdir = Path(tmp)
        key = workdir / "app.pem"
        key.write_text(new_key())
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)

        def profiled(name: str) -> list[str]:
            return [] if profile is None else ["--profile", str(profile.resolve() / name)]

        with forge_process(workdir, key, latency_ms) as forge:
            app_args = ["--forge", str(forge), "--key", str(key), *profiled("app.prof")]
            with (
                start_server("floor", workdir, http, loop, profiled("floor.prof")) as floor,
                start_server("app", workdir, http, loop, app_args) as app,
            ):
                bench = _Bench(floor, app, forge, Deliveries(forge, SECRET))
                results = _run(_measure_all(bench, requests, seconds, runs, out))
                _check_alive((floor, app), workdir)
    for line in summary(results):
        out(line)
    return results


def _check_alive(servers: Sequence[Server], workdir: Path) -> None:
    """Fail with the tail of its log if a server exited during the measurement."""
    for server in servers:
        if server.process.poll() is not None:
            log = (workdir / f"{server.name}.log").read_text()[-2000:]
            raise RuntimeError(f"the {server.name} server died:\n{log}")


def _run(main: Coroutine[Any, Any, T]) -> T:
    """The driver on uvloop (a pinned dependency): the cheaper the client, the less it takes
    from the servers on a small machine."""
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a pinned dependency
        return asyncio.run(main)
    return uvloop.run(main)


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2_000, help="per max-rate run")
    parser.add_argument("--seconds", type=float, default=5.0, help="at 100 requests/s")
    parser.add_argument("--runs", type=int, default=1, help="how many runs, one after another")
    parser.add_argument("--latency-ms", type=float, default=5.0, help="the forge's, per answer")
    parser.add_argument("--profile", type=Path, help="write each server's cProfile here")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.runs < 1:
        parser.error("--requests and --runs need at least 1")
    if args.seconds <= 0 or args.latency_ms < 0:
        parser.error("--seconds needs a positive number, --latency-ms zero or more")
    main(
        args.requests,
        args.seconds,
        runs=args.runs,
        latency_ms=args.latency_ms,
        profile=args.profile,
    )


if __name__ == "__main__":
    _cli(sys.argv[1:])
