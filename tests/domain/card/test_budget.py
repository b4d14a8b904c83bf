"""Budget arithmetic over journal records: known sums, unknown counted as unknown, the line a
person reads, and a budget approval starting the count afresh."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.card.budget import (
    Budget,
    BudgetUse,
    budget_line,
    budget_use,
    check_budget,
    exceeded,
    park_reason,
)


def step(
    key: str,
    n: int,
    *,
    tokens: tuple[int, int] | None = None,
    cost: float | None = None,
    state: str = "advanced",
) -> list[dict[str, Any]]:
    usage = None
    if tokens is not None or cost is not None:
        usage = {
            "inputTokens": tokens[0] if tokens else None,
            "outputTokens": tokens[1] if tokens else None,
            "costUsd": cost,
        }
    started = {"kind": "step-started", "key": key, "transition": "apply", "session": f"s{n}"}
    ended = {
        "kind": "outcome",
        "key": key,
        "transition": "apply",
        "session": f"s{n}",
        "state": state,
        "usage": usage,
    }
    return [started, ended]


def test_use_sums_what_is_known_and_counts_what_is_not() -> None:
    records = [
        *step("a", 1, tokens=(100_000, 20_000), cost=1.2),
        *step("a", 2),
        *step("a", 3, tokens=(1, 2), state="failed"),
        *step("b", 4, tokens=(5, 5), cost=0.5),
    ]
    assert budget_use(records, "a") == BudgetUse(
        steps=3, tokens=120_003, tokens_unknown=1, cost_usd=1.2, cost_unknown=2
    )
    assert budget_use(records).steps == 4


def test_the_line_a_person_reads() -> None:
    use = BudgetUse(steps=3, tokens=120_000, tokens_unknown=1, cost_usd=1.2, cost_unknown=1)
    budget = Budget(tokens=100_000, cost_usd=1.0, steps=1)
    assert budget_line(budget, use) == (
        "budget: 3/1 steps, 120k/100k tokens, $1.20 of $1.00; usage unknown for 1 of 3 steps"
    )
    assert exceeded(budget, use) == ("steps", "tokens", "costUsd")


@pytest.mark.parametrize(
    ("tokens", "shown"),
    [
        pytest.param(950, "950", id="units"),
        pytest.param(1_200, "1.2k", id="thousands"),
        pytest.param(3_400_000, "3.4M", id="millions"),
        pytest.param(2_000_000, "2M", id="round"),
    ],
)
def test_amounts(tokens: int, shown: str) -> None:
    line = budget_line(Budget(tokens=10), BudgetUse(steps=1, tokens=tokens))
    assert line == f"budget: {shown}/10 tokens"


def test_unknown_usage_is_never_zero_and_never_exceeds() -> None:
    use = BudgetUse(steps=2, tokens=0, tokens_unknown=2, cost_usd=0.0, cost_unknown=2)
    budget = Budget(tokens=1, cost_usd=0.01)
    assert budget_line(budget, use) == (
        "budget: unknown/1 tokens, unknown of $0.01; usage unknown for 2 of 2 steps"
    )
    assert exceeded(budget, use) == ()


def test_a_steps_only_budget_says_nothing_of_usage() -> None:
    use = BudgetUse(steps=1, tokens_unknown=1, cost_unknown=1)
    assert budget_line(Budget(steps=2), use) == "budget: 1/2 steps"


def test_a_budget_approval_starts_a_fresh_count() -> None:
    records = [
        *step("a", 1),
        {"kind": "approval", "key": "a", "data": {"budget": True}},
        *step("a", 2),
        {"kind": "approval", "key": "a"},  # a gate's approval: not a budget's
    ]
    assert budget_use(records, "a").steps == 1


def test_check_and_park_reason() -> None:
    records = step("a", 1)
    assert check_budget("card", None, records, "a") is None
    assert check_budget("card", Budget(), records, "a") is None
    spent = check_budget("card", Budget(steps=1), records, "a")
    room = check_budget("batch", Budget(steps=5), records, None)
    assert spent is not None and room is not None
    assert park_reason([room]) is None
    assert park_reason([spent, room]) == (
        "card budget spent (steps) — budget: 1/1 steps. "
        "`/pair approve` continues with a fresh budget"
    )
