"""Budgets that stop: what a card (or a batch) has spent against its limits, and whether an
accepted step took it over one. Pure.

A budget is `{tokens, costUsd, steps}`, each optional. `steps` is spent once that many agent
steps ran (a budget of 1 step parks after the first accepted step); `tokens` and `costUsd` stop
the card once the known sum goes over the limit. The spend is read from the journal
records the engine already writes (each agent step's `usage` on its outcome, reduced by
`app.domain.reports.metrics`): `steps` counts the agent steps that ran (a failed attempt too: it was
paid for), `tokens` and `costUsd` sum what the agents reported.

Unknown usage is unknown, never zero: a step that reported no token count adds nothing to the
known sum, is counted as unknown, and the budget line says so ("usage unknown for 1 of 3
steps"). A limit is exceeded only by what is known.

A maintainer continues past the budget with `/pair approve` (`pairbot batch approve`): the
approval is journaled with `data.budget`, and the spend is counted afresh from it, so each
approval grants one more budget's worth. Raising the limit in the file works too, once the
park is approved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from app.domain.reports.metrics import reduce_metrics

# The `data` key an approval carries when it continues past a budget (app/cycle/humans.py).
BUDGET_APPROVAL: Final = "budget"


@dataclass(frozen=True)
class Budget:
    """The limits; None means that figure is not limited."""

    tokens: int | None = None
    cost_usd: float | None = None
    steps: int | None = None

    @property
    def limits_anything(self) -> bool:
        """Whether any limit is set."""
        return any(v is not None for v in (self.tokens, self.cost_usd, self.steps))


class BudgetLimits(Protocol):
    """The `budget:` key of a user's file, as its model (`app.engine.manifest`) reads it."""

    @property
    def tokens(self) -> int | None: ...

    @property
    def cost_usd(self) -> float | None: ...

    @property
    def steps(self) -> int | None: ...


def budget_of(limits: BudgetLimits | None) -> Budget | None:
    """The budget a file's `budget:` key sets; None when the file sets none.

    Here rather than on the model, so that reading a manifest does not load the spend's
    reduction (`app.domain.reports.metrics`) that only checking a budget needs.
    """
    if limits is None:
        return None
    return Budget(tokens=limits.tokens, cost_usd=limits.cost_usd, steps=limits.steps)


@dataclass(frozen=True)
class BudgetUse:
    """What was spent: known sums, and how many steps left each figure unknown."""

    steps: int = 0
    tokens: int = 0
    tokens_unknown: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0


def _counted(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records after the last budget approval (each approval starts a fresh budget)."""
    last = -1
    for index, record in enumerate(records):
        data = record.get("data")
        if (
            record.get("kind") == "approval"
            and isinstance(data, Mapping)
            and data.get(BUDGET_APPROVAL)
        ):
            last = index
    return list(records[last + 1 :])


def budget_use(records: Sequence[Mapping[str, Any]], key: str | None = None) -> BudgetUse:
    """The spend in `records` (journal order) for `key`, or for every key when None."""
    chosen = [r for r in records if isinstance(r, Mapping) and (key is None or r.get("key") == key)]
    steps = [s for s in reduce_metrics(_counted(chosen), as_of="").steps if s.agent]
    return BudgetUse(
        steps=len(steps),
        tokens=sum(s.tokens for s in steps if s.tokens is not None),
        tokens_unknown=sum(1 for s in steps if s.tokens is None),
        cost_usd=sum(s.cost_usd for s in steps if s.cost_usd is not None),
        cost_unknown=sum(1 for s in steps if s.cost_usd is None),
    )


def exceeded(budget: Budget, use: BudgetUse) -> tuple[str, ...]:
    """The limits the spend has reached (`steps`, `tokens`, `costUsd`), in that order.

    `steps` is spent once that many steps ran (a budget of 1 step stops after the first);
    tokens and cost are exceeded when the known sum goes over the limit.
    """
    over: list[str] = []
    if budget.steps is not None and use.steps >= budget.steps:
        over.append("steps")
    if budget.tokens is not None and use.tokens > budget.tokens:
        over.append("tokens")
    if budget.cost_usd is not None and use.cost_usd > budget.cost_usd:
        over.append("costUsd")
    return tuple(over)


def _amount(n: int) -> str:
    """`950`, `1.2k`, `120k`, `3.4M`: the figure a person compares with its limit."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= size:
            text = f"{n / size:.1f}".removesuffix(".0")
            return f"{text}{suffix}"
    return str(n)


def budget_line(budget: Budget, use: BudgetUse) -> str:
    """`budget: 3/1 steps, 120k/100k tokens, $1.20 of $1.00; usage unknown for 1 of 3 steps`.

    Only the limited figures are shown. A figure no step reported reads `unknown`.
    """
    parts: list[str] = []
    unknown = 0
    if budget.steps is not None:
        parts.append(f"{use.steps}/{budget.steps} steps")
    if budget.tokens is not None:
        known = use.tokens_unknown < use.steps or use.steps == 0
        spent = _amount(use.tokens) if known else "unknown"
        parts.append(f"{spent}/{_amount(budget.tokens)} tokens")
        unknown = max(unknown, use.tokens_unknown)
    if budget.cost_usd is not None:
        known = use.cost_unknown < use.steps or use.steps == 0
        spent = f"${use.cost_usd:.2f}" if known else "unknown"
        parts.append(f"{spent} of ${budget.cost_usd:.2f}")
        unknown = max(unknown, use.cost_unknown)
    line = "budget: " + ", ".join(parts)
    if unknown and (budget.tokens is not None or budget.cost_usd is not None):
        line += f"; usage unknown for {unknown} of {use.steps} step{'s' if use.steps != 1 else ''}"
    return line


@dataclass(frozen=True)
class BudgetCheck:
    """One scope's budget after a step: the figures, and the limits it is over."""

    scope: str  # "card" or "batch"
    line: str
    over: tuple[str, ...]


def check_budget(
    scope: str, budget: Budget | None, records: Sequence[Mapping[str, Any]], key: str | None
) -> BudgetCheck | None:
    """The scope's budget figures after the step the records end with; None when unlimited."""
    if budget is None or not budget.limits_anything:
        return None
    use = budget_use(records, key)
    return BudgetCheck(scope=scope, line=budget_line(budget, use), over=exceeded(budget, use))


def park_reason(checks: Sequence[BudgetCheck]) -> str | None:
    """Why the step parks `awaiting-human`, or None when no budget is exceeded."""
    over = [c for c in checks if c.over]
    if not over:
        return None
    said = "; ".join(f"{c.scope} budget spent ({', '.join(c.over)}) — {c.line}" for c in over)
    return f"{said}. `/pair approve` continues with a fresh budget"
