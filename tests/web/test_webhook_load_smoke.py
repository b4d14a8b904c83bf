"""The webhook load benchmark still runs: a tiny size, all three servers, no timing asserted."""

from __future__ import annotations

from benchmarks import webhook_load


def test_the_webhook_benchmark_runs_at_a_tiny_size() -> None:
    printed: list[str] = []
    result = webhook_load.main(requests=40, seconds=0.2, concurrency=4, out=printed.append)
    for measured in (result.bare_max, result.app_max, result.floor_max):
        assert (measured.requests, measured.failures) == (40, 0)
    for measured in (result.bare_rate, result.app_rate):
        assert (measured.requests, measured.failures) == (20, 0)
    table = "\n".join(printed)
    assert "app/bare" in table and "max rate: throughput /s" in table
    assert "goal: app throughput >= 0.5x bare" in table
    assert "goal: app p99 < 50 ms at 100 requests/s" in table
    # Who was busy, and what the App's worker did: the figures that say whether a run was fair.
    assert "max rate: server CPU us/req" in table and "max rate: driver CPU busy %" in table
    assert "all three servers: uvicorn" in table and "app worker, max rate:" in table
    for measured in (result.app_max, result.app_rate):
        assert measured.jobs_done is not None and measured.drain_s is not None
        assert 0 <= measured.jobs_done <= measured.requests
    # The floor: what the mandatory read, verify and parse leave of the bare throughput.
    assert "the floor (read, verify, parse; nothing routed or recorded)" in table
    assert result.floor_max.throughput > 0 and result.floor_ratio > 0
