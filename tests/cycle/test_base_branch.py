"""The base branch of a card's PR comes from what the CI says, never from where HEAD happens to be.

Checkouts are made the way each CI makes them: Azure Pipelines' `checkout: self` (init, fetch,
`checkout --force <sha>`: a detached HEAD, no local branch) and actions/checkout (fetch into
`refs/remotes/origin/<branch>`, `checkout -B <branch>`), not with `git clone`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.cycle.worktree import WorktreeError, ci_base_branch, current_branch


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, str]:
    """A bare repository whose default branch is `trunk`, with one commit; (path, sha)."""
    work = tmp_path / "seed"
    work.mkdir()
    _git(work, "init", "-q", "-b", "trunk")
    (work / "README").write_text("hello\n")
    _git(work, "add", "README")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first")
    bare = tmp_path / "remote.git"
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return bare, _git(work, "rev-parse", "HEAD")


def _azure_checkout_self(remote: Path, dest: Path, sha: str, depth: int | None) -> Path:
    """What Azure Pipelines' `checkout: self` does: a detached HEAD at BUILD_SOURCEVERSION."""
    dest.mkdir()
    _git(dest, "init", "-q")
    _git(dest, "remote", "add", "origin", str(remote))
    fetch = ["fetch", "--force", "--tags", "--prune", "--prune-tags", "--no-recurse-submodules"]
    fetch += [f"--depth={depth}"] if depth else []
    _git(dest, *fetch, "origin", "+refs/heads/*:refs/remotes/origin/*")
    _git(dest, "checkout", "--force", sha)
    return dest


def _actions_checkout(remote: Path, dest: Path, sha: str, branch: str) -> Path:
    """What actions/checkout does on issue_comment / schedule: the branch, checked out."""
    dest.mkdir()
    _git(dest, "init", "-q")
    _git(dest, "remote", "add", "origin", str(remote))
    _git(
        dest,
        "fetch",
        "--no-tags",
        "--prune",
        "--depth=1",
        "origin",
        f"+{sha}:refs/remotes/origin/{branch}",
    )
    _git(dest, "checkout", "--force", "-B", branch, f"refs/remotes/origin/{branch}")
    return dest


@pytest.mark.parametrize(
    ("env", "event", "wanted"),
    [
        pytest.param({"BUILD_SOURCEBRANCH": "refs/heads/main"}, None, "main", id="azure"),
        pytest.param(
            {
                "BUILD_SOURCEBRANCH": "refs/pull/7/merge",
                "SYSTEM_PULLREQUEST_TARGETBRANCH": "refs/heads/dev",
            },
            None,
            "dev",
            id="azure-pr",
        ),
        pytest.param({"BUILD_SOURCEBRANCH": "refs/tags/v1"}, None, None, id="azure-tag-names-none"),
        pytest.param({}, {"repository": {"default_branch": "trunk"}}, "trunk", id="github-event"),
        pytest.param({}, {"repository": {"default_branch": ["x"]}}, None, id="github-bad-event"),
        pytest.param({}, None, None, id="nothing"),
    ],
)
def test_what_the_ci_names(
    env: dict[str, str], event: dict[str, object] | None, wanted: str | None
) -> None:
    assert ci_base_branch(env, event) == wanted


@pytest.mark.parametrize("depth", [1, None], ids=["fetchDepth-1", "fetchDepth-0"])
def test_azure_detached_head_takes_build_sourcebranch(
    remote: tuple[Path, str], tmp_path: Path, depth: int | None
) -> None:
    bare, sha = remote
    checkout = _azure_checkout_self(bare, tmp_path / "s", sha, depth)
    assert _git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached, as Azure
    assert current_branch(checkout, {"BUILD_SOURCEBRANCH": "refs/heads/trunk"}) == "trunk"


def test_a_detached_head_with_nothing_naming_the_base_says_what_to_set(
    remote: tuple[Path, str], tmp_path: Path
) -> None:
    bare, sha = remote
    checkout = _azure_checkout_self(bare, tmp_path / "s", sha, 1)
    with pytest.raises(WorktreeError, match="BUILD_SOURCEBRANCH"):
        current_branch(checkout, {})


def test_actions_checkout_takes_the_events_default_branch(
    remote: tuple[Path, str], tmp_path: Path
) -> None:
    bare, sha = remote
    checkout = _actions_checkout(bare, tmp_path / "w", sha, "trunk")
    _git(checkout, "checkout", "-q", "-b", "elsewhere")  # HEAD moved: it must not matter
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "created", "repository": {"default_branch": "trunk"}}))
    assert current_branch(checkout, {"GITHUB_EVENT_PATH": str(event)}) == "trunk"
    assert current_branch(checkout, {}) == "elsewhere"  # the CLI on a laptop: the branch it is on
