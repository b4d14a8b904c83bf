"""How fast the App answers signed `issue_comment` deliveries, next to a bare Starlette endpoint.

    python benchmarks/webhook_load.py          3,000 requests at max rate, then 10 s at 100/s
    python benchmarks/webhook_load.py --requests 10000 --concurrency 32
    python benchmarks/webhook_load.py --http h11 --loop asyncio     uvicorn without C speedups

Three servers run side by side in their own processes on loopback, each one uvicorn process on one
socket with the same configuration — `pairbot serve`'s: INFO logging (to a file), uvicorn's
access log off (the edge logs one line per delivery itself), and the HTTP parser and event
loop uvicorn's "auto" picks, httptools and uvloop (both pinned dependencies, so what a
production deployment runs); the header line names them:

    bare   Starlette with one route, POST /webhooks/github → 200, reading nothing
    floor  the same route doing only what the issue requires of every delivery before its
           2xx, through pairbot's own functions: read the body, verify X-Hub-Signature-256,
           parse the JSON — no routing, nothing recorded, no worker. No webhook service that
           checks its deliveries can be faster; it is measured at max rate only, to show how
           much of the bare endpoint's throughput is left before the App does anything of its own
    app    `create_app` as `pairbot serve` builds it — real SQLite store in a temp dir, the
           worker draining the queue in the same process — with the production `GitHubForges`
           against a GitHub that answers: benchmarks/answering_forge.py in its own process
           (FakeGitHub's real shapes, 5 ms per answer; writes unspaced here), so what is
           measured is the App: read, verify, parse, route, commit, answer, and run the job
           with its API calls (the permission, the 👀, the tracking comment, the dispatch)

Every delivery is a distinct signed `/pair status` comment (a new delivery id and comment id;
the App's comments are stored on the forge first, as on GitHub), so each one is verified,
parsed, committed to SQLite with its job, and then run by the worker. benchmarks/command_path.py
sets the App's command path beside a floor of the same API calls.
A small HTTP/1.1 keep-alive client (asyncio streams on uvloop, so the driver costs little next
to the servers) measures, one server after the other and in one run:

    max rate   `--concurrency` connections, each sending its next request when the last one
               is answered: throughput, and p50 / p99 latency
    100/s      an open-loop schedule of 100 requests per second for `--seconds`: p50 / p99
               latency from each request's *scheduled* time (a late send counts against it)

Beside each: the server's CPU time per request and how busy it was (all its threads, from
/proc), and the driver's — a server that is not near 100% at max rate was held back by the
driver or by the machine, not by itself. For the App, what its worker did: the jobs finished
while the deliveries arrived and how long the rest took after the last 2xx. The worker shares
the CPU with the edge throughout a max-rate run; the "end to end" line counts the whole work,
deliveries answered and jobs run.

Targets: the App's max-rate throughput at least half the bare endpoint's, and its p99 under
50 ms at 100 requests per second. Wall-clock numbers depend on the machine: compare the
columns of one run, not runs on different machines. The floor line says how much of the first
target any edge has left once it does what it must (on the machine this was written on, 0.6x
of the bare endpoint before routing, recording or running anything).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python benchmarks/webhook_load.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.answering_forge import add_comments, forge_process
from benchmarks.command_servers import new_key

# The client and the servers live in their own modules; these names are re-exported for the
# benchmarks that import them from here (command_path.py, edge_targets.py).
from benchmarks.load_client import (
    Connection,
    Measured,
    cpu_seconds,
    fixed_rate,
    max_rate,
    wait_ready,
)
from benchmarks.webhook_servers import (
    SECRET,
    Server,
    _floor_app,
    describe,
    serve,
    server_options,
    signed_requests,
    start_server,
)

__all__ = [
    "SECRET",
    "Connection",
    "Measured",
    "Server",
    "_floor_app",
    "cpu_seconds",
    "fixed_rate",
    "main",
    "max_rate",
    "server_options",
    "signed_requests",
    "wait_ready",
]

GOAL_RATIO = 0.5
GOAL_P99_MS = 50.0
RATE = 100.0


_OPEN = "state IN ('queued', 'running')"  # as the store's partial indexes spell it
_DONE = "state IN ('done', 'failed')"


def _jobs(store: Path | None, where: str) -> int:
    """How many of the App's jobs match `where` (_OPEN or _DONE), read beside the server."""
    if store is None or not store.exists():
        return 0
    conn = sqlite3.connect(store, timeout=5)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {where}").fetchone()[0])  # noqa: S608 - constant SQL
    finally:
        conn.close()


def _queue_drained(store: Path | None, timeout: float = 120.0) -> float:
    """Wait until the App's worker has run every job (so the next run starts on a quiet CPU);
    returns how long that took."""
    began = time.perf_counter()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _jobs(store, _OPEN):
        time.sleep(0.02)
    return time.perf_counter() - began


