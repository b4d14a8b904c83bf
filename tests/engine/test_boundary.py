"""PR group boundaries, stacked bases and journal keys (seed 000), table-driven."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from app.engine.boundary import (
    PrGroupBoundary,
    PrGrouping,
    StackedBase,
    detect_pr_group_boundaries,
    pr_journal_key,
    select_stacked_bases,
)

PLAN: list[tuple[str, Sequence[str]]] = [
    ("p1", ["a", "b"]),
    ("p2", []),
    ("p3", ["c"]),
    ("p4", []),
]


def test_off_yields_nothing() -> None:
    assert detect_pr_group_boundaries("batch", PLAN, "off") == []


def test_whole_batch_is_one_group_spanning_every_change() -> None:
    assert detect_pr_group_boundaries("batch", PLAN, "whole-batch") == [
        PrGroupBoundary(
            group_id="batch", index=0, phase="p3", changes=("a", "b", "c"), trigger_change="c"
        )
    ]


def test_per_phase_skips_empty_phases_without_an_index_gap() -> None:
    assert detect_pr_group_boundaries("batch", PLAN, "per-phase") == [
        PrGroupBoundary(group_id="p1", index=0, phase="p1", changes=("a", "b"), trigger_change="b"),
        PrGroupBoundary(group_id="p3", index=1, phase="p3", changes=("c",), trigger_change="c"),
    ]


def test_per_change_is_one_group_per_change_in_order() -> None:
    assert detect_pr_group_boundaries("batch", PLAN, "per-change") == [
        PrGroupBoundary(group_id="a", index=0, phase="p1", changes=("a",), trigger_change="a"),
        PrGroupBoundary(group_id="b", index=1, phase="p1", changes=("b",), trigger_change="b"),
        PrGroupBoundary(group_id="c", index=2, phase="p3", changes=("c",), trigger_change="c"),
    ]


@pytest.mark.parametrize("mode", ["off", "whole-batch", "per-phase", "per-change"])
@pytest.mark.parametrize(
    "phases",
    [
        pytest.param([], id="no-phases"),
        pytest.param([("p1", []), ("p2", [])], id="only-empty-phases"),
    ],
)
def test_a_batch_without_changes_has_no_groups(
    mode: PrGrouping, phases: list[tuple[str, Sequence[str]]]
) -> None:
    assert detect_pr_group_boundaries("batch", phases, mode) == []


@pytest.mark.parametrize("mode", ["whole-batch", "per-phase", "per-change"])
def test_indices_are_contiguous_and_trigger_is_last_member(mode: PrGrouping) -> None:
    boundaries = detect_pr_group_boundaries("batch", PLAN, mode)
    assert [b.index for b in boundaries] == list(range(len(boundaries)))
    assert all(b.trigger_change == b.changes[-1] for b in boundaries)


def _branch(boundary: PrGroupBoundary) -> str:
    return f"pr/{boundary.group_id}"


def _groups(*ids: str) -> list[PrGroupBoundary]:
    return [
        PrGroupBoundary(group_id=g, index=i, phase="p", changes=(g,), trigger_change=g)
        for i, g in enumerate(ids)
    ]


def test_no_groups_stack_nothing() -> None:
    assert select_stacked_bases([], "main", _branch) == []


def test_a_single_group_targets_the_batch_base() -> None:
    (only,) = _groups("a")
    assert select_stacked_bases([only], "main", _branch) == [
        StackedBase(boundary=only, base_branch="main", head_branch="pr/a")
    ]


def test_three_groups_stack_on_each_other() -> None:
    a, b, c = _groups("a", "b", "c")
    assert select_stacked_bases([a, b, c], "main", _branch) == [
        StackedBase(boundary=a, base_branch="main", head_branch="pr/a"),
        StackedBase(boundary=b, base_branch="pr/a", head_branch="pr/b"),
        StackedBase(boundary=c, base_branch="pr/b", head_branch="pr/c"),
    ]


def test_stacking_follows_list_order_not_the_index_field() -> None:
    a, b, c = _groups("a", "b", "c")
    stacked = select_stacked_bases([c, a, b], "main", _branch)
    assert [(s.boundary.group_id, s.base_branch, s.head_branch) for s in stacked] == [
        ("c", "main", "pr/c"),
        ("a", "pr/c", "pr/a"),
        ("b", "pr/a", "pr/b"),
    ]


def test_stacking_the_detected_per_phase_groups() -> None:
    boundaries = detect_pr_group_boundaries("batch", PLAN, "per-phase")
    stacked = select_stacked_bases(boundaries, "main", _branch)
    assert [(s.base_branch, s.head_branch) for s in stacked] == [
        ("main", "pr/p1"),
        ("pr/p1", "pr/p3"),
    ]


def test_journal_keys() -> None:
    (group,) = _groups("p1")
    assert pr_journal_key("batch", None) == "pr:batch"
    assert pr_journal_key("batch", group) == "pr:batch:p1"
