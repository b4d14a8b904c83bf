"""`until: merged` merges with the method the repository allows, or stops saying why.

End to end on the `local` host, whose forge keeps a repository's merge settings as GitHub does.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.card_project import CardProject
from tests.support.git import git


def _base_history(project: CardProject) -> tuple[list[str], list[str]]:
    """(every commit on the forge's main, the merge commits among them)."""
    repo = project.forge.repo
    commits = git(repo, "rev-list", "main").split()
    merges = git(repo, "rev-list", "--merges", "main").split()
    return commits, merges


def test_a_repository_that_allows_only_rebase_is_merged_by_rebase(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.forge.allow_merge_methods({"rebase"})
    before = project.forge.branch_sha("main")
    project.command("implement until: merged merge: never")
    project.until_quiet()
    merged = project.cycle_events("merged")
    assert merged, "the card was not merged"
    commits, merges = _base_history(project)
    assert merges == []  # no merge commit
    reviewed = merged[-1]["head"]
    card_commits = git(project.forge.repo, "rev-list", "--count", f"{before}..{reviewed}")
    # A rebase keeps each of the card's commits (a squash would add exactly one), as new ones.
    added = git(project.forge.repo, "rev-list", "--count", f"{before}..main")
    assert int(added) == int(card_commits) > 1
    assert reviewed not in commits
    assert project.labels(project.card) == ["pr-state:merged"]


def test_a_configured_method_the_repository_refuses_blocks_the_card(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"merge_method": "merge"})
    project.forge.allow_merge_methods({"squash"})
    before = project.forge.branch_sha("main")
    project.command("implement until: merged merge: never")
    steps = project.until_quiet()
    assert not project.cycle_events("merged")
    assert project.forge.branch_sha("main") == before  # nothing merged
    last = steps[-1]
    assert last.result.state == "blocked"
    assert last.result.blocker is not None
    assert "cycle.mergeMethod is 'merge'" in last.result.blocker
    assert "allows squash" in last.result.blocker
    assert project.labels(project.card) == ["pr-state:blocked"]
