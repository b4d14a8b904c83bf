"""The scale benchmark still runs: its smallest case, once, with no timing asserted."""

from __future__ import annotations

import pytest

from benchmarks import engine_scale


@pytest.mark.slow_first(8)
def test_benchmark_runs_at_its_smallest_size() -> None:
    printed: list[str] = []
    commands: list[engine_scale.CommandRow] = []
    rows = engine_scale.main(
        changes=(10,),
        entries=(1_000,),
        repeats=1,
        command_entries=(1_000,),
        out=printed.append,
        command_rows=commands,
    )
    assert [(r.changes, r.entries) for r in rows] == [(10, 1_000)]
    assert rows[0].floor_s > 0
    assert rows[0].status_s > 0
    assert rows[0].next_step == "ChangeTarget"
    table = "\n".join(printed)
    assert "floor ms" in table
    assert "status ms" in table
    assert "goal: status + selection" in table
    assert [r.entries for r in commands] == [1_000]
    assert commands[0].floor_s > 0
    assert commands[0].command_s > 0
    assert "`pairbot batch status` as a command" in table
    assert "≤ 4x:" in table  # 1k entries: the goal issue #26 set for one manifest model


@pytest.mark.slow_first(15)
def test_action_startup_benchmark_runs_once() -> None:
    from benchmarks import action_startup

    printed: list[str] = []
    report = action_startup.main(1, out=printed.append)
    assert len(report.baseline_s) == len(report.comment_s) == len(report.tick_s) == 1
    assert all(s > 0 for s in [*report.baseline_s, *report.comment_s, *report.tick_s])
    text = "\n".join(printed)
    assert "ratio first request / baseline" in text
    assert "target: first API request under 1 s" in text
    assert "idle tick (no card), wall time" in text


def test_built_journal_has_exactly_the_requested_entries() -> None:
    names = engine_scale.change_names(100)
    history = engine_scale.plan_history(names, 1_000)
    records = engine_scale.build_journal(names, history, 1_000)
    assert len(records) == 1_000
    kinds = {r["kind"] for r in records}
    assert {"step-started", "progress", "completion", "outcome", "proof-of-work"} <= kinds


def test_hostile_comment_benchmark_runs_one_shape() -> None:
    from benchmarks import hostile_comment

    printed: list[str] = []
    rows = hostile_comment.main(["nested comments"], repeats=1, out=printed.append)
    assert [row.shape for row in rows] == ["plain", "nested comments"]
    assert all(row.commands_ms > 0 and row.reader_ms > 0 for row in rows)
    assert "goal: commands + reader under 50 ms" in "\n".join(printed)
