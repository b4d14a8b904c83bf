"""`pr-state:*` labels: the Enum is the table, exactly one at a time, the current one is a no-op."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hosts.labels import PREFIX, LabelPlan, PrState, plan_state_labels

ALL = list(PrState)


def test_every_value_is_a_prefixed_label_and_unique() -> None:
    values = [s.value for s in ALL]
    assert all(v.startswith(PREFIX) for v in values)
    assert len(set(values)) == len(values)
    assert all(v == v.lower() and " " not in v for v in values)


@pytest.mark.parametrize("state", ALL, ids=[s.value for s in ALL])
def test_of_maps_every_status_name(state: PrState) -> None:
    assert PrState.of(state.value.removeprefix(PREFIX)) is state


@pytest.mark.parametrize("state", ALL, ids=[s.value for s in ALL])
def test_setting_every_state_from_every_other(state: PrState) -> None:
    for current in ALL:
        plan = plan_state_labels(["bug", current.value], state)
        if current is state:
            assert plan.noop
        else:
            assert (plan.add, plan.remove) == ((state.value,), (current.value,))


@pytest.mark.parametrize("bad", ["bogus", "", "pr-state:merged", "Merged", "merged "])
def test_an_unknown_status_names_the_allowed_ones(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a pr-state") as error:
        PrState.of(bad)
    for state in ALL:
        assert state.value.removeprefix(PREFIX) in str(error.value)


def test_nothing_there_adds_only() -> None:
    assert plan_state_labels([], PrState.READY) == LabelPlan(add=("pr-state:ready",))


def test_the_current_one_is_a_no_op() -> None:
    plan = plan_state_labels(["bug", "pr-state:merged", "area:x"], PrState.MERGED)
    assert plan.noop
    assert plan == LabelPlan()


def test_every_stale_state_goes_and_nothing_else() -> None:
    current = ["pr-state:ready", "bug", "pr-state:failed-fix", "pr-state:merged", "pr-stateful"]
    plan = plan_state_labels(current, PrState.MERGED)
    assert plan == LabelPlan(add=(), remove=("pr-state:failed-fix", "pr-state:ready"))


def test_labels_are_compared_without_case() -> None:
    assert plan_state_labels(["PR-State:Merged"], PrState.MERGED).noop
    plan = plan_state_labels(["PR-STATE:READY"], PrState.MERGED)
    assert plan == LabelPlan(add=("pr-state:merged",), remove=("PR-STATE:READY",))


def test_an_unknown_pr_state_label_is_removed_too() -> None:
    plan = plan_state_labels(["pr-state:retired-status"], PrState.READY)
    assert plan.remove == ("pr-state:retired-status",)


def test_noop_property() -> None:
    assert LabelPlan().noop
    assert not LabelPlan(add=("a",)).noop
    assert not LabelPlan(remove=("a",)).noop


@given(
    current=st.lists(
        st.sampled_from([s.value for s in ALL] + ["bug", "area:ui", "PR-State:Ready"]), max_size=8
    ),
    state=st.sampled_from(ALL),
)
def test_applying_the_plan_leaves_exactly_one_state(current: list[str], state: PrState) -> None:
    plan = plan_state_labels(current, state)
    after = [lb for lb in current if lb not in plan.remove] + list(plan.add)
    states = {lb.casefold() for lb in after if lb.casefold().startswith(PREFIX)}
    assert states == {state.value}
    assert [lb for lb in after if not lb.casefold().startswith(PREFIX)] == [
        lb for lb in current if not lb.casefold().startswith(PREFIX)
    ]
    assert plan_state_labels(after, state).noop
