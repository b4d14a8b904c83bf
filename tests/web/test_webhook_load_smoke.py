"""The webhook load benchmark still runs: a tiny size, both servers, no timing asserted."""

from __future__ import annotations

from benchmarks import webhook_load


def test_the_webhook_benchmark_runs_at_a_tiny_size() -> None:
    printed: list[str] = []
    result = webhook_load.main(requests=40, seconds=0.2, concurrency=4, out=printed.append)
    for measured in (result.bare_max, result.app_max):
        assert (measured.requests, measured.failures) == (40, 0)
    for measured in (result.bare_rate, result.app_rate):
        assert (measured.requests, measured.failures) == (20, 0)
    table = "\n".join(printed)
    assert "app/bare" in table and "max rate: throughput /s" in table
    assert "goal: app throughput >= 0.5x bare" in table
    assert "goal: app p99 < 50 ms at 100 requests/s" in table
