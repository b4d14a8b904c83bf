"""The seed's seven added statuses exist as labels, and each explains itself with what to do;
a run-state a step cannot carry on shows as `incompatible` or `failed-resume`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cycle.schedule import PASSIVE
from app.domain.reports.explain import CardFacts, explain
from app.engine.runstate import IncompatibleRunStateError, RunLocus
from app.errors import StateCorruptError
from hosts.labels import PrState
from tests.support.card_project import CardProject

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


def run_files(locus: RunLocus) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(locus.directory.iterdir()) if p.is_file()}


def test_an_incompatible_run_state_shows_on_the_card_and_its_pr_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    project.until_quiet()  # a PR exists
    locus = RunLocus.for_batch(project.root, f"card-{project.card}")
    state = json.loads(locus.state.read_text())
    state["workflow"]["version"] = "2.0"
    locus.state.write_text(json.dumps(state))
    before = run_files(locus)
    with pytest.raises(IncompatibleRunStateError):
        project.step()
    assert project.labels(project.card) == ["pr-state:incompatible"]
    pull = project.pull()
    assert pull is not None and project.labels(pull) == ["pr-state:incompatible"]
    assert run_files(locus) == before


def test_a_run_state_found_unusable_on_resume_is_failed_resume(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")  # parked awaiting approval
    locus = RunLocus.for_batch(project.root, f"card-{project.card}")
    locus.state.write_text('{"version": 1, "parks": []}')
    with pytest.raises(StateCorruptError, match="`parks` is not an object"):
        project.step()
    assert project.labels(project.card) == ["pr-state:failed-resume"]
