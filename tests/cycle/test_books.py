"""The run's books on the `local` host, end to end: `metrics.json` / `metrics.md` written by the
metrics observer while a step runs and reconciled when it ends, usage per role from a
stream-json agent (the scripted agent behind a fake `claude`), the same figures in the
synthesis's JSON tail, and `pairbot report replay` giving byte-for-byte the books the run wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from app import __version__
from app.cycle import metrics_observer
from app.cycle.books import BOOKS, books_of
from app.cycle.driver import advance_card
from app.engine.runstate import RunLocus
from tests.support.card_project import CardProject
from tests.support.git import git
from tests.support.project import AGENT_COMMAND, cli

DEADLINE_S = 60.0


def run_dir(project: CardProject) -> Path:
    return RunLocus.for_batch(project.root, f"card-{project.card}").directory


def books(project: CardProject) -> dict[str, bytes]:
    return {name: (run_dir(project) / name).read_bytes() for name in BOOKS}


def metrics(project: CardProject) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir(project) / "metrics.json").read_text())
    return data


def with_fake_claude(project: CardProject, tmp_path: Path) -> None:
    """`claude` on PATH runs the scripted agent, which then speaks stream-json with usage
    (1200 input, 345 output tokens, $0.0123 per call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\nexec {shlex.join(AGENT_COMMAND)} "$@"\n')
    fake.chmod(0o755)
    project.env_extra["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def synthesis_tail(project: CardProject) -> dict[str, Any]:
    pull = project.pull()
    assert pull is not None
    body = next(
        c["body"] for c in project.comments(pull) if "pair:synthesis" in c["body"].splitlines()[0]
    )
    tail: dict[str, Any] = json.loads(body.split("```json\n", 1)[1].split("\n```", 1)[0])
    return tail


def wait_for(check: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S}s: {what}")
        time.sleep(0.02)


def test_the_observer_writes_the_books_while_the_step_runs_and_reconciles_them_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_observer, "INTERVAL_S", 0.02)
    project = CardProject.create(tmp_path)
    release = tmp_path / "release"
    project.env_extra["PAIR_TEST_RELEASE"] = str(release)
    project.script({"apply": ["held"]})
    assert project.command("implement").result.transition == "propose"
    assert metrics(project)["steps"] == {"propose": 1}

    done: list[Any] = []
    worker = threading.Thread(
        target=lambda: done.append(asyncio.run(advance_card(project.env(), project.card)))
    )
    worker.start()
    try:

        def apply_in_flight() -> bool:
            data = metrics(project)
            return bool(data["steps"].get("apply") == 1 and data["interrupted"] == 1)

        # The step has started and not ended: the books already count it, in flight.
        wait_for(apply_in_flight, "metrics.json counting the running apply")
        assert "Interrupted" in (run_dir(project) / "metrics.md").read_text()
    finally:
        release.touch()
        worker.join(DEADLINE_S)
    assert not worker.is_alive()
    assert done and done[0].result.transition == "apply"
    after = metrics(project)
    assert after["steps"] == {"apply": 1, "propose": 1}
    assert after["interrupted"] == 0
    assert after["status"]["status"] == done[0].status
    # Reconciled: the books are exactly what the journal now gives.
    records = project.journal()
    assert after["records"] == len([r for r in records if r["key"] == f"card-{project.card}"])
    assert books(project) == books_of(f"card-{project.card}", records).files


def test_usage_by_role_reaches_the_books_and_the_synthesis_and_replay_rebuilds_them(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, config={"batch": {"agent": "claude"}})
    with_fake_claude(project, tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    steps = [project.command("implement"), *project.until_quiet()]
    assert steps[-1].status == "ready-for-merge"

    data = metrics(project)
    by_role = data["usage"]["byRole"]
    assert sorted(by_role) == [
        "green",
        "implementation",
        "preparation",
        "red",
        "redVerifier",
        "reviewer",
    ]
    assert by_role["redVerifier"]["steps"] == 1  # the red contract verifier: a role of its own
    assert by_role["reviewer"]["steps"] == 2
    assert by_role["reviewer"]["tokens"] == {
        "value": 2 * 1545,
        "coverage": "known",
        "reported": 2,
        "of": 2,
    }
    assert by_role["green"]["costUsd"]["value"] == 0.0123
    assert data["usage"]["sharedOverhead"]["tokens"]["coverage"] == "unknown"
    assert data["usage"]["tokens"]["value"] == 7 * 1545
    assert data["status"]["status"] == "ready-for-merge"
    assert data["workflow"]["version"] == "1.0"
    # The synthesis's tail carries the same split (it was reduced from the same steps).
    tail = synthesis_tail(project)
    assert tail["usage"]["byRole"] == by_role
    assert tail["usage"]["sharedOverhead"] == data["usage"]["sharedOverhead"]

    # Replay: the books from the journal alone are the ones written during the run.
    written = books(project)
    for name in BOOKS:
        (run_dir(project) / name).unlink()
    batch = f"card-{project.card}"
    done = cli("report", "replay", batch, cwd=project.root)
    assert done.returncode == 0, done.stderr
    assert "rebuilt" in done.stdout and "metrics.json" in done.stdout
    assert books(project) == written
    check = cli("report", "replay", batch, "--check", cwd=project.root)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "agree with the journal" in check.stdout


def test_replay_check_names_a_book_that_differs_and_bad_inputs_are_refused(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    batch = f"card-{project.card}"
    md = run_dir(project) / "metrics.md"
    md.write_text("edited by hand\n")
    check = cli("report", "replay", batch, "--check", cwd=project.root)
    assert check.returncode == 1
    assert f"{md} differs from the journal" in check.stdout
    assert md.read_text() == "edited by hand\n"  # --check writes nothing

    unknown = cli("report", "replay", "card-999", cwd=project.root)
    assert unknown.returncode == 2
    assert "no batch 'card-999'" in unknown.stderr and batch in unknown.stderr

    journal = run_dir(project) / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    lines.insert(1, "{not json\n")
    journal.write_text("".join(lines))
    corrupt = cli("report", "replay", batch, cwd=project.root)
    assert corrupt.returncode == 1
    assert "line 2 is corrupt" in corrupt.stderr
    assert md.read_text() == "edited by hand\n"  # nothing written from a corrupt journal


def test_an_accepted_propose_stamps_its_metadata_beside_the_plan(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")
    key = f"card-{project.card}"
    started = [e for e in project.journal() if e["kind"] == "step-started"][-1]
    inputs = project.cycle_events("inputs")[-1]
    bound = project.cycle_events("bound")[-1]
    text = git(project.forge.repo, "show", f"pair/{key}:.pair/changes/{key}/.pair.yaml")
    stamp = yaml.safe_load(text)
    assert stamp == {
        "schema": 1,
        "change": key,
        "run": bound["run"],
        "proposedAt": started["at"],
        "session": started["session"],
        "agent": "command",
        "pairbot": __version__,
        "workflowVersion": "1.0",
        "inputsDigest": inputs["inputsDigest"],
    }
    # Committed with the plan, in the propose's own commit.
    files = git(project.forge.repo, "show", "--name-only", "--format=", f"pair/{key}").split()
    assert sorted(files) == [f".pair/changes/{key}/.pair.yaml", f".pair/changes/{key}/plan.md"]
