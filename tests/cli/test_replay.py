"""`pairbot report replay` on a plain batch: a real `batch apply` run with the scripted agent,
whose books the replay builds from the journal alone (every key of the batch reduced), writes
once, and finds in agreement afterwards."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support.project import Project, apply_once, cli


def test_replay_builds_a_plain_batchs_books_from_its_journal(
    make_project: Callable[..., Project],
) -> None:
    project = make_project()
    assert apply_once(project).transition == "propose"
    assert apply_once(project).transition == "apply"
    books = [project.run_dir / name for name in ("metrics.json", "metrics.md")]
    assert not any(path.exists() for path in books)  # a plain batch's steps keep none

    first = cli("report", "replay", project.batch, cwd=project.root)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [f"rebuilt {path}" for path in books]
    data = json.loads(books[0].read_text())
    assert data["batch"] == project.batch
    assert data["status"] is None and data["workflow"] is None
    assert data["steps"] == {"apply": 1, "propose": 1}
    assert sorted(data["usage"]["byRole"]) == ["implementation", "preparation"]
    assert data["records"] == len(project.journal())
    assert data["asOf"] == project.journal()[-1]["at"]
    assert books[1].read_text().startswith(f"# pairbot metrics — {project.batch}\n")

    written = [path.stat().st_mtime_ns for path in books]
    again = cli("report", "replay", project.batch, cwd=project.root)
    assert again.stdout == f"{project.batch}: the books already agree with the journal\n"
    assert [path.stat().st_mtime_ns for path in books] == written  # nothing rewritten

    # A step since: the books lag until replayed again; --check says which.
    apply_once(project)
    stale = cli("report", "replay", project.batch, "--check", cwd=project.root)
    assert stale.returncode == 1
    assert f"{books[0]} differs from the journal" in stale.stdout


def test_replay_refuses_a_bad_batch_name(make_project: Callable[..., Project]) -> None:
    project = make_project()
    outside = cli("report", "replay", "../../etc", cwd=project.root)
    assert outside.returncode == 2
    assert "no batch '../../etc'" in outside.stderr and project.batch in outside.stderr
    missing = cli("report", "replay", cwd=project.root)
    assert missing.returncode == 2 and "batch" in missing.stderr
    assert not (Path(project.root) / ".pair" / "batches" / "etc").exists()
