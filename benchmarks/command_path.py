"""Command deliveries answered and run, against a GitHub that answers, beside their floor.

    python benchmarks/command_path.py                       3 runs of 3 rounds of 1,000, 5 ms
                                                            forge
    python benchmarks/command_path.py --latency-ms 20 --runs 1 --burst-seconds 0
    python benchmarks/command_path.py --replicas            two PostgreSQL replicas vs one
                                                            SQLite App (command_replicas.py),
                                                            each as `pairbot serve` runs it
                                                            (--worker own|inline: all alike)

Three processes on loopback, each one uvicorn process as `pairbot serve` runs (httptools,
uvloop, access log off):

    forge  benchmarks/answering_forge.py: FakeGitHub's real shapes (corpora), ETags and 304s,
           minted installation tokens, repository_dispatch; every answer `--latency-ms` late
    floor  the edge floor of benchmarks/webhook_load.py (read, verify X-Hub-Signature-256,
           parse, 202) and then, for a command, the same API calls the App's job makes, sent
           by one bare `httpx.AsyncClient` with keep-alive (at most 4 at a time, as the
           App's worker): the permission (cached a minute, as the App caches it), the 👀,
           the tracking comment (read, then written when it changed), the repository_dispatch
    app    `create_app` as `pairbot serve` builds it: SQLite store, the worker in a process of
           its own (app.web.worker_process), the production `GitHubForges` (the App's JWT,
           its installation token), writes unspaced here (the burst below measures the
           production spacing)
    inline the same App with its worker in the edge's process (PAIR_WORKER_PROCESS=inline),
           beside it in every run (`--worker own|inline` measures one of them alone)

Each run is `--rounds` (3) rounds. A round starts a fresh floor and fresh Apps (new processes,
new stores: identical code in two processes differs by up to a fifth in CPU per non-command, so
each side's figure is pooled over as many processes as rounds), then sends each server in turn
`--requests` distinct signed deliveries at 16 connections: first comments that ask for nothing
(*non-command*), then `/pair status` commands (*command*); each server leads one round in turn,
and each server's rounds of a kind are pooled into its figures (a few tenths of a second a
round: the machine's drift over a run falls on all of them). CPU is each server's (every
thread of its processes — the App's edge and its worker's — from /proc) from the first
delivery until its last API call was answered (the App's jobs done, the floor's calls
finished); it prints CPU per command, answers per second, p99 at saturation and the ratios to
the floor, with the forge's requests per command for both, so the two are seen to make the
same calls. While the deliveries are answered, each server's event loop (its main thread)
is on a CPU for a share of the wall time and waits, runnable, for a CPU for another share
(the scheduler's account): the rest of the time it is idle, every delivery in flight waiting
for something else (a commit's fsync, a thread's hop).
Targets (issue #29): CPU per command <= 2x the floor's; command p99 <= 2x the edge floor's
(its non-command p99); non-command throughput >= 0.8x the floor's. The p99 ratio is printed
as its two factors: the mean latencies' ratio (16 connections over the throughput) and the
tails' (each run's p99 over its mean): pauses would show in the second. `--no-gc` runs the
App with the cyclic collector off; TMPDIR=/dev/shm puts its store where an fsync is free.

Then a burst: a fresh App with the production write spacing (1 s) takes ten commands a second
for `--burst-seconds`, and the forge's arrival time of each 👀 gives its wait (p50 / p99).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.answering_forge import (
    fetch_stats,
)
from benchmarks.command_replicas import (
    Comparison,
    Targets,
    Watch,
    compare,
    format_comparison,
    postgres_admin_url,
)
from benchmarks.command_servers import SECRET, new_key
from benchmarks.deliveries import Deliveries
from benchmarks.edge_targets import Database
from benchmarks.load_client import loop_schedule, pooled_measures, tree_cpu_seconds
from benchmarks.webhook_load import (
    _OPEN,
    Measured,
    _jobs,
    fixed_rate,
    max_rate,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")
GOAL_CPU = 2.0
GOAL_P99 = 2.0
GOAL_NON_COMMAND = 0.8


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    store: Path | None = None


@contextlib.contextmanager
def start(role: str, workdir: Path, *args: str) -> Iterator[Server]:
    """`role` (forge, floor, app) in its own process on a loopback socket it inherits."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    module = "benchmarks.answering_forge" if role == "forge" else "benchmarks.command_servers"
    serve = [] if role == "forge" else ["--serve", role]
    log = (workdir / f"{role}-{port}.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", module, *serve, "--fd", str(sock.fileno()), *args],
        cwd=ROOT,
        pass_fds=[sock.fileno()],
        stdout=log,
        stderr=log,
    )
    sock.close()
    store = Path(args[args.index("--store") + 1]) if "--store" in args else None
    try:
        yield Server(role, port, process, store)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@dataclass(frozen=True)
