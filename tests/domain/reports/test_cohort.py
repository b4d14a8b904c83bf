"""reduce_cohort: completion, cycles to done (mean, median, p90), fix rounds, usage coverage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.reports.cohort import (
    CardFigures,
    nearest_rank,
    reduce_cohort,
    render_cohort,
    spread,
)
from app.domain.reports.metrics_model import Quantity

UNKNOWN = Quantity(value=None, coverage="unknown", reported=0, total=3)


def figures(
    card: int,
    status: str,
    cycles: int = 0,
    *,
    fixes: int = 0,
    tokens: Quantity = UNKNOWN,
    cost: Quantity = UNKNOWN,
) -> CardFigures:
    return CardFigures(
        card=card,
        status=status,
        cycles=cycles,
        fix_rounds=fixes,
        reviews=cycles + 1,
        tokens=tokens,
        cost_usd=cost,
    )


def known(value: float, total: int = 2) -> Quantity:
    return Quantity(value=value, coverage="known", reported=total, total=total)


def partial(value: float) -> Quantity:
    return Quantity(value=value, coverage="partial", reported=1, total=2)


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        pytest.param([5], 0.9, 5, id="one"),
        pytest.param([1, 2, 3], 0.9, 3, id="three"),
        pytest.param(list(range(1, 11)), 0.9, 9, id="ten"),
        pytest.param([3, 1, 2, 4], 0.5, 2, id="unsorted-median-rank"),
    ],
)
def test_nearest_rank(values: list[int], fraction: float, expected: int) -> None:
    assert nearest_rank(values, fraction) == expected


@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40))
def test_spread_is_ordered(values: list[int]) -> None:
    result = spread(values)
    assert result.count == len(values)
    assert result.mean is not None and result.median is not None and result.p90 is not None
    assert min(values) <= result.median <= result.p90 <= max(values)
    assert min(values) <= result.mean <= max(values)


def test_the_report_over_mixed_cards() -> None:
    cohort = reduce_cohort(
        [
            figures(4, "blocked", fixes=1, tokens=partial(100), cost=partial(0.25)),
            figures(1, "merged", 0, tokens=known(1_000), cost=known(1.5)),
            figures(2, "ready-for-merge", 2, fixes=2, tokens=known(3_000), cost=known(0.5)),
            figures(3, "abandoned"),
        ]
    )
    data = cohort.to_json()
    assert [row["card"] for row in data["perCard"]] == [1, 2, 3, 4]
    assert data["byStatus"] == {"abandoned": 1, "blocked": 1, "merged": 1, "ready-for-merge": 1}
    assert (data["completed"], data["completionRate"]) == (2, 0.5)
    assert data["cyclesToDone"] == {"count": 2, "mean": 2.0, "median": 2.0, "p90": 3.0}
    assert data["fixRounds"] == {"total": 3, "meanPerCard": 0.75}
    assert data["tokens"] == {
        "value": 4_100,
        "coverage": "partial",
        "cardsReporting": 3,
        "cards": 4,
    }
    assert data["costUsd"]["value"] == 2.25
    text = render_cohort(cohort)
    assert "completed (ready-for-merge or merged): 2 (50.0%)" in text
    assert "by status: abandoned 1, blocked 1, merged 1, ready-for-merge 1" in text
    assert "tokens: 4,100 (partial: 3 of 4 cards reported usage)" in text
    assert "cost: $2.2500 (partial: 3 of 4 cards reported usage)" in text


def test_all_known_usage_is_known_and_nothing_completed_is_said_so() -> None:
    cohort = reduce_cohort([figures(1, "blocked", tokens=known(10), cost=known(0.1))])
    assert cohort.tokens.coverage == "known"
    assert cohort.cycles_to_done.mean is None
    text = render_cohort(cohort)
    assert "cycles to done: no card completed" in text
    assert "completed (ready-for-merge or merged): 0 (0.0%)" in text


def test_no_usage_anywhere_is_unknown_never_zero() -> None:
    cohort = reduce_cohort([figures(1, "merged"), figures(2, "unknown")])
    assert cohort.tokens.value is None and cohort.tokens.coverage == "unknown"
    assert cohort.cost_usd.value is None
    text = render_cohort(cohort)
    assert "tokens: unknown (no card reported usage)" in text
    assert "0 tokens" not in text


def test_no_card() -> None:
    cohort = reduce_cohort([])
    assert cohort.completion_rate is None and cohort.fix_rounds_mean is None
    assert render_cohort(cohort) == "no card has a pairbot cycle here yet\n"
