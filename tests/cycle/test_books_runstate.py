"""The workflow version and inputs digest in the run-state, and the `incompatible` verdict.

A card's step stamps `state.json` with the workflow and the digest of its effective inputs and
journals an `inputs` entry when they change; a run-state written by a workflow this pairbot
cannot resume (a newer major, an older one, a newer state schema) stops the step with a
message naming both versions and the way on, and changes nothing on disk; `pairbot clean
<batch> --archive-run` sets the run aside and the next command starts a fresh one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from app.cycle.driver import CardStep, tick
from app.engine.runstate import (
    WORKFLOW_VERSION,
    IncompatibleRunStateError,
    Park,
    RunLocus,
    read_parks,
    read_workflow,
    resumable,
    write_parks,
)
from app.errors import StateCorruptError
from tests.support.card_project import MAINTAINER, CardProject
from tests.support.project import cli


def locus_of(project: CardProject) -> RunLocus:
    return RunLocus.for_batch(project.root, f"card-{project.card}")


def snapshot(locus: RunLocus) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(locus.directory.iterdir()) if p.is_file()}


def test_a_step_stamps_the_workflow_and_journals_the_inputs_once_per_change(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")  # propose, parked for approval
    locus = locus_of(project)
    stamped = read_workflow(locus)
    assert stamped.version == WORKFLOW_VERSION
    assert stamped.inputs_digest is not None and stamped.inputs_digest.startswith("sha256:")
    state = json.loads(locus.state.read_text())
    assert state["version"] == 1 and "parks" in state  # the park is kept beside the stamp
    assert list(state["parks"]) == [f"card-{project.card}"]
    inputs = project.cycle_events("inputs")
    assert inputs == [
        {"event": "inputs", "workflowVersion": "1.0", "inputsDigest": stamped.inputs_digest}
    ]

    project.step()  # parked: same inputs, nothing new journaled
    assert len(project.cycle_events("inputs")) == 1

    # A changed policy is a new set of inputs: recorded before the next step runs.
    config_path = project.root / ".pair" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["cycle"]["maxFixRounds"] = 5
    config_path.write_text(yaml.safe_dump(config))
    project.step()
    digests = [e["inputsDigest"] for e in project.cycle_events("inputs")]
    assert len(digests) == 2 and digests[0] != digests[1]
    assert read_workflow(locus).inputs_digest == digests[1]
    # And the approval park survived the restamp.
    assert read_parks(locus)[f"card-{project.card}"].state == "awaiting-approval"


@pytest.mark.parametrize(
    ("workflow", "schema", "named"),
    [
        ({"version": "2.0", "inputsDigest": None}, 1, "workflow 2.0 (state schema 1)"),
        ({"version": "0.9", "inputsDigest": None}, 1, "workflow 0.9 (state schema 1)"),
        ({"version": "1.0", "inputsDigest": None}, 2, "state schema 2 (workflow 1.0)"),
    ],
)
def test_an_incompatible_run_state_stops_the_step_and_loses_nothing(
    tmp_path: Path, workflow: dict[str, object], schema: int, named: str
) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")
    locus = locus_of(project)
    state = json.loads(locus.state.read_text())
    state.update(version=schema, workflow=workflow)
    locus.state.write_text(json.dumps(state))
    before = snapshot(locus)

    with pytest.raises(IncompatibleRunStateError) as raised:
        project.step()
    message = str(raised.value)
    assert f"was written by {named}" in message
    assert f"runs workflow {WORKFLOW_VERSION}" in message and "resumes only workflow 1.x" in message
    assert f"pairbot clean card-{project.card} --archive-run" in message
    assert "Nothing was read or changed" in message
    assert snapshot(locus) == before
    assert not resumable(locus)
    with pytest.raises(IncompatibleRunStateError):
        write_parks(locus, {}, None)  # never overwritten either
    assert snapshot(locus) == before

    # The CLI says the same in one line and exits 1.
    status = cli("batch", "status", f"card-{project.card}", cwd=project.root)
    assert status.returncode == 1, status.stdout
    assert "incompatible run-state" in status.stderr

    # The way on: the run set aside, journal and all; the next command starts afresh.
    moved = cli("clean", f"card-{project.card}", "--archive-run", cwd=project.root)
    assert moved.returncode == 0, moved.stderr
    archive = locus.directory.parent / "archive" / "run-1"
    assert f"archived run .pair/batches/card-{project.card}/archive/run-1" in moved.stdout
    assert snapshot(RunLocus(archive)) == before
    fresh = project.command("implement")
    assert fresh.result.transition == "propose"
    assert read_workflow(locus).version == WORKFLOW_VERSION


def test_an_unstamped_run_state_is_workflow_one_and_a_malformed_stamp_is_corrupt(
    tmp_path: Path,
) -> None:
    locus = RunLocus(tmp_path / "run")
    locus.directory.mkdir()
    locus.state.write_text('{"version": 1, "parks": {}}\n')  # written before stamping
    assert read_workflow(locus).version == "1.0" and resumable(locus)
    write_parks(locus, {"a": Park("blocked", "apply", "why")}, None)
    assert json.loads(locus.state.read_text())["workflow"] == {
        "version": WORKFLOW_VERSION,
        "inputsDigest": None,
    }
    locus.state.write_text('{"version": 1, "workflow": {"version": 2}, "parks": {}}')
    with pytest.raises(StateCorruptError, match="`workflow` is malformed"):
        read_parks(locus)
    locus.state.write_text('{"version": "one", "parks": {}}')
    with pytest.raises(StateCorruptError, match="not a schema number"):
        read_parks(locus)


def test_a_tick_passes_over_an_incompatible_card_and_runs_the_next(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    first = project.card
    assert project.command("implement").result.transition == "propose"
    locus = locus_of(project)
    state = json.loads(locus.state.read_text())
    state["workflow"]["version"] = "2.0"
    locus.state.write_text(json.dumps(state))
    before = snapshot(locus)

    project.card = project.forge.seed_card("Second", "AC-1: it works\n", author=MAINTAINER)
    assert project.command("implement").result.transition == "propose"
    # The first card waited longest, but its run-state cannot be resumed: the tick runs the
    # second one's next step and leaves the first exactly as it was.
    step = asyncio.run(tick(project.env()))
    assert isinstance(step, CardStep)
    assert step.result.change == f"card-{project.card}" != f"card-{first}"
    assert step.result.transition == "apply"
    assert snapshot(locus) == before
