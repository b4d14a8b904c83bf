"""The batch approval gate: which completed step parks for a human (docs/engine.md).

This matrix is the single source of truth: the change path, the decomposition path and the
PR path all ask it. Decomposition and PR steps never park under any gate: a decomposition's
changes are reviewed when each one's propose parks, and a PR is itself the human checkpoint.
"""

from __future__ import annotations

from typing import Literal

Gate = Literal["voluntary", "after-propose", "every-phase", "autonomous"]
StepKind = Literal["propose", "apply", "verify", "red", "verify-red", "fix", "decompose", "pr"]

_CHANGE_TRANSITIONS: frozenset[str] = frozenset(
    {"propose", "apply", "verify", "red", "verify-red", "fix"}
)


def parks_for_approval(gate: Gate, transition: StepKind) -> bool:
    """Whether a corroborated completion of `transition` parks awaiting approval under `gate`."""
    if gate == "after-propose":
        return transition == "propose"
    if gate == "every-phase":
        return transition in _CHANGE_TRANSITIONS
    # voluntary and autonomous never park for approval (agent blockers still park).
    return False