@dataclass(frozen=True)
class Result:
    """Both servers, both modes, and the floor at max rate."""

    bare_max: Measured
    app_max: Measured
    bare_rate: Measured
    app_rate: Measured
    floor_max: Measured

    @property
    def ratio(self) -> float:
        bare = self.bare_max.throughput
        return self.app_max.throughput / bare if bare else 0.0

    @property
    def floor_ratio(self) -> float:
        """The floor's throughput over the bare endpoint's: the most any checking edge keeps."""
        bare = self.bare_max.throughput
        return self.floor_max.throughput / bare if bare else 0.0

    @property
    def meets_goals(self) -> bool:
        return self.ratio >= GOAL_RATIO and self.app_rate.percentile(99) < GOAL_P99_MS


Rows = list[tuple[str, float | int, float | int, str]]


def _rows(result: Result) -> Rows:
    """The table's rows: (label, bare, app, format), the CPU rows for both modes last."""
    rows: Rows = [
        ("max rate: requests", result.bare_max.requests, result.app_max.requests, "{:>10d}"),
        (
            "max rate: throughput /s",
            result.bare_max.throughput,
            result.app_max.throughput,
            "{:>10.0f}",
        ),
        (
            "max rate: p50 ms",
            result.bare_max.percentile(50),
            result.app_max.percentile(50),
            "{:>10.2f}",
        ),
        (
            "max rate: p99 ms",
            result.bare_max.percentile(99),
            result.app_max.percentile(99),
            "{:>10.2f}",
        ),
        (f"{RATE:.0f}/s: requests", result.bare_rate.requests, result.app_rate.requests, "{:>10d}"),
        (
            f"{RATE:.0f}/s: p50 ms",
            result.bare_rate.percentile(50),
            result.app_rate.percentile(50),
            "{:>10.2f}",
        ),
        (
            f"{RATE:.0f}/s: p99 ms",
            result.bare_rate.percentile(99),
            result.app_rate.percentile(99),
            "{:>10.2f}",
        ),
        (
            "non-2xx answers",
            result.bare_max.failures + result.bare_rate.failures,
            result.app_max.failures + result.app_rate.failures,
            "{:>10d}",
        ),
    ]
    for mode, bare_run, app_run in (
        ("max rate", result.bare_max, result.app_max),
        (f"{RATE:.0f}/s", result.bare_rate, result.app_rate),
    ):
        rows += [
            (
                f"{mode}: server CPU us/req",
                bare_run.cpu_us_per_request,
                app_run.cpu_us_per_request,
                "{:>10.0f}",
            ),
            (
                f"{mode}: server CPU busy %",
                bare_run.busy(bare_run.server_cpu_s),
                app_run.busy(app_run.server_cpu_s),
                "{:>10.0f}",
            ),
            (
                f"{mode}: driver CPU busy %",
                bare_run.busy(bare_run.driver_cpu_s),
                app_run.busy(app_run.driver_cpu_s),
                "{:>10.0f}",
            ),
        ]
    return rows


def format_table(result: Result, concurrency: int) -> str:
    rows = _rows(result)
    lines = [f"{'':<26}{'bare':>10}{'app':>10}{'app/bare':>10}"]
    for label, bare, app, fmt in rows:
        ratio = f"{app / bare:>10.2f}" if isinstance(bare, float) and bare else f"{'':>10}"
        lines.append(f"{label:<26}{fmt.format(bare)}{fmt.format(app)}{ratio}")
    lines.append("")
    for mode, run in (("max rate", result.app_max), (f"{RATE:.0f}/s", result.app_rate)):
        if run.jobs_done is None or run.drain_s is None:
            continue
        line = (
            f"app worker, {mode}: {run.jobs_done:,} of {run.requests:,} jobs done during the "
            f"run, the rest within {run.drain_s:.2f} s after its last answer"
        )
        if mode == "max rate" and run.end_to_end is not None:
            line += f"; end to end (answered and run) {run.end_to_end:,.0f} deliveries/s"
        lines.append(line)
    floor = result.floor_max
    lines += [
        "",
        "the floor (read, verify, parse; nothing routed or recorded), max rate: "
        f"{floor.throughput:,.0f}/s = {result.floor_ratio:.2f}x bare, "
        f"{floor.cpu_us_per_request:.0f} us CPU/req; the app reaches "
        f"{result.app_max.throughput / floor.throughput if floor.throughput else 0:.2f}x the floor",
    ]
    ok_ratio = "yes" if result.ratio >= GOAL_RATIO else "NO"
    ok_p99 = "yes" if result.app_rate.percentile(99) < GOAL_P99_MS else "NO"
    lines += [
        "",
        f"goal: app throughput >= {GOAL_RATIO}x bare at max rate ({concurrency} connections): "
        f"{result.ratio:.2f}x — {ok_ratio}",
        f"goal: app p99 < {GOAL_P99_MS:.0f} ms at {RATE:.0f} requests/s: "
        f"{result.app_rate.percentile(99):.2f} ms — {ok_p99}",
    ]
    return "\n".join(lines)


