"""The cohort report: how a project's cards went, reduced from per-card figures. Pure.

`reduce_cohort(cards)` takes one `CardFigures` per card (the shell, `app.cycle.cohort_journals`,
derives them from each card's journal) and returns `Cohort`:

    cards            how many cards have a cycle
    byStatus         count of cards by final status (the card's latest `pr-state`, without the
                     prefix; `unknown` when no status was ever set)
    completed        cards whose cycle reached `ready-for-merge` or `merged`
    completionRate   completed / cards (None with no card)
    cyclesToDone     over the completed cards: mean, median and p90 (nearest rank) of the
                     cycles each took — the first implement-and-review cycle plus each
                     completed fix round (a fix the review then re-checked); None when no card
                     completed
    fixRounds        accepted fix steps over all cards (total, and the mean per card)
    tokens, costUsd  sums over the cards that reported any usage, with coverage: `known` when
                     every card reported all of its agent steps, `partial` when some did (the
                     value is the sum of what was reported), `unknown` (None) when none did —
                     never a made-up 0; `cardsReporting` says how many cards reported usage

The order of `cards` does not matter: every figure is a sum, a count or an order statistic.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.domain.reports.metrics_model import Quantity

COHORT_SCHEMA = 1
COMPLETED_STATUSES: frozenset[str] = frozenset({"ready-for-merge", "merged"})
Coverage = Literal["known", "partial", "unknown"]


@dataclass(frozen=True)
class CardFigures:
    """One card's figures, from its journal (all of its cycles; the status of the latest)."""

    card: int
    status: str
    cycles: int  # completed fix rounds (an accepted fix that a review re-checked)
    fix_rounds: int  # accepted fix steps, reviewed or not
    reviews: int  # accepted review executions
    tokens: Quantity
    cost_usd: Quantity

    @property
    def completed(self) -> bool:
        """The cycle reached ready-for-merge or was merged."""
        return self.status in COMPLETED_STATUSES

    def to_json(self) -> dict[str, Any]:
        """One card's row of the `--json` report."""
        return {
            "card": self.card,
            "status": self.status,
            "completed": self.completed,
            "cycles": self.cycles,
            "fixRounds": self.fix_rounds,
            "reviews": self.reviews,
            "tokens": self.tokens.value,
            "tokensCoverage": self.tokens.coverage,
            "costUsd": self.cost_usd.value,
            "costCoverage": self.cost_usd.coverage,
        }


@dataclass(frozen=True)
class Spread:
    """Mean, median and p90 of some counts; all None when there were none."""

    count: int
    mean: float | None
    median: float | None
    p90: float | None

    def to_json(self) -> dict[str, Any]:
        """Stable keys."""
        return {"count": self.count, "mean": self.mean, "median": self.median, "p90": self.p90}


@dataclass(frozen=True)
class Total:
    """A sum over the cards with how many cards reported it."""

    value: float | None
    coverage: Coverage
    cards_reporting: int
    cards: int

    def to_json(self) -> dict[str, Any]:
        """Stable keys."""
        return {
            "value": self.value,
            "coverage": self.coverage,
            "cardsReporting": self.cards_reporting,
            "cards": self.cards,
        }


@dataclass(frozen=True)
class Cohort:
    """The whole report."""

    cards: tuple[CardFigures, ...]
    by_status: dict[str, int]
    completed: int
    completion_rate: float | None
    cycles_to_done: Spread
    fix_rounds_total: int
    fix_rounds_mean: float | None
    tokens: Total
    cost_usd: Total

    def to_json(self) -> dict[str, Any]:
        """`pairbot report cohort --json`: the keys docs/cli.md documents, in a fixed order."""
        return {
            "schema": COHORT_SCHEMA,
            "cards": len(self.cards),
            "completed": self.completed,
            "completionRate": self.completion_rate,
            "byStatus": dict(sorted(self.by_status.items())),
            "cyclesToDone": self.cycles_to_done.to_json(),
            "fixRounds": {"total": self.fix_rounds_total, "meanPerCard": self.fix_rounds_mean},
            "tokens": self.tokens.to_json(),
            "costUsd": self.cost_usd.to_json(),
            "perCard": [card.to_json() for card in self.cards],
        }


