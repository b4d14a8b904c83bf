"""The Action's request benchmark still runs: an idle tick and one straight cycle, no timing.

It spawns the Action a handful of times (a fresh runner each), so it is marked slow.
"""

from __future__ import annotations

import pytest

from benchmarks import action_requests

pytestmark = pytest.mark.slow


@pytest.mark.slow_first(15)
def test_the_benchmark_prints_its_table_for_a_tiny_configuration() -> None:
    printed: list[str] = []
    report = action_requests.main(
        ("no-card", "cycle"), blocking=False, baseline_runs=1, out=printed.append
    )
    whats = [(r.scenario, r.what) for r in report.rows]
    assert whats == [
        ("no-card", "idle (no card)"),
        ("cycle", "propose"),
        ("cycle", "apply"),
        ("cycle", "verify"),
        ("cycle", "publish"),
        ("cycle", "idle (ready-for-merge)"),
    ]
    # Every step reaches the API (so has a start-up figure); an idle tick never needs to.
    assert all(r.first_call_s is not None for r in report.rows if not r.what.startswith("idle"))
    assert all(r.counted == len([c for c in r.calls if c[2] != 304]) for r in report.rows)
    assert len(report.baseline_s) == 1
    table = "\n".join(printed)
    for text in (
        "counted",
        "1st call s",
        "start-up to the first API call",
        "ratio",
        "interpreter + the Action's imports",
        "target: an idle tick makes ≤ 2 counted requests",
        "target: under 1 s from process start to the first API call",
        "requests of the idle (no card) tick",
    ):
        assert text in table, text