async def _observed(server: Server, run: Awaitable[Measured]) -> Measured:
    """`run`, with the server's and the driver's CPU time around it, and for the App what its
    worker finished meanwhile and how long the rest took after the last answer."""
    done_before = _jobs(server.store, _DONE)
    server_cpu, driver_cpu = cpu_seconds(server.process.pid), time.process_time()
    measured = await run
    server_cpu = cpu_seconds(server.process.pid) - server_cpu
    driver_cpu = time.process_time() - driver_cpu
    jobs_done = _jobs(server.store, _DONE) - done_before
    drain_s = _queue_drained(server.store)
    if server.store is None:
        return dataclasses.replace(measured, server_cpu_s=server_cpu, driver_cpu_s=driver_cpu)
    return dataclasses.replace(
        measured,
        server_cpu_s=server_cpu,
        driver_cpu_s=driver_cpu,
        jobs_done=jobs_done,
        drain_s=drain_s,
    )


async def _measure(
    servers: Mapping[str, Server], requests: int, seconds: float, concurrency: int, forge: int
) -> Result:
    runs: dict[tuple[str, str], Measured] = {}
    offset = 0

    def batch(server: Server, count: int) -> list[bytes]:
        nonlocal offset
        ids = None
        if server.name == "app":  # its jobs react to the comments: GitHub must know them
            comments = [(1 + n % 50, "/pair status") for n in range(offset, offset + count)]
            ids = add_comments(forge, comments)
        built = signed_requests(count, server.port, offset, ids)
        offset += count
        return built

    for server in servers.values():
        await wait_ready(server.port)
        await max_rate(server.port, batch(server, min(200, requests)), concurrency)  # warm-up
        _queue_drained(server.store)
    for name, server in servers.items():  # bare, floor, app: one after the other
        built = batch(server, requests)  # built before the clocks start
        runs[(name, "max")] = await _observed(server, max_rate(server.port, built, concurrency))
    rate_requests = max(1, int(RATE * seconds))
    for name, server in servers.items():
        if name == "floor":
            continue
        built = batch(server, rate_requests)
        runs[(name, "rate")] = await _observed(server, fixed_rate(server.port, built, RATE))
    return Result(
        bare_max=runs[("bare", "max")],
        app_max=runs[("app", "max")],
        bare_rate=runs[("bare", "rate")],
        app_rate=runs[("app", "rate")],
        floor_max=runs[("floor", "max")],
    )


def _run_driver(main: Coroutine[Any, Any, Result]) -> Result:
    """The driver on uvloop when installed: the cheaper the client, the less it takes from the
    servers on a small machine (its CPU is in the table)."""
    if importlib.util.find_spec("uvloop"):
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)


def main(
    requests: int = 3_000,
    seconds: float = 10.0,
    concurrency: int = 16,
    *,
    http: str | None = None,
    loop: str | None = None,
    out: Callable[[str], None] = print,
) -> Result:
    """Start the three servers, measure them one after the other, print the table."""
    auto_http, auto_loop = server_options()
    http, loop = http or auto_http, loop or auto_loop
    with tempfile.TemporaryDirectory(prefix="pairbot-webhook-load-") as tmp:
        workdir = Path(tmp)
        out(
            f"webhook load: signed issue_comment deliveries over loopback, {requests:,} at max "
            f"rate ({concurrency} connections), {RATE:.0f}/s for {seconds:g} s; "
            f"{sys.implementation.name} {sys.version.split()[0]}, {os.cpu_count()} CPU(s)"
        )
        auto = (http, loop) == (auto_http, auto_loop)
        out(
            describe(http, loop) + (" — what `pairbot serve` runs (uvicorn's auto)" if auto else "")
        )
        key = workdir / "app.pem"
        key.write_text(new_key())
        with (
            forge_process(workdir, key) as forge,
            start_server("bare", workdir, http, loop) as bare,
            start_server("floor", workdir, http, loop) as floor,
            start_server("app", workdir, http, loop, _forge_args(forge, key)) as app,
        ):
            servers = {"bare": bare, "floor": floor, "app": app}
            result = _run_driver(_measure(servers, requests, seconds, concurrency, forge))
            for server in (bare, floor, app):
                if server.process.poll() is not None:
                    raise RuntimeError(f"the {server.name} server died: see its log")
        out(format_table(result, concurrency))
        return result


def _forge_args(port: int, key: Path) -> list[str]:
    return ["--forge", str(port), "--key", str(key)]


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=3_000, help="at max rate, per server")
    parser.add_argument("--seconds", type=float, default=10.0, help="at 100 requests/s")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve", choices=("app", "bare", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--forge", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--key", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=Path, help=argparse.SUPPRESS)  # edge_targets.py's
    auto_http, auto_loop = server_options()
    parser.add_argument("--http", choices=("httptools", "h11"), default=auto_http)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default=auto_loop)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(
            args.serve,
            args.fd,
            args.store,
            args.http,
            args.loop,
            forge=args.forge,
            key=args.key,
            profile=args.profile,
        )
        return
    main(args.requests, args.seconds, args.concurrency, http=args.http, loop=args.loop)


if __name__ == "__main__":
    _cli(sys.argv[1:])
