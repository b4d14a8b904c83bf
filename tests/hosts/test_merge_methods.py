"""Which merge methods a repository accepts, as each host says it, and a refused method.

GitHub says it in the repository's settings (`allow_squash_merge`, `allow_merge_commit`,
`allow_rebase_merge`, left out for a token that may not read them) and refuses another method
with 405; the local forge keeps the same settings; Azure DevOps' adapter does not say (None).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hosts.errors import Conflict
from hosts.local import LocalForge
from tests.hosts.test_github import make_host
from tests.support.fake_github import FakeGitHub


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


def test_github_reads_the_repository_merge_settings() -> None:
    fake = FakeGitHub()
    fake.merge_methods = {"rebase", "merge"}
    assert run(make_host(fake).merge_methods()) == {"rebase", "merge"}


def test_github_says_nothing_when_the_settings_are_left_out() -> None:
    fake = FakeGitHub()
    fake.merge_methods = None  # the repository's answer carries no allow_* field
    assert run(make_host(fake).merge_methods()) is None


def test_github_refuses_a_method_the_settings_turn_off() -> None:
    fake = FakeGitHub()
    fake.merge_methods = {"rebase"}
    pull = fake.seed_pull("pair/card-1")
    head = fake.pulls[pull].head_sha
    with pytest.raises(Conflict, match="Squash merges are not allowed"):
        run(make_host(fake).merge(pull, head, "squash"))
    assert not fake.pulls[pull].merged


def test_the_local_forge_allows_every_method_until_told_otherwise(tmp_path: Path) -> None:
    forge = LocalForge(tmp_path / "forge")
    host = forge.host()
    assert run(host.merge_methods()) == {"squash", "merge", "rebase"}
    forge.allow_merge_methods({"rebase"})
    assert run(host.merge_methods()) == {"rebase"}
    with pytest.raises(ValueError, match="are not merge methods"):
        forge.allow_merge_methods({"fast-forward"})  # type: ignore[arg-type]


def test_the_local_forge_refuses_a_method_its_settings_turn_off(tmp_path: Path) -> None:
    forge = LocalForge(tmp_path / "forge")
    forge.commit("main", {"README.md": "# p\n"}, "init")
    forge.commit("pair/card-1", {"a.txt": "a\n"}, "the change", start="main")
    pull = forge.seed_pull("pair/card-1")
    forge.allow_merge_methods({"merge"})
    with pytest.raises(Conflict, match="squash merges are not allowed"):
        run(forge.host().merge(pull, forge.head_of(pull), "squash"))
    assert run(forge.host().merge(pull, forge.head_of(pull), "merge")).merged
