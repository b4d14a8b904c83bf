"""The base branch of a card's PR comes from what the CI says, never from where HEAD happens to be.

Checkouts are made the way each CI makes them (tests/support/checkouts.py): Azure Pipelines'
`checkout: self` (a detached HEAD, no local branch; shallow, not even `origin/<branch>`) and
actions/checkout (the branch, shallow, no `origin/HEAD`), not with `git clone`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.cycle import worktree as wt
from app.cycle.worktree import WorktreeError, current_branch
from app.domain.card.base_branch import ci_base_branch
from tests.support.checkouts import actions_checkout, azure_checkout_self, is_detached


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
        pytest.param(
            {"GITHUB_EVENT_NAME": "schedule", "GITHUB_REF": "refs/heads/trunk"},
            {"schedule": "*/5 * * * *"},
            "trunk",
            id="github-schedule-ref",
        ),
        pytest.param(
            {"GITHUB_EVENT_NAME": "schedule", "GITHUB_REF": "refs/heads/trunk"},
            {"schedule": "*/5 * * * *", "repository": {"default_branch": "main"}},
            "main",
            id="github-schedule-event-first",
        ),
        pytest.param(
            {"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_REF": "refs/heads/feature"},
            {"inputs": {}},
            None,
            id="github-dispatch-ref-is-where-it-ran",
        ),
        pytest.param(
            {"GITHUB_EVENT_NAME": "schedule", "GITHUB_REF": "refs/tags/v1"},
            {"schedule": "0 0 * * *"},
            None,
            id="github-schedule-tag",
        ),
        pytest.param({}, None, None, id="nothing"),
    ],
)
def test_what_the_ci_names(
    env: dict[str, str], event: dict[str, object] | None, wanted: str | None
) -> None:
    assert ci_base_branch(env, event) == wanted


def _azure(remote: tuple[Path, str], dest: Path, depth: int, persist: bool = False) -> Path:
    bare, sha = remote
    made = azure_checkout_self(
        str(bare),
        dest,
        branch="trunk",
        authorization="bearer not-a-token",
        fetch_depth=depth,
        persist_credentials=persist,
    )
    assert made.env["BUILD_SOURCEVERSION"] == sha and is_detached(dest)  # as Azure leaves it
    return dest


@pytest.mark.parametrize("depth", [1, 0], ids=["fetchDepth-1", "fetchDepth-0"])
def test_azure_detached_head_takes_build_sourcebranch(
    remote: tuple[Path, str], tmp_path: Path, depth: int
) -> None:
    checkout = _azure(remote, tmp_path / "s", depth)
    refs = _git(checkout, "for-each-ref", "--format=%(refname)").split()
    # Shallow, Azure Repos fetches the commit by its id: no branch of any kind is left.
    assert ("refs/remotes/origin/trunk" in refs) is (depth == 0)
    assert not [ref for ref in refs if ref.startswith("refs/heads/")]
    assert current_branch(checkout, {"BUILD_SOURCEBRANCH": "refs/heads/trunk"}) == "trunk"


def test_a_plain_batchs_pr_base_on_a_detached_checkout_is_what_azure_names(
    remote: tuple[Path, str], tmp_path: Path
) -> None:
    from app.engine.phase_steps import default_base_branch

    checkout = _azure(remote, tmp_path / "s", 1)
    # HEAD is detached and there is no origin/HEAD: only the pipeline's variables know.
    assert default_base_branch(checkout, {"BUILD_SOURCEBRANCH": "refs/heads/trunk"}) == "trunk"
    assert default_base_branch(checkout, {}) == "main"  # the documented last resort


def test_a_card_worktree_starts_from_the_base_on_a_shallow_detached_checkout(
    remote: tuple[Path, str], tmp_path: Path
) -> None:
    """fetchDepth 1: `worktree add` and the base's fetch work on a shallow clone with no branch."""
    _, sha = remote
    checkout = _azure(remote, tmp_path / "s", 1, persist=True)
    base = current_branch(checkout, {"BUILD_SOURCEBRANCH": "refs/heads/trunk"})
    tree = wt.prepare(checkout, "card-1", "pair/card-1", base)
    assert (tree.start, wt.head(tree.path), tree.branch) == (sha, sha, "pair/card-1")
    assert is_detached(checkout)  # the user's checkout is as the pipeline left it


def test_a_detached_head_with_nothing_naming_the_base_says_what_to_set(
    remote: tuple[Path, str], tmp_path: Path
) -> None:
    checkout = _azure(remote, tmp_path / "s", 1)
    with pytest.raises(WorktreeError, match="BUILD_SOURCEBRANCH"):
        current_branch(checkout, {})


@pytest.mark.parametrize("version", [4, 6], ids=["checkout-v4", "checkout-v6"])
@pytest.mark.parametrize(
    ("name", "event"),
    [
        pytest.param(
            "issue_comment",
            {"action": "created", "repository": {"default_branch": "trunk"}},
            id="issue_comment",
        ),
        pytest.param("schedule", {"schedule": "*/5 * * * *"}, id="schedule"),
    ],
)
def test_actions_checkout_takes_the_default_branch_the_run_names(
    remote: tuple[Path, str], tmp_path: Path, version: int, name: str, event: dict[str, object]
) -> None:
    bare, _ = remote
    made = actions_checkout(
        "https://github.com",
        str(bare),
        tmp_path / "w",
        branch="trunk",
        token="not-a-token",  # noqa: S106 - a placeholder; the remote is a path
        runner_temp=tmp_path / "temp",
        version=version,
    )
    checkout = made.path
    assert _git(checkout, "symbolic-ref", "HEAD") == "refs/heads/trunk"  # a branch, as left
    _git(checkout, "checkout", "-q", "-b", "elsewhere")  # HEAD moved: it must not matter
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    env = {**made.env, "GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path)}
    assert current_branch(checkout, env) == "trunk"
    assert current_branch(checkout, {}) == "elsewhere"  # the CLI on a laptop: the branch it is on
