"""Tokens and cost from the stream: reading reported figures, summing them, and showing them.

A figure never reported stays `None` (unknown), never zero. Numbers that are not non-negative
(finite) numbers are ignored as unknown. Each agent's own event is read in its vocabulary's
module (claude.py, opencode.py, codex.py, gemini.py); these are the pieces they share.
"""

from __future__ import annotations

import math

from app.engine.agent import AgentUsage

__all__ = ["add_usage", "count", "dollars", "figures", "uncached"]


def count(value: object) -> int | None:
    """A token count, or None unless `value` is a non-negative integer (bool is not one)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def dollars(value: object) -> float | None:
    """A cost in USD, or None unless `value` is a finite non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        amount = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return amount if math.isfinite(amount) and amount >= 0 else None


def _plus_int(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


def _plus_float(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else a + b


def add_usage(a: AgentUsage, b: AgentUsage) -> AgentUsage:
    """Sum two usages field by field; unknown plus unknown stays unknown."""
    return AgentUsage(
        input_tokens=_plus_int(a.input_tokens, b.input_tokens),
        output_tokens=_plus_int(a.output_tokens, b.output_tokens),
        cost_usd=_plus_float(a.cost_usd, b.cost_usd),
    )


def uncached(total: object, cached: object) -> int | None:
    """Input tokens without the cached part, when both figures are known and consistent."""
    whole = count(total)
    part = count(cached)
    if whole is None:
        return None
    if part is None:
        return whole if cached is None else None
    return whole - part if part <= whole else None


def figures(usage: AgentUsage, reasoning: int | None = None) -> str:
    """`in 1,200 · out 350 (incl. 50 reasoning) · $0.0031`; `?` marks an unknown figure."""

    def tokens(n: int | None) -> str:
        return "?" if n is None else f"{n:,}"

    out = tokens(usage.output_tokens)
    if reasoning:
        out += f" (incl. {reasoning:,} reasoning)"
    cost = "$?" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return f"in {tokens(usage.input_tokens)} · out {out} · {cost}"
