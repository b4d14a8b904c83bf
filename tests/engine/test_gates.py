"""The approval-gate matrix: every gate against every step kind (seed 001)."""

from __future__ import annotations

from typing import get_args

import pytest

from app.engine.gates import Gate, StepKind, parks_for_approval

# Which completed step kinds park under each gate. Decomposition and PR steps never do.
PARKS: dict[Gate, frozenset[StepKind]] = {
    "voluntary": frozenset(),
    "after-propose": frozenset({"propose"}),
    "every-phase": frozenset({"propose", "apply", "verify", "red", "verify-red", "fix"}),
    "autonomous": frozenset(),
}

MATRIX = [
    pytest.param(gate, kind, kind in PARKS[gate], id=f"{gate}-{kind}")
    for gate in get_args(Gate)
    for kind in get_args(StepKind)
]


def test_the_matrix_covers_every_gate_and_step_kind() -> None:
    assert set(PARKS) == set(get_args(Gate))
    assert len(MATRIX) == 4 * 8


@pytest.mark.parametrize(("gate", "kind", "parks"), MATRIX)
def test_parks_for_approval(gate: Gate, kind: StepKind, parks: bool) -> None:
    assert parks_for_approval(gate, kind) is parks


@pytest.mark.parametrize("gate", get_args(Gate))
@pytest.mark.parametrize("kind", ["decompose", "pr"])
def test_decompose_and_pr_never_park(gate: Gate, kind: StepKind) -> None:
    assert parks_for_approval(gate, kind) is False
