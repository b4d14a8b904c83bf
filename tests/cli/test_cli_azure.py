"""`pairbot card N implement` … `pairbot card N approve` on Azure DevOps, through the installed
console script, against the loopback fake Azure DevOps (REST for the SDK, git over HTTP).

The checkout binds both hosts to `azure-devops` in `.pair/config.yaml` and the run reads the
credentials from the environment (`PAIR_AZURE_DEVOPS_*`, docs/hosts.md): the same project a
pipeline drives, driven by hand. Every CLI run is its own command, so the approval is not
taken for a redelivery of the implement command, and the PR is completed on its reviewed head.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cycle.azure_harness import TOKEN, AzureCardProject
from tests.support.fake_azure import FakeAzureDevOps, running
from tests.support.project import cli

pytestmark = pytest.mark.slow


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAzureDevOps]:
    with running(TOKEN, tmp_path / "fake") as server:
        yield server
    assert server.unexpected == [], "the CLI sent requests the fake does not know"


def _run(project: AzureCardProject, *args: str) -> subprocess.CompletedProcess[str]:
    done = cli(*args, cwd=project.root, env=project.host_env(), timeout=300)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert TOKEN not in done.stdout + done.stderr
    return done


def test_implement_then_approve_from_the_cli_completes_the_pr(
    tmp_path: Path, fake: FakeAzureDevOps
) -> None:
    project = AzureCardProject.create(tmp_path, fake)
    card = str(project.card)
    first = _run(project, "card", card, "implement", "until:", "merged", "merge:", "always")
    assert first.returncode == 0, first.stderr
    assert "pairbot: hosts pm=azure-devops code=azure-devops" in first.stderr
    statuses: list[str] = []
    for _ in range(12):
        tick = _run(project, "tick", "--json")
        assert tick.returncode == 0, tick.stderr
        statuses.append(json.loads(tick.stdout)["status"])
        project.assert_invariants()
        if statuses[-1] == "awaiting-human":
            break
    assert statuses[-1] == "awaiting-human", statuses
    pull = project.pull()
    assert pull is not None and fake.pull(pull).status == "active"
    reviewed = fake.pull(pull).head

    approve = _run(project, "card", card, "approve", "--json")
    assert approve.returncode == 0, approve.stderr
    assert json.loads(approve.stdout)["status"] == "merged"
    pr = fake.pull(pull)
    assert (pr.status, pr.head) == ("completed", reviewed)
    assert project.tags() == ["pr-state:merged"]
    commands = project.cycle_events("command")
    assert [e["verb"] for e in commands] == ["implement", "approve"]
    assert len({e["delivery"] for e in commands}) == 2
    project.assert_invariants()
