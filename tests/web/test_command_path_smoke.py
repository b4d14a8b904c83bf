"""The command-path benchmark still runs: a tiny size, every server, no time asserted."""

from __future__ import annotations

from pathlib import Path

from benchmarks import command_path
from benchmarks.command_replicas import Comparison
from tests.support.postgres import require_server


def test_the_command_path_benchmark_runs_and_prints_its_ratios() -> None:
    printed: list[str] = []
    args = ["--requests", "20", "--runs", "1", "--rounds", "2", "--burst-seconds", "0.3"]
    figures = command_path.main(
        [*args, "--latency-ms", "1"],
        out=printed.append,
    )
    table = "\n".join(printed)
    assert len(figures) == 1
    for line in (
        "CPU per command / floor's:",
        "command p99 / edge floor's (non-command) p99:",
        "non-command throughput / floor's:",
        "command: forge requests each",
        "burst: 3 commands at 10/s",
        "command: loop on a CPU",
        "command: loop waiting for a CPU",
    ):
        assert line in table, table
    run = figures[0]
    assert isinstance(run, command_path.Figures)
    for measured in (run.floor_non, run.app_non, run.floor_cmd, run.app_cmd):  # 2 rounds pooled
        assert (measured.measured.requests, measured.measured.failures) == (40, 0)
        assert len(measured.measured.latencies_ms) == 40
    # The scheduler's account of each server's event loop while it answered (Linux /proc).
    if Path("/proc/self/schedstat").exists():
        for measured in (run.floor_non, run.app_non, run.floor_cmd, run.app_cmd):
            assert measured.loop_cpu_s > 0, measured
    # Both answered the commands and made their calls: the App's jobs ran against the forge.
    assert run.app_cmd.forge_requests >= 3 * 40 and run.floor_cmd.forge_requests >= 3 * 40


def test_the_replicas_comparison_runs_against_postgresql() -> None:
    """Two replicas on a fresh PostgreSQL database against one SQLite App, at a tiny size:
    both answered and ran every command with the same calls (skips without a PostgreSQL)."""
    url = require_server()
    printed: list[str] = []
    args = ["--replicas", "--postgres", url, "--requests", "20", "--runs", "1", "--rounds", "2"]
    returned = command_path.main(
        [*args, "--rate", "20", "--rate-seconds", "1", "--latency-ms", "1"], out=printed.append
    )
    comparisons = [c for c in returned if isinstance(c, Comparison)]
    table = "\n".join(printed)
    assert "two PostgreSQL replicas / one SQLite App" in table, table
    assert "PostgreSQL transactions per command" in table, table
    assert [c.load for c in comparisons] == ["max rate", "20/s"]
    for comparison in comparisons:
        for side in (comparison.sqlite, comparison.replicas):  # 2 rounds of 20, pooled
            assert (side.measured.requests, side.measured.failures) == (40, 0)
            assert side.forge_requests >= 3 * side.measured.requests  # the jobs ran
        assert comparison.sqlite.database_cpu_s == 0  # SQLite has no server to count
        assert comparison.replicas.transactions >= comparison.replicas.measured.requests
