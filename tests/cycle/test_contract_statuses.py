"""The seed's seven added statuses exist as labels, and each explains itself with what to do."""

from __future__ import annotations

import pytest

from app.cycle.schedule import PASSIVE
from app.domain.reports.explain import CardFacts, explain
from hosts.labels import PrState

ADDED = {
    "target-ready": ("the plan is ready", "/pair implement"),
    "escalate": ("the review handed a decision to a person", "then /pair retry"),
    "failed-contract": ("did not make a complete contract", "/pair retry"),
    "failed-seal": ("could not be sealed", "/pair retry"),
    "failed-custody": ("nothing was reset", "push the sealed tests back"),
    "failed-resume": ("cannot be resumed", "pairbot clean card-7 --archive-run"),
    "incompatible": ("a workflow this pairbot cannot resume", "--archive-run"),
}


@pytest.mark.parametrize("status", sorted(ADDED))
def test_each_added_status_is_a_label_a_tick_leaves_alone_and_explains_itself(
    status: str,
) -> None:
    label = PrState.of(status)
    assert label.value == f"pr-state:{status}"
    assert label.value in PASSIVE  # each waits for a person: an idle tick makes no call
    why, action = ADDED[status]
    explanation = explain(CardFacts(card=7, status=status, park_reason="the reason"))
    assert why in explanation.why
    assert explanation.why.endswith("the reason")
    assert any(action in item for item in explanation.what_you_can_do)
    assert explanation.what_you_can_do[-1] == "/pair abandon"
