"""How the App answers while strangers abuse its edge: /healthz and a signed delivery, side by side.

    python benchmarks/edge_abuse.py                       the issue's numbers (see below)
    python benchmarks/edge_abuse.py --uploads 12 --trickles 250 --probes 50 --read-timeout 2

`pairbot serve --dev` (the installed console script, as an operator runs it, with its default
limits except `PAIR_READ_TIMEOUT_S`) serves on loopback, and one run measures, in order:

    idle       /healthz and an honest signed delivery (the real `issue_comment` example
               payload, a new delivery id each), one at a time, each on a new connection
    abuse      the same, while `--uploads` partial uploads run (headers declaring a 24 MiB
               body, then `--upload-part` of it, then nothing) and `--trickles` connections
               send a byte every `--every` seconds — half of them their headers, half a
               body after complete headers; every connection the server drops is opened again
    hostile    the same /healthz probe while `--hostile` signed deliveries of a 64 KB comment
               of nested HTML comments (removing one layer assembles the next) are parsed

For each phase: p50 / p99 latency of both probes, and the server's resident memory (VmRSS in
/proc/<pid>/status, sampled every 20 ms: idle, and the peak during abuse) next to the bound
docs/app.md states (idle + body budget + 32 MiB). For the abuse: what the server answered the
uploads (503: no room in the budget; 408: dropped at the read timeout), how many trickling
connections it closed, and the longest any of them lived. The issue asks for answers within a
second under this abuse; wall-clock numbers depend on the machine, so compare the columns of
one run. tests/web/test_edge_abuse.py runs the same abuse and asserts what must hold, with
generous timeouts instead of latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python benchmarks/edge_abuse.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from app.web.settings import MIB, EdgeLimits
from app.web.signature import sign

ROOT = Path(__file__).resolve().parents[1]
PAIRBOT = Path(sys.executable).parent / "pairbot"
SECRET = "edge-abuse-benchmark-secret"  # noqa: S105 - a throwaway secret for loopback
PAYLOAD = ROOT / "tests" / "fixtures" / "github-webhooks" / "issue_comment"
RSS_SLACK = 32 * MIB  # docs/app.md: RSS stays under idle + body budget + this
_START_S = 120.0  # deadlines against hanging, never measured
_STOP_S = 30.0


# -- the server -----------------------------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def app_server(workdir: Path, env: dict[str, str]) -> Iterator[Server]:
    """`pairbot serve --dev` on a free loopback port with `env` added to a minimal environment,
    until the block ends (SIGINT, then SIGKILL if it hangs)."""
    port = free_port()
    full = {
        "PATH": f"{PAIRBOT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/tmp"),  # noqa: S108 - only where HOME is unset
        "LANG": "C.UTF-8",
        "PAIR_WEBHOOK_SECRET": SECRET,
        **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")},
        **env,
    }
    log = workdir / "server.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(PAIRBOT), "--root", str(workdir), "serve", "--dev", "--port", str(port)],
            cwd=workdir,
            env=full,
            stdout=out,
            stderr=out,
        )
    server = Server(process, port, log)
    try:
        deadline = time.monotonic() + _START_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the App exited: {log.read_text()}")
            try:
                if httpx.get(server.url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the App did not start: {log.read_text()}")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(_STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(_STOP_S)


def rss_bytes(pid: int) -> int:
    """The resident set size of `pid` (VmRSS in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class RssPeak:
    """Samples a process's RSS every 20 ms in a thread while the block runs; `.peak`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss", daemon=True)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(_STOP_S)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            with contextlib.suppress(OSError, RuntimeError):
                self.peak = max(self.peak, rss_bytes(self.pid))


# -- honest requests ------------------------------------------------------------------------------


def honest_delivery() -> tuple[bytes, dict[str, str]]:
    """The real `issue_comment` example, signed, with a delivery id of its own."""
    body = (PAYLOAD / "created.with-installation.json").read_bytes()
    return body, signed_headers("issue_comment", body)


def signed_headers(event: str, body: bytes) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }


def hostile_delivery(size: int = 64 * 1024) -> tuple[bytes, dict[str, str]]:
    """A signed comment of `size` characters whose hidden-content stripping is the costly
    kind: HTML comments nested so that removing one layer assembles the next."""
    text = "<!---->"
    while len(text) < size - 20:
        text = "<!-" + text + "-->"
    payload: dict[str, Any] = json.loads((PAYLOAD / "created.with-installation.json").read_text())
    payload["comment"]["body"] = "/pair status\n" + text
    payload["comment"]["id"] = int(uuid.uuid4().int % 10**9)
    body = json.dumps(payload).encode()
    return body, signed_headers("issue_comment", body)


@dataclass
class Probes:
    """Latencies (seconds) of answered probes, and what went wrong with the others."""

    healthz: list[float] = field(default_factory=list)
    delivery: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def probe(url: str, count: int, *, timeout_s: float, deliveries: bool = True) -> Probes:
    """`count` /healthz probes (and as many signed deliveries), one at a time, each on a new
    connection as GitHub opens one per delivery. A probe counts only if answered 2xx."""
    measured = Probes()
    never_reuse = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=url, timeout=timeout_s, limits=never_reuse) as client:
        for _ in range(count):
            _timed(measured.healthz, measured.failures, "healthz", lambda: client.get("/healthz"))
            if deliveries:
                body, headers = honest_delivery()
                _timed(
                    measured.delivery,
                    measured.failures,
                    "delivery",
                    functools.partial(
                        client.post, "/webhooks/github", content=body, headers=headers
                    ),
                )
    return measured


def _timed(
    into: list[float], failures: list[str], what: str, call: Callable[[], httpx.Response]
) -> None:
    started = time.perf_counter()
    try:
        response = call()
    except httpx.HTTPError as error:
        failures.append(f"{what}: {type(error).__name__}")
        return
    if 200 <= response.status_code < 300:
        into.append(time.perf_counter() - started)
    else:
        failures.append(f"{what}: {response.status_code}")


# -- the abuse ------------------------------------------------------------------------------------


@dataclass
class AbuseStats:
    upload_answers: collections.Counter[str] = field(default_factory=collections.Counter)
    uploads_started: int = 0
    uploads_dropped: int = 0  # uploads the server ended after they had stalled
    trickles_open: int = 0
    trickles_opened: int = 0
    trickle_answers: collections.Counter[str] = field(default_factory=collections.Counter)
    trickle_lifetimes: list[float] = field(default_factory=list)  # closed by the server

    @property
    def trickles_closed(self) -> int:
        return len(self.trickle_lifetimes)

    @property
    def longest_trickle_s(self) -> float:
        return max(self.trickle_lifetimes, default=0.0)


class Abuse:
    """Partial uploads and trickling connections against 127.0.0.1:`port`, on an asyncio loop
    of its own in a thread, from `start()` until `stop()`; each dropped connection reopens."""

    def __init__(
        self,
        port: int,
        *,
        uploads: int = 12,
        upload_bytes: int = 24 * MIB,
        upload_part: int = 20 * MIB,
        trickles: int = 250,
        every_s: float = 0.5,
    ) -> None:
        self.port = port
        self.uploads = uploads
        self.upload_bytes = upload_bytes
        self.upload_part = upload_part
        self.trickles = trickles
        self.every_s = every_s
        self.stats = AbuseStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="abuse", daemon=True)
        self._ready = threading.Event()

    def __enter__(self) -> Abuse:
        self._thread.start()
        if not self._ready.wait(_START_S):
            raise RuntimeError("the abuse loop did not start")
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(_STOP_S)

    def wait(self, check: Callable[[AbuseStats], bool], what: str, timeout_s: float) -> None:
        """Until `check(stats)` holds; a deadline against hanging, never a measured time."""
        deadline = time.monotonic() + timeout_s
        while not check(self.stats):
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise AssertionError(f"timed out waiting for {what}: {self.stats}")
            time.sleep(0.05)

    def ramped(self) -> None:
        """Until every trickling connection and every upload has started once (the first ones
        may be dropped already, and are then opened again)."""
        self.wait(
            lambda s: s.trickles_opened >= self.trickles and s.uploads_started >= self.uploads,
            "the abuse to ramp up",
            _START_S,
        )

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        tasks = [asyncio.create_task(self._upload()) for _ in range(self.uploads)]
        tasks += [asyncio.create_task(self._trickle(n % 2 == 0)) for n in range(self.trickles)]
        self._ready.set()
        await self._stopping.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _upload(self) -> None:
        head = (
            "POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nX-GitHub-Event: issue_comment\r\n"
            f"X-GitHub-Delivery: {uuid.uuid4()}\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n"
            f"Content-Length: {self.upload_bytes}\r\n\r\n"
        ).encode()
        chunk = b"[" * (256 * 1024)
        while True:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.stats.uploads_started += 1
            stalled = False
            try:
                writer.write(head)
                sent = 0
                while sent < self.upload_part:
                    writer.write(chunk)
                    await writer.drain()
                    sent += len(chunk)
                stalled = True
                answer = await reader.read(65536)  # stalled: whatever the server decides
                status = _status(answer)
                self.stats.upload_answers[status] += 1
                self.stats.uploads_dropped += status != "503"  # 503: refused, not dropped
            except OSError:
                self.stats.upload_answers["reset"] += 1
                self.stats.uploads_dropped += stalled
            finally:
                writer.close()
            await asyncio.sleep(0.5)  # then start over, as a determined sender would

    async def _trickle(self, headers_only: bool) -> None:
        head = (
            b"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n"
            b"X-Hub-Signature-256: sha256=" + b"0" * 64 + b"\r\n\r\n"
        )
        while True:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            opened = time.monotonic()
            self.stats.trickles_open += 1
            self.stats.trickles_opened += 1
            try:
                drip = head if headers_only else b"[" * 100000
                if not headers_only:
                    writer.write(head)
                answer = b""
                for position in range(len(drip)):
                    writer.write(drip[position : position + 1])
                    await writer.drain()
                    try:
                        answer = await asyncio.wait_for(reader.read(65536), self.every_s)
                    except TimeoutError:
                        continue
                    break  # an answer, or the end of the connection: the server dropped it
                while answer and await reader.read(65536):
                    pass  # until the server closes
                self.stats.trickle_answers[_status(answer)] += 1
            except OSError:
                self.stats.trickle_answers["reset"] += 1
            finally:
                self.stats.trickles_open -= 1
                writer.close()
            self.stats.trickle_lifetimes.append(time.monotonic() - opened)


def _status(answer: bytes) -> str:
    parts = answer.split(b" ", 2)
    return parts[1].decode() if len(parts) > 1 and answer.startswith(b"HTTP/") else "closed"


# -- the run --------------------------------------------------------------------------------------


@dataclass
class Result:
    idle: Probes
    abuse: Probes
    hostile: Probes
    rss_idle: int
    rss_peak: int
    rss_bound: int
    stats: AbuseStats
    read_timeout_s: float


def main(
    *,
    uploads: int = 12,
    trickles: int = 250,
    probes: int = 50,
    read_timeout_s: float = 2.0,
    every_s: float = 0.5,
    upload_part: int = 20 * MIB,
    hostile: int = 3,
    hostile_size: int = 64 * 1024,
    out: Callable[[str], None] = print,
) -> Result:
    budget = EdgeLimits().body_budget_bytes
    with (
        tempfile.TemporaryDirectory(prefix="edge-abuse-") as temp,
        app_server(Path(temp), {"PAIR_READ_TIMEOUT_S": str(read_timeout_s)}) as server,
    ):
        pid = server.process.pid
        probe(server.url, 10, timeout_s=5.0)  # warm-up: first requests import and connect
        idle = probe(server.url, probes, timeout_s=5.0)
        rss_idle = rss_bytes(pid)
        with (
            RssPeak(pid) as rss,
            Abuse(
                server.port,
                uploads=uploads,
                trickles=trickles,
                every_s=every_s,
                upload_part=upload_part,
            ) as abuse,
        ):
            abuse.ramped()
            under = probe(server.url, probes, timeout_s=5.0)
            # Every trickling connection dropped at least once: the longest life is known.
            abuse.wait(lambda s: s.trickles_closed >= trickles, "the trickles to be dropped", 60)
        with concurrent_deliveries(server.url, hostile, hostile_size):
            parsed = probe(server.url, probes, timeout_s=5.0, deliveries=False)
    result = Result(
        idle,
        under,
        parsed,
        rss_idle,
        rss.peak,
        rss_idle + budget + RSS_SLACK,
        abuse.stats,
        read_timeout_s,
    )
    report(result, uploads=uploads, trickles=trickles, out=out)
    return result


@contextlib.contextmanager
def concurrent_deliveries(url: str, count: int, size: int) -> Iterator[None]:
    """`count` hostile comment deliveries in flight (in threads) while the block runs."""
    threads = []
    for _ in range(count):
        body, headers = hostile_delivery(size)
        thread = threading.Thread(
            target=lambda b=body, h=headers: httpx.post(
                url + "/webhooks/github", content=b, headers=h, timeout=_START_S
            ),
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    try:
        yield
    finally:
        for thread in threads:
            thread.join(_START_S)


def _ms(samples: list[float], quantile: float) -> str:
    if not samples:
        return "—"
    ordered = sorted(samples)
    return f"{ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1000:.1f}"


def report(result: Result, *, uploads: int, trickles: int, out: Callable[[str], None]) -> None:
    phases = [("idle", result.idle), ("abuse", result.abuse), ("hostile", result.hostile)]
    out(
        f"edge abuse: {uploads} partial 24 MiB uploads + {trickles} trickling connections; "
        f"{len(result.hostile.healthz)} probes in the hostile phase; read timeout "
        f"{result.read_timeout_s:g} s"
    )
    out(f"{'':28}" + "".join(f"{name:>16}" for name, _ in phases))
    for label, pick in (("healthz", "healthz"), ("delivery", "delivery")):
        for quantile, name in ((0.5, "p50"), (0.99, "p99")):
            row = "".join(f"{_ms(getattr(p, pick), quantile):>16}" for _, p in phases)
            out(f"{label + ' ' + name + ' ms':28}{row}")
    out(f"{'failed probes':28}" + "".join(f"{len(p.failures):>16}" for _, p in phases))
    out(
        f"server RSS MiB: idle {result.rss_idle / MIB:.0f}, peak under abuse "
        f"{result.rss_peak / MIB:.0f}, bound {result.rss_bound / MIB:.0f} "
        "(idle + body budget + 32 MiB)"
    )
    stats = result.stats
    out(
        f"uploads answered: {dict(stats.upload_answers)}, dropped after stalling: "
        f"{stats.uploads_dropped}; trickling connections dropped by the "
        f"server: {stats.trickles_closed} of {stats.trickles_opened} opened, answers "
        f"{dict(stats.trickle_answers)}, longest life {stats.longest_trickle_s:.1f} s"
    )
    if result.abuse.healthz and result.idle.healthz:
        ratio = statistics.median(result.abuse.healthz) / statistics.median(result.idle.healthz)
        out(
            "goal: healthz and delivery p99 under abuse < 1000 ms: "
            f"{_ms(result.abuse.healthz, 0.99)} / {_ms(result.abuse.delivery, 0.99)} ms; "
            f"healthz p50 under abuse / idle {ratio:.1f}x"
        )


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--uploads", type=int, default=12)
    parser.add_argument("--trickles", type=int, default=250)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--read-timeout", type=float, default=2.0)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--upload-part", type=int, default=20 * MIB)
    parser.add_argument("--hostile", type=int, default=3)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _arguments(sys.argv[1:])
    main(
        uploads=args.uploads,
        trickles=args.trickles,
        probes=args.probes,
        read_timeout_s=args.read_timeout,
        every_s=args.every,
        upload_part=args.upload_part,
        hostile=args.hostile,
    )
