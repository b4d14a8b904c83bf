"""The pure half of work attribution: journal entries to snapshots, snapshots to group builds."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.boundary import detect_pr_group_boundaries, select_stacked_bases
from app.engine.work_line import (
    ChangeWork,
    GroupBuild,
    Snapshot,
    WorkStep,
    last_commit,
    plan_group_builds,
    work_branch,
    work_key,
    work_record,
    work_steps,
)

PHASES = [("one", ["a", "b"]), ("two", ["c"])]


def step(change: str | None, parent: str | None, commit: str, *files: str) -> WorkStep:
    return WorkStep(change, "apply", commit, parent, files or ("x",))


# base → a → b → a again (interleaved after a park) → c
STEPS = [
    step(None, "HEAD", "s0"),
    step("a", "s0", "s1"),
    step("b", "s1", "s2"),
    step("a", "s2", "s3"),
    step("c", "s3", "s4"),
]


def stack(mode: Any) -> Any:
    boundaries = detect_pr_group_boundaries("demo", PHASES, mode)
    return select_stacked_bases(boundaries, "main", lambda b: f"pair/demo/{b.group_id}")


@pytest.mark.parametrize(
    ("mode", "upto", "expected"),
    [
        pytest.param(
            "per-change",
            "a",
            [GroupBuild("pair/demo/a", "main", (ChangeWork("a", (("s0", "s1"), ("s2", "s3"))),))],
            id="group-0-on-the-base",
        ),
        pytest.param(
            "per-change",
            "b",
            [
                GroupBuild("pair/demo/a", "main", (ChangeWork("a", (("s0", "s1"), ("s2", "s3"))),)),
                GroupBuild("pair/demo/b", "pair/demo/a", (ChangeWork("b", (("s1", "s2"),)),)),
            ],
            id="group-n-stacks-on-n-1",
        ),
        pytest.param(
            "per-phase",
            "two",
            [
                GroupBuild(
                    "pair/demo/one",
                    "main",
                    (
                        ChangeWork("a", (("s0", "s1"), ("s2", "s3"))),
                        ChangeWork("b", (("s1", "s2"),)),
                    ),
                ),
                GroupBuild("pair/demo/two", "pair/demo/one", (ChangeWork("c", (("s3", "s4"),)),)),
            ],
            id="per-phase-one-commit-per-change",
        ),
        pytest.param(
            "whole-batch",
            "demo",
            [
                GroupBuild(
                    "pair/demo/demo",
                    "main",
                    (
                        ChangeWork("a", (("s0", "s1"), ("s2", "s3"))),
                        ChangeWork("b", (("s1", "s2"),)),
                        ChangeWork("c", (("s3", "s4"),)),
                    ),
                )
            ],
            id="whole-batch-every-change",
        ),
    ],
)
def test_plan_group_builds(mode: Any, upto: str, expected: list[GroupBuild]) -> None:
    assert plan_group_builds(STEPS, stack(mode), upto) == expected


def test_a_change_without_work_and_the_baseline_are_left_out() -> None:
    steps = [step(None, None, "s0"), step("a", "s0", "s1", *()), step("b", None, "s2")]
    steps[1] = WorkStep("a", "apply", "s1", "s0", ())  # nothing changed
    assert plan_group_builds(steps, stack("whole-batch"), "demo") == [
        GroupBuild("pair/demo/demo", "main", ())
    ]


def test_an_unknown_group_is_refused() -> None:
    with pytest.raises(ValueError, match="no PR group"):
        plan_group_builds(STEPS, stack("per-change"), "zz")


def test_work_entries_round_trip_through_the_journal_records() -> None:
    snap = Snapshot(commit="c1", parent="p0", files=("a.txt",))
    records = [
        {"kind": "outcome", "key": "a"},
        {"kind": "work", "key": work_key("other"), "data": work_record("x", "apply", snap)},
        {"kind": "work", "key": work_key("demo"), "data": {"change": "a"}},  # no commit: torn
        {"kind": "work", "key": work_key("demo"), "data": work_record("a", "apply", snap)},
    ]
    assert work_steps(records, "demo") == [WorkStep("a", "apply", "c1", "p0", ("a.txt",))]
    assert last_commit(work_steps(records, "demo")) == "c1"
    assert last_commit([]) is None
    assert work_branch("demo") == "pair-work/demo"
