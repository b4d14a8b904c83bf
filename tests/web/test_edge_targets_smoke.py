"""The edge-targets benchmark still runs: a tiny size, every server, only its lines checked."""

from __future__ import annotations

from benchmarks import edge_targets
from tests.support.postgres import require_server


def test_the_edge_targets_benchmark_prints_every_ratio_at_a_tiny_size() -> None:
    url = require_server()
    printed: list[str] = []
    result = edge_targets.main(requests=30, seconds=0.2, postgres_url=url, out=printed.append)
    text = "\n".join(printed)
    for line in (
        "non-command deliveries: app/floor = ",
        "command deliveries: app/floor = ",
        "duplicate CPU / new delivery CPU = ",
        "p99 at 100 requests/s = ",
        "p99 at saturation, 16 connections = ",
        "two replicas on PostgreSQL at max rate: CPU per command delivery / one SQLite replica's",
        "two replicas on PostgreSQL at 100 requests/s: CPU per command delivery / one SQLite",
        "two replicas on PostgreSQL: throughput ",
    ):
        assert line in text, (line, text)
    assert "non-2xx answers: 0;" in text
    assert result.replicas_command.load.requests == 30
    assert result.app_duplicate.load.requests == 30
    assert result.replicas_command_rate.load.requests == 20
