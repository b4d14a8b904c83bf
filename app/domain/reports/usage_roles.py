"""Usage per role and the shared overhead: who spent the tokens and the money of a cycle. Pure.

Seed 004's `usage.byRole` and `usage.sharedOverhead`. Every agent step of a card plays one
role, named by its transition:

    propose    preparation       the plan: acceptance criteria and tasks
    apply      implementation    the change, test-first
    verify     reviewer          the independent review (a panel's reviewers summed)
    red        red               failing tests for the blocking findings
    verify-red redVerifier       the red contract verifier: accepts or refuses red's contract
    fix        green             the fix that makes them pass
    decompose  decomposition     a phase's change intents (plain batches)

Usage reported by a step no role names (a `pr` step that reported usage, a transition this
pairbot does not know) is *shared overhead*: spent by the run, attributable to no role.

Each figure is a `Quantity` with the same coverage rule as the cycle totals
(`app.domain.reports.metrics`): `known` when every step counted reported it, `partial` (the
sum of what was reported) when some did, `unknown` (null) when none did — never a made-up 0.
A role that never ran is absent; a run with no unattributable step has a shared overhead of
`unknown` over 0 steps (nothing was measured, so nothing is claimed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from app.domain.reports.metrics_model import Coverage, Quantity, RoleUsage, StepMetrics

ROLES: Mapping[str, str] = {
    "propose": "preparation",
    "apply": "implementation",
    "verify": "reviewer",
    "red": "red",
    "verify-red": "redVerifier",
    "fix": "green",
    "decompose": "decomposition",
}


def role_of(transition: str) -> str | None:
    """The role a transition's agent plays, None when no role names it."""
    return ROLES.get(transition)


def coverage(reported: int, total: int) -> Coverage:
    """`unknown` when nothing was reported, `known` when everything was, else `partial`."""
    if reported == 0:
        return "unknown"
    return "known" if reported == total else "partial"


def sum_counts(values: Sequence[int | None]) -> Quantity:
    """The sum of the reported counts, with its coverage over every value expected."""
    known = [v for v in values if v is not None]
    return Quantity(
        value=sum(known) if known else None,
        coverage=coverage(len(known), len(values)),
        reported=len(known),
        total=len(values),
    )


def sum_amounts(values: Sequence[float | None], digits: int) -> Quantity:
    """The sum of the reported amounts (rounded to `digits`), with its coverage."""
    known = [v for v in values if v is not None]
    return Quantity(
        value=round(math.fsum(known), digits) if known else None,
        coverage=coverage(len(known), len(values)),
        reported=len(known),
        total=len(values),
    )


def usage_of(steps: Sequence[StepMetrics]) -> RoleUsage:
    """Tokens and cost summed over `steps`, each figure with its coverage."""
    return RoleUsage(
        steps=len(steps),
        input_tokens=sum_counts([s.input_tokens for s in steps]),
        output_tokens=sum_counts([s.output_tokens for s in steps]),
        tokens=sum_counts([s.tokens for s in steps]),
        cost_usd=sum_amounts([s.cost_usd for s in steps], 6),
    )


def usage_by_role(agent_steps: Sequence[StepMetrics]) -> tuple[dict[str, RoleUsage], RoleUsage]:
    """(usage per role, sorted by role; the shared overhead) over a cycle's agent steps."""
    by_role: dict[str, list[StepMetrics]] = {}
    shared: list[StepMetrics] = []
    for step in agent_steps:
        role = role_of(step.transition)
        if role is None:
            shared.append(step)
        else:
            by_role.setdefault(role, []).append(step)
    roles = {role: usage_of(steps) for role, steps in sorted(by_role.items())}
    return roles, usage_of(shared)
