"""The edge-targets benchmark still runs: a tiny size, the forge answering, its lines checked."""

from __future__ import annotations

from benchmarks import edge_targets


def test_the_edge_targets_benchmark_prints_every_ratio_at_a_tiny_size() -> None:
    printed: list[str] = []
    # A tiny size bounds the run: about 250 deliveries, 0.2 s of them at 100/s, two runs.
    results = edge_targets.main(requests=30, seconds=0.2, runs=2, out=printed.append)
    text = "\n".join(printed)
    for line in (
        "non-command deliveries: app/floor = ",
        "duplicate CPU / new delivery CPU = ",
        "p99 at 100 requests/s = ",
        "p99 at saturation, 16 connections = ",
        "app, command answered and run: ",
        "2 runs:",
    ):
        assert line in text, (line, text)
    assert "non-2xx answers: 0;" in text
    assert len(results) == 2
    result = results[0]
    assert result.app_duplicate.load.requests == 30
    assert result.app_command_rate.load.requests == 20
    # The jobs ran against a forge that answers: each command called it, none failed.
    assert result.failed_jobs == 0
    assert result.forge_per_command >= 2