class Run:
    """One server, one kind of delivery, at max rate: answers, then the work behind them."""

    measured: Measured
    cpu_s: float  # until the last API call behind the deliveries was answered
    forge_requests: int
    loop_cpu_s: float = 0.0  # while the deliveries were answered: the event loop on a CPU
    loop_wait_s: float = 0.0  # and runnable, waiting for a CPU other tasks held

    @property
    def cpu_us(self) -> float:
        return 1e6 * self.cpu_s / self.measured.requests

    @property
    def per_delivery(self) -> float:
        return self.forge_requests / self.measured.requests

    def loop_share(self, seconds: float) -> float:
        """`seconds` of the event loop's as a share of the answering's wall time."""
        return seconds / self.measured.seconds if self.measured.seconds > 0 else 0.0


def _floor_pending(port: int) -> int:
    import httpx  # noqa: PLC0415

    response = httpx.get(f"http://127.0.0.1:{port}/_pending", timeout=10.0, trust_env=False)
    return int(response.json()["pending"])


def settle(server: Server, timeout_s: float = 300.0) -> None:
    """Wait until the work behind the deliveries is done: the App's jobs, the floor's calls."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.store is not None and not _jobs(server.store, _OPEN):
            return
        if server.store is None and not _floor_pending(server.port):
            return
        time.sleep(0.02)
    raise RuntimeError(f"the {server.name}'s work did not finish in {timeout_s:.0f} s")


async def measure(server: Server, forge: Server, requests: list[bytes]) -> Run:
    before = fetch_stats(forge.port)["requests"]
    cpu = tree_cpu_seconds(server.process.pid)  # the edge's process and the worker's
    loop_cpu, loop_wait = loop_schedule(server.process.pid)
    measured = await max_rate(server.port, requests, 16)
    cpu_then, wait_then = loop_schedule(server.process.pid)
    loop_cpu, loop_wait = cpu_then - loop_cpu, wait_then - loop_wait
    await asyncio.to_thread(settle, server)
    cpu = tree_cpu_seconds(server.process.pid) - cpu
    after = fetch_stats(forge.port)["requests"]
    return Run(measured, cpu, after - before, loop_cpu, loop_wait)


@dataclass(frozen=True)
class Figures:
    """One run's figures and their ratios to the floor measured in the same run: the App as
    `pairbot serve` runs it (`app_*`: the worker in a process of its own, unless `--worker
    inline` alone), and, beside it, the App with its worker inline (`inline_*`)."""

    floor_non: Run
    app_non: Run
    floor_cmd: Run
    app_cmd: Run
    inline_non: Run | None = None
    inline_cmd: Run | None = None

    @property
    def cpu_ratio(self) -> float:
        return self.app_cmd.cpu_us / self.floor_cmd.cpu_us

    @property
    def p99_ratio(self) -> float:
        return self.app_cmd.measured.percentile(99) / self.floor_non.measured.percentile(99)

    @property
    def non_command_ratio(self) -> float:
        return self.app_non.measured.throughput / self.floor_non.measured.throughput

    def apps(self) -> list[tuple[str, Run, Run]]:
        """(label, non-command run, command run) of each App measured."""
        apps = [("app", self.app_non, self.app_cmd)]
        if self.inline_non is not None and self.inline_cmd is not None:
            apps.append(("inline", self.inline_non, self.inline_cmd))
        return apps


def pooled(runs: Sequence[Run]) -> Run:
    """One server's rounds of one kind as one run: their deliveries, wall time, latencies,
    CPU and forge requests added up."""
    return Run(
        pooled_measures([run.measured for run in runs]),
        sum(run.cpu_s for run in runs),
        sum(run.forge_requests for run in runs),
        sum(run.loop_cpu_s for run in runs),
        sum(run.loop_wait_s for run in runs),
    )


Fleet = Callable[[], contextlib.AbstractAsyncContextManager[list[Server]]]


async def one_run(  # noqa: PLR0917 - the servers, the forge and how much to send
    fleet: Fleet, forge: Server, deliveries: Deliveries, n: int, rounds: int = 1, offset: int = 0
) -> Figures:
    """Each kind in `rounds` rounds of `n` deliveries per server, pooled per server. Each round
    has servers of its own (`fleet()`: fresh processes, floor first, warmed): identical
    code in two processes answers a non-command for up to a fifth more or less CPU (the
    process's layout in memory and caches, measured with six alike side by side: 137-174 µs),
    so one process a side would measure its luck as much as its code. Within a round the
    servers take turns, each leading one round in turn (from `offset`): the machine's drift
    over a run falls on each alike."""
    runs: dict[str, list[Run]] = {}
    for index in range(rounds):
        async with fleet() as servers:
            lead = (offset + index) % len(servers)
            for command in (False, True):
                for server in servers[lead:] + servers[:lead]:
                    built, _ = deliveries.build(n, command=command, port=server.port)
                    key = f"{server.name}-{'cmd' if command else 'non'}"
                    runs.setdefault(key, []).append(await measure(server, forge, built))
    figures = {key: pooled(each) for key, each in runs.items()}
    return Figures(
        figures["floor-non"],
        figures["app-non"],
        figures["floor-cmd"],
        figures["app-cmd"],
        figures.get("inline-non"),
        figures.get("inline-cmd"),
    )


def format_figures(figures: Figures, index: int) -> str:
    def throughput(run: Run) -> float:
        return run.measured.throughput

    def p99(run: Run) -> float:
        return run.measured.percentile(99)

    def cpu(run: Run) -> float:
        return run.cpu_us

    def requests(run: Run) -> float:
        return run.per_delivery

    def on_cpu(run: Run) -> float:
        return run.loop_share(run.loop_cpu_s)

    def waiting(run: Run) -> float:
        return run.loop_share(run.loop_wait_s)

    apps = figures.apps()
    rows: list[tuple[str, bool, Callable[[Run], float], str]] = [
        ("non-command: answers/s", False, throughput, "{:>10.0f}"),
        ("non-command: p99 ms", False, p99, "{:>10.2f}"),
        ("command: answers/s", True, throughput, "{:>10.0f}"),
        ("command: p99 ms", True, p99, "{:>10.2f}"),
        ("command: CPU us, answered+run", True, cpu, "{:>10.0f}"),
        ("command: forge requests each", True, requests, "{:>10.2f}"),
        ("non-command: loop on a CPU", False, on_cpu, "{:>10.2f}"),
        ("command: loop on a CPU", True, on_cpu, "{:>10.2f}"),
        ("command: loop waiting for a CPU", True, waiting, "{:>10.2f}"),
    ]
    head = "".join(f"{name:>10}{name + '/fl':>10}" for name, _, _ in apps)
    lines = [f"run {index}:", f"{'':<32}{'floor':>10}{head}"]
    for label, command, value, fmt in rows:
        floor = value(figures.floor_cmd if command else figures.floor_non)
        cells = ""
        for _, non, cmd in apps:
            mine = value(cmd if command else non)
            cells += fmt.format(mine) + (f"{mine / floor:>10.2f}" if floor else f"{'':>10}")
        lines.append(f"{label:<32}{fmt.format(floor)}{cells}")
    for name, non, cmd in apps:
        view = Figures(figures.floor_non, non, figures.floor_cmd, cmd)
        lines += [
            f"  {name}: CPU per command / floor's: {view.cpu_ratio:.2f} (target <= {GOAL_CPU})",
            f"  {name}: command p99 / edge floor's (non-command) p99: {view.p99_ratio:.2f} "
            f"(target <= {GOAL_P99})",
            f"  {name}: non-command throughput / floor's: {view.non_command_ratio:.2f} "
            f"(target >= {GOAL_NON_COMMAND})",
            f"  {name}:" + tail_line(view)[1:],
        ]
        failures = cmd.measured.failures + non.measured.failures
        if failures:
            lines.append(f"  {name}: non-2xx answers: {failures}")
    return "\n".join(lines)


def mean_ms(run: Run) -> float:
    latencies = run.measured.latencies_ms
    return sum(latencies) / len(latencies) if latencies else float("nan")


def tail_line(figures: Figures) -> str:
    """The p99 ratio as its two factors: the mean latencies' ratio (at 16 connections, closed
    loop, 16 over the throughput: Little's law) and each run's tail, its p99 over its mean. A
    tail made by pauses (the collector's, a slow fsync, a long turn of the loop) shows as the
    App's p99/mean above the floor's; a slower answer on average shows in the first factor."""
    app, floor = figures.app_cmd, figures.floor_non
    app_mean, floor_mean = mean_ms(app), mean_ms(floor)
    app_tail = app.measured.percentile(99) / app_mean
    floor_tail = floor.measured.percentile(99) / floor_mean
    return (
        f"  command p99 / edge floor's p99 = mean latency ratio {app_mean / floor_mean:.2f} "
        f"({app_mean:.1f} / {floor_mean:.1f} ms) x tail ratio {app_tail / floor_tail:.2f} "
        f"(p99/mean: app {app_tail:.1f}, floor {floor_tail:.1f})"
    )


async def burst(app: Server, forge: Server, deliveries: Deliveries, seconds: float) -> list[float]:
    """Ten commands a second for `seconds`; each 👀's wait, from its delivery's due time to
    its arrival at the forge (both CLOCK_MONOTONIC, one machine), in seconds."""
    count = max(1, int(10 * seconds))
    built, made = deliveries.build(count, command=True, port=app.port)
    began = time.monotonic() + 0.05  # fixed_rate's own start
    await fixed_rate(app.port, built, 10.0, connections=4)
    ids = [str(i) for i in made]
    deadline = time.monotonic() + 10 * count + 60
    while time.monotonic() < deadline:
        seen = fetch_stats(forge.port)["reactions"]
        if all(i in seen for i in ids):
            return sorted(seen[i] - (began + k / 10.0) for k, i in enumerate(ids))
        await asyncio.sleep(0.2)
    raise RuntimeError("not every 👀 arrived at the forge")


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


async def drive(workdir: Path, args: argparse.Namespace, out: Any) -> list[Figures]:
    key = workdir / "app.pem"
    key.write_text(new_key())
    common = ("--key", str(key))
    results: list[Figures] = []
    with start("forge", workdir, "--latency-ms", str(args.latency_ms), *common) as forge:
        await wait_ready(forge.port)
        deliveries = Deliveries(forge.port, SECRET)
        url = ("--forge", str(forge.port))

        made = itertools.count(1)

        @contextlib.asynccontextmanager
        async def fleet() -> AsyncIterator[list[Server]]:
            """The floor and the Apps, fresh processes (new stores), ready and warmed."""
            tag = next(made)
            with contextlib.ExitStack() as stack:
                floor = stack.enter_context(start("floor", workdir, *url, *common))
                apps = [
                    stack.enter_context(
                        start("app", workdir, *url, *common, *_app_args(workdir, args, worker, tag))
                    )
                    for worker in _workers(args.worker)
                ]
                if len(apps) == 2:
                    apps[1].name = "inline"
                for server in (floor, *apps):
                    await wait_ready(server.port)
                    warm_up, _ = deliveries.build(50, command=True, port=server.port)
                    await measure(server, forge, warm_up)
                yield [floor, *apps]

        for index in range(1, args.runs + 1):
            figures = await one_run(
                fleet, forge, deliveries, args.requests, args.rounds, offset=index - 1
            )
            results.append(figures)
            out(format_figures(figures, index))
        if args.burst_seconds > 0:
            store = ("--store", str(workdir / "burst.sqlite3"))
            with start("app", workdir, *url, *common, *store, "--spacing", "1") as paced:
                await wait_ready(paced.port)
                waits = await burst(paced, forge, deliveries, args.burst_seconds)
            out(
                f"burst: {len(waits)} commands at 10/s, writes 1 s apart (acks ahead of bulk): "
                f"👀 wait p50 {quantile(waits, 0.5):.1f} s, p99 {quantile(waits, 0.99):.1f} s"
            )
    return results


async def drive_replicas(workdir: Path, args: argparse.Namespace, out: Any) -> list[Comparison]:
    """Two App replicas on one fresh PostgreSQL database against one SQLite App, the same
    commands to each (benchmarks/command_replicas.py)."""
    key = workdir / "app.pem"
    key.write_text(new_key())
    common = ("--key", str(key))
    database = Database(args.postgres or postgres_admin_url())
    results: list[Comparison] = []
    try:
        with start("forge", workdir, "--latency-ms", str(args.latency_ms), *common) as forge:
            await wait_ready(forge.port)
            deliveries = Deliveries(forge.port, SECRET)
            url = ("--forge", str(forge.port), *common)
            sqlite = workdir / "one.sqlite3"
            # Each App as `pairbot serve` runs it by default (on SQLite the worker in its own
            # process, on PostgreSQL inline), unless `--worker own|inline` says for all.
            one_worker = "inline" if args.worker == "inline" else "own"
            pg_worker = "own" if args.worker == "own" else "inline"
            pg = ("--store", str(workdir / "unused.sqlite3"), "--store-url", database.url)
            pg = (*pg, "--worker", pg_worker)
            with (
                start("app", workdir, *url, "--store", str(sqlite), "--worker", one_worker) as one,
                start("app", workdir, *url, *pg) as first,
                start("app", workdir, *url, *pg) as second,
            ):
                servers = (one, first, second)
                for server in servers:
                    await wait_ready(server.port)
                watch = Watch(database)  # after the replicas made the schema
                targets = Targets(
                    one.port,
                    one.process.pid,
                    sqlite,
                    (first.port, second.port),
                    (first.process.pid, second.process.pid),
                    watch,
                    forge.port,
                )

                def build(n: int) -> list[bytes]:
                    return deliveries.build(n, command=True, port=first.port)[0]

                await compare(targets, build, 50, None, 0)  # warm: connections, tokens, plans
                rates = [None] + ([args.rate] if args.rate > 0 else [])
                for index in range(1, args.runs + 1):
                    for rate in rates:
                        n = args.requests if rate is None else int(rate * args.rate_seconds)
                        comparison = await compare(targets, build, n, rate, index, args.rounds)
                        results.append(comparison)
                        for line in format_comparison(comparison, index):
                            out(line)
                watch.close()
    finally:
        database.drop()
    return results


def _run(main: Coroutine[Any, Any, T]) -> T:
    """The driver on uvloop when installed (as webhook_load.py's: a cheap client)."""
    if importlib.util.find_spec("uvloop"):
        import uvloop  # noqa: PLC0415

        return uvloop.run(main)
    return asyncio.run(main)


def _workers(choice: str) -> list[str]:
    """The Apps measured beside the floor: `own` first (the one `app_*` figures are of)."""
    return ["own", "inline"] if choice == "both" else [choice]


def _app_args(workdir: Path, args: argparse.Namespace, worker: str, tag: int) -> list[str]:
    app = ["--store", str(workdir / f"app-{worker}-{tag}.sqlite3"), "--worker", worker]
    if args.profile is not None:
        app += ["--profile", str(args.profile.resolve() / f"app-{worker}-{tag}.prof")]
    if args.no_gc:
        app.append("--no-gc")
    return app


def main(argv: Sequence[str] = (), out: Any = print) -> list[Figures] | list[Comparison]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1_000, help="per server and kind")
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="per run: rounds of --requests per server and kind, interleaved, pooled",
    )
    parser.add_argument("--burst-seconds", type=float, default=2.0, help="0: no burst")
    parser.add_argument("--profile", type=Path, help="a directory: the App's cProfile there")
    parser.add_argument("--no-gc", action="store_true", help="the App's cyclic GC off")
    parser.add_argument(
        "--worker",
        choices=("both", "own", "inline"),
        default="both",
        help="the worker in a process of its own, inline, or both side by side (default)",
    )
    parser.add_argument("--replicas", action="store_true", help="2 PostgreSQL replicas vs SQLite")
    parser.add_argument("--postgres", help="an admin URL (default: PAIR_TEST_POSTGRES_URL)")
    parser.add_argument("--rate", type=float, default=100.0, help="--replicas: 0 for none")
    parser.add_argument("--rate-seconds", type=float, default=5.0)
    args = parser.parse_args(list(argv))
    out(
        f"command path: {args.requests:,} deliveries per server and kind at 16 connections "
        f"({args.rounds} interleaved rounds of them a run, fresh servers each, pooled), forge "
        f"latency {args.latency_ms:g} ms, {args.runs} run(s); {os.cpu_count()} CPU(s)"
    )
    with tempfile.TemporaryDirectory(prefix="pairbot-command-path-") as tmp:
        if args.replicas:
            return _run(drive_replicas(Path(tmp), args, out))
        return _run(drive(Path(tmp), args, out))


if __name__ == "__main__":
    main(sys.argv[1:])
