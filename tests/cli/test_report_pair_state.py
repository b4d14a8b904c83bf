"""`pairbot report cohort --pair-state` in a real clone: the cards CI runs keep on `pair-state`
(written there by the Action's own state-branch code after real card cycles) count, as the same
journals count in the checkout that ran them; a remote without the branch, a bad remote name
and a corrupt journal on the branch are each said plainly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.cycle.cohort_journals import cohort_of
from tests.support.git import git
from tests.support.pair_state import files_repo, push_run_state, run_real_cards, state_repo
from tests.support.project import cli


@dataclass
class Clone:
    path: Path
    expected: dict[str, object]  # the cohort of the checkout where the cards ran


@pytest.fixture
def clone(tmp_path: Path) -> Clone:
    """A clone of a repository whose `pair-state` holds two cards run by the real cycle."""
    project = run_real_cards(tmp_path / "cards", 2)
    origin = state_repo(tmp_path / "origin.git")
    git(project.root, "push", "-q", str(origin), "main")
    push_run_state(project.root, origin)
    path = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(path))
    return Clone(path, cohort_of([project.root]).to_json())


def test_the_cohort_of_a_clone_counts_the_cards_on_pair_state(clone: Clone) -> None:
    alone = json.loads(cli("report", "cohort", "--json", cwd=clone.path).stdout)
    assert alone["cards"] == 0  # a clone holds no run-state of its own

    done = cli("report", "cohort", "--json", "--pair-state", cwd=clone.path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == clone.expected and report["cards"] == 2
    assert "pair-state of origin at" in done.stderr and "2 card journal(s)" in done.stderr
    # Fetched into a private ref: no branch of the clone's, its work tree untouched.
    refs = git(clone.path, "for-each-ref", "--format=%(refname)").split()
    assert "refs/pairbot/report/origin/pair-state" in refs and "refs/heads/pair-state" not in refs
    assert (
        git(clone.path, "status", "--porcelain") == ""
        and not (clone.path / ".pair/batches").exists()
    )

    text = cli("report", "cohort", "--pair-state", "origin", cwd=clone.path)
    assert text.returncode == 0 and text.stdout.startswith("cards: 2\n"), text.stdout


def test_a_remote_without_pair_state_reports_the_checkout_and_says_so(tmp_path: Path) -> None:
    origin = state_repo(tmp_path / "origin.git")
    work = files_repo(tmp_path / "work", {})
    git(work, "push", "-q", str(origin), "main")
    path = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(path))
    done = cli("report", "cohort", "--json", "--pair-state", cwd=path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cards"] == 0
    assert "origin has no pair-state branch" in done.stderr


def test_a_bad_remote_and_a_corrupt_journal_on_the_branch_are_named(tmp_path: Path) -> None:
    origin = state_repo(tmp_path / "origin.git")
    bad = {".pair/batches/card-5/run/journal.jsonl": b'{"kind": "cycle"}\n[1, 2]\n'}
    work = files_repo(tmp_path / "work", bad)
    git(work, "push", "-q", str(origin), "main")
    push_run_state(work, origin)
    path = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(path))

    url = cli("report", "cohort", "--pair-state", "https://x@example.com/r.git", cwd=path)
    assert url.returncode == 2 and "the name of a git remote" in url.stderr
    assert "Traceback" not in url.stderr

    unknown = cli("report", "cohort", "--pair-state", "upstream", cwd=path)
    assert unknown.returncode == 2 and "could not fetch pair-state from upstream" in unknown.stderr

    corrupt = cli("report", "cohort", "--pair-state", cwd=path)
    assert corrupt.returncode != 0, corrupt.stdout
    assert "origin/pair-state:.pair/batches/card-5/run/journal.jsonl line 2" in corrupt.stderr
    assert "pairbot-report-" not in corrupt.stderr
