"""A review panel's step records the reviewers' summed usage (the engine's helper)."""

from __future__ import annotations

from app.engine.agent import AgentUsage
from app.engine.panel_review import add_usage


def test_a_panels_usage_is_the_sum_and_an_unknown_figure_stays_unknown() -> None:
    total = add_usage(AgentUsage(10, 5, 0.5), AgentUsage(1, 2, 0.25))
    assert total == AgentUsage(11, 7, 0.75)
    assert add_usage(total, AgentUsage(None, 1, None)) == AgentUsage(None, 8, None)