def _round(value: float) -> float:
    return round(value, 3)


def nearest_rank(values: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile: the smallest value with at least `fraction` of the values
    at or below it (`values` non-empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def spread(values: Sequence[int]) -> Spread:
    """Mean, median and p90 of `values` (all None for none)."""
    if not values:
        return Spread(count=0, mean=None, median=None, p90=None)
    return Spread(
        count=len(values),
        mean=_round(statistics.fmean(values)),
        median=_round(float(statistics.median(values))),
        p90=float(nearest_rank(values, 0.9)),
    )


def _total(quantities: Sequence[Quantity], digits: int) -> Total:
    reported = [q for q in quantities if q.value is not None]
    if not reported:
        coverage: Coverage = "unknown"
    elif len(reported) == len(quantities) and all(q.coverage == "known" for q in reported):
        coverage = "known"
    else:
        coverage = "partial"
    value = round(math.fsum(float(q.value) for q in reported if q.value is not None), digits)
    return Total(
        value=value if reported else None,
        coverage=coverage,
        cards_reporting=len(reported),
        cards=len(quantities),
    )


def reduce_cohort(cards: Sequence[CardFigures]) -> Cohort:
    """The cohort report over `cards` (ordered by card number in the result)."""
    ordered = tuple(sorted(cards, key=lambda c: c.card))
    by_status: dict[str, int] = {}
    for card in ordered:
        by_status[card.status] = by_status.get(card.status, 0) + 1
    done = [card for card in ordered if card.completed]
    fix_total = sum(card.fix_rounds for card in ordered)
    tokens = _total([card.tokens for card in ordered], 0)
    return Cohort(
        cards=ordered,
        by_status=dict(sorted(by_status.items())),
        completed=len(done),
        completion_rate=_round(len(done) / len(ordered)) if ordered else None,
        cycles_to_done=spread([1 + card.cycles for card in done]),
        fix_rounds_total=fix_total,
        fix_rounds_mean=_round(fix_total / len(ordered)) if ordered else None,
        tokens=Total(
            value=int(tokens.value) if tokens.value is not None else None,
            coverage=tokens.coverage,
            cards_reporting=tokens.cards_reporting,
            cards=tokens.cards,
        ),
        cost_usd=_total([card.cost_usd for card in ordered], 6),
    )


def _number(value: float | None, fmt: str = "{:g}") -> str:
    return "unknown" if value is None else fmt.format(value)


def _total_line(name: str, total: Total, fmt: str) -> str:
    if total.value is None:
        return f"{name}: unknown (no card reported usage)"
    shown = fmt.format(total.value)
    return (
        f"{name}: {shown} ({total.coverage}: {total.cards_reporting} of {total.cards} cards "
        "reported usage)"
    )


def render_cohort(cohort: Cohort) -> str:
    """The plain-text report `pairbot report cohort` prints."""
    if not cohort.cards:
        return "no card has a pairbot cycle here yet\n"
    rate = cohort.completion_rate
    spread_ = cohort.cycles_to_done
    statuses = ", ".join(f"{name} {count}" for name, count in cohort.by_status.items())
    lines = [
        f"cards: {len(cohort.cards)}",
        f"completed (ready-for-merge or merged): {cohort.completed}"
        f" ({_number(rate * 100 if rate is not None else None, '{:.1f}')}%)",
        f"by status: {statuses}",
        "cycles to done: "
        + (
            "no card completed"
            if spread_.count == 0
            else f"mean {_number(spread_.mean)}, median {_number(spread_.median)}, "
            f"p90 {_number(spread_.p90)} (over {spread_.count} cards)"
        ),
        f"fix rounds: {cohort.fix_rounds_total} in all, {_number(cohort.fix_rounds_mean)} per card",
        _total_line("tokens", cohort.tokens, "{:,.0f}"),
        _total_line("cost", cohort.cost_usd, "${:,.4f}"),
    ]
    return "\n".join(lines) + "\n"
