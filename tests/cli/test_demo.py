"""The quickstart's main job: `pairbot demo` takes the bundled example to done, and resumes."""

from __future__ import annotations

from pathlib import Path

from tests.support.project import cli


def test_demo_runs_the_example_batch_to_done_and_resumes(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    first = cli("demo", "--dir", str(target), cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "created example repository" in first.stdout
    assert "batch hello: done" in first.stdout
    assert (target / "greet.py").is_file() and (target / "farewell.py").is_file()
    again = cli("demo", "--dir", str(target), cwd=tmp_path, timeout=300)
    assert again.returncode == 0
    assert "resuming example repository" in again.stdout
    assert "step 1: nothing-ready" in again.stdout
