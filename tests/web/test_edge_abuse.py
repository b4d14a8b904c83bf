"""The App under the issue's abuse still answers, holds bounded memory and drops slow senders.

`pairbot serve --dev` (the installed console script, default limits but a 2 s read timeout)
takes 12 partial uploads (headers declaring 24 MiB, then 20 MiB of it, then nothing) and 250
connections that send a byte every half second — half of them their headers, half a body —
every dropped connection opened again at once. Meanwhile /healthz and an honest signed
delivery (the real `issue_comment` example) are answered 2xx; the server's RSS, read from
/proc/<pid>/status, stays under the bound docs/app.md states; and every trickling connection
is closed by the server within its read timeout. Latencies are benchmarks/edge_abuse.py's job:
here a probe only has to be answered within a generous client timeout, so load cannot fail it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.web.settings import MIB, EdgeLimits
from benchmarks import edge_abuse
from benchmarks.edge_abuse import RSS_SLACK, Abuse, RssPeak, app_server, probe, rss_bytes

pytestmark = pytest.mark.slow

READ_TIMEOUT_S = 2.0
_CLIENT_S = 5.0  # how long a probe may take: generous, never a measured latency
_BOUND_S = 90.0  # a deadline against hanging


def test_healthz_and_an_honest_delivery_answer_while_uploads_stall_and_connections_trickle(
    tmp_path: Path,
) -> None:
    with app_server(tmp_path, {"PAIR_READ_TIMEOUT_S": str(READ_TIMEOUT_S)}) as server:
        pid = server.process.pid
        warm = probe(server.url, 3, timeout_s=_CLIENT_S)
        assert warm.failures == [], warm.failures
        idle = rss_bytes(pid)
        with RssPeak(pid) as rss, Abuse(server.port, every_s=0.5) as abuse:
            abuse.ramped()
            answered = probe(server.url, 5, timeout_s=_CLIENT_S)
            assert answered.failures == [], (answered.failures, abuse.stats)
            assert (len(answered.healthz), len(answered.delivery)) == (5, 5)
            # Every one of the 250 first connections is dropped by the server, and an upload
            # the budget admitted is dropped at the read timeout too.
            abuse.wait(lambda s: s.trickles_closed >= 250, "the trickles to be dropped", _BOUND_S)
            abuse.wait(lambda s: s.uploads_dropped >= 1, "a stalled upload dropped", _BOUND_S)
            still = probe(server.url, 2, timeout_s=_CLIENT_S)
            assert still.failures == [], (still.failures, abuse.stats)
        stats = abuse.stats
        assert server.process.poll() is None
    bound = idle + EdgeLimits().body_budget_bytes + RSS_SLACK
    assert rss.peak < bound, f"RSS {rss.peak / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB"
    # Dropped within the read timeout (plus the protocol's one-second grace for a body, and
    # slack for a loaded machine): a deadline, not a measured time.
    assert stats.longest_trickle_s < READ_TIMEOUT_S + 1 + 4, stats
    assert set(stats.trickle_answers) <= {"408", "reset", "closed"}, stats
    assert set(stats.upload_answers) <= {"408", "503", "reset", "closed"}, stats


def test_the_abuse_benchmark_runs_at_a_tiny_size() -> None:
    printed: list[str] = []
    result = edge_abuse.main(
        uploads=2,
        trickles=4,
        probes=2,
        read_timeout_s=1.0,
        upload_part=MIB,
        hostile=1,
        hostile_size=4096,
        out=printed.append,
    )
    for phase in (result.idle, result.abuse):
        assert (len(phase.healthz), len(phase.delivery), phase.failures) == (2, 2, [])
    assert len(result.hostile.healthz) == 2 and result.hostile.delivery == []
    assert result.stats.trickles_closed >= 4 and result.rss_peak >= result.rss_idle
    table = "\n".join(printed)
    for line in ("healthz p99 ms", "delivery p50 ms", "server RSS MiB: idle", "longest life"):
        assert line in table
    assert "goal: healthz and delivery p99 under abuse < 1000 ms" in table
