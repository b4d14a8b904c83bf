"""Catch-up in the Azure Pipelines entry: a scheduled run handles a work-item command whose
notification never reached a run. `python -m action.azure` as a pipeline job runs it
(tests/e2e/azure_pipeline_harness.py), against the loopback fake Azure DevOps answering the
WIQL query of the work items changed since the last look and their comments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hosts.models import Target
from tests.cycle.azure_harness import TOKEN, AzureCardProject
from tests.e2e.azure_pipeline_harness import Pipeline
from tests.support.card_project import card_journal, cycle_events
from tests.support.fake_azure import FakeAzureDevOps, running
from tests.support.git import git

pytestmark = pytest.mark.slow


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAzureDevOps]:
    with running(TOKEN, tmp_path / "fake") as server:
        # Its comments are two hours old: inside the 24-hour window, past the grace period.
        server.epoch = datetime.now(UTC) - timedelta(hours=2)
        yield server
    assert server.unexpected == [], "the entry sent requests the fake does not know"


def state(fake: FakeAzureDevOps, path: str) -> Any:
    return json.loads(git(fake.repo, "show", f"pair-state:{path}"))


def test_a_missed_work_item_command_is_taken_by_the_next_scheduled_run(
    tmp_path: Path, fake: FakeAzureDevOps
) -> None:
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(tmp_path, fake, project)
    card = Target("card", project.card)
    # No notification reached a run for any of these.
    fake.comment_as(fake.bot.author, card, "<div>/pair implement</div>")  # a bot's
    fake.comment_as(fake.human.author, card, "<div>thanks!</div>")  # no command
    missed = fake.comment_as(fake.human.author, card, "<div>/pair implement</div>")

    code, out = pipeline.run("Schedule")
    assert code == 0, out
    assert f"catching up on a command nobody ran: comment {missed}" in out
    assert pipeline.status(out) not in ("ignored", "error", "duplicate", "nothing-ready"), out
    assert fake.count("POST", r"/_apis/wit/wiql$") == 1
    # Acknowledged as its notification's run would have: a like on that comment only.
    assert [r[:3] for r in fake.reactions] == [(project.card, int(missed), "like")]
    key = f"wi{project.card}:c{missed}"
    assert key in state(fake, ".pair/deliveries.json")["handled"]
    journal = card_journal(tmp_path / f"s{pipeline.runs}", project.card)
    assert [c["delivery"] for c in cycle_events(journal, "command")] == [f"azure-{key}"]
    first_cursor = state(fake, ".pair/catchup.json")["cursor"]

    # The next scheduled run looks again from the cursor and takes the card's next step.
    code, out = pipeline.run("Schedule")
    assert code == 0, out
    assert "catching up" not in out
    assert fake.count("POST", r"/_apis/wit/wiql$") == 2
    assert [r[:3] for r in fake.reactions] == [(project.card, int(missed), "like")]
    journal = card_journal(tmp_path / f"s{pipeline.runs}", project.card)
    assert len(cycle_events(journal, "command")) == 1  # never run twice
    assert state(fake, ".pair/catchup.json")["cursor"] >= first_cursor
    project.assert_invariants()
