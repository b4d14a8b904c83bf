"""The command-path benchmark still runs: a tiny size, every server, no time asserted."""

from __future__ import annotations

from benchmarks import command_path


def test_the_command_path_benchmark_runs_and_prints_its_ratios() -> None:
    printed: list[str] = []
    figures = command_path.main(
        ["--requests", "20", "--runs", "1", "--burst-seconds", "0.3", "--latency-ms", "1"],
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
    ):
        assert line in table, table
    run = figures[0]
    for measured in (run.floor_non, run.app_non, run.floor_cmd, run.app_cmd):
        assert (measured.measured.requests, measured.measured.failures) == (20, 0)
    # Both answered the commands and made their calls: the App's jobs ran against the forge.
    assert run.app_cmd.forge_requests >= 3 * 20 and run.floor_cmd.forge_requests >= 3 * 20
