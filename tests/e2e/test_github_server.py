"""The fake GitHub served over loopback HTTP, with branches in a real bare repository.

A real `GitHubHost` in this process talks to `serve_fake_github` over sockets and pushes with
real `git`: by path to the bare repository, or through the server's git edge at the remote it
derives from the base URL. Python subprocesses prove that another process reaches the fake and
that what it sent is counted here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from action.statebranch import LOCK_FILE, StateBranch
from hosts.errors import Conflict, Forbidden
from hosts.github import ACTIONS_BOT, GitHubCredentials, GitHubHost, GitHubOptions
from hosts.models import REVIEW_CONTEXT, ReviewStatus
from tests.support.fake_github import FakeGitHub, rsa_key
from tests.support.git import git
from tests.support.github_server import (
    ACTIONS_TOKEN,
    WallClock,
    accept_actions_token,
    checkout,
    github_env,
    serve_fake_github,
)

REPO = "octocat/Hello-World"
STRANGER = "ghs_notAcceptedByTheFake0123456789abcdef"  # a token the fake never issued


def commit(work: Path, name: str, text: str, message: str) -> str:
    (work / name).write_text(text)
    git(work, "add", name)
    git(work, "commit", "-qm", message)
    return git(work, "rev-parse", "HEAD")


async def _no_sleep(_: float) -> None:
    """Backoff between read retries, skipped: nothing here waits on the wall clock."""


def make_host(base_url: str, token: str = ACTIONS_TOKEN, **options: Any) -> GitHubHost:
    """A token host over the server; `options` are `GitHubOptions` fields."""
    return GitHubHost(
        REPO,
        GitHubCredentials.token(token),
        base_url=base_url,
        options=GitHubOptions(write_spacing_s=0.0, **options),
        sleep=_no_sleep,
    )


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    path = tmp_path / "Hello-World.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(path))
    return path


@pytest.fixture
def work(tmp_path: Path, bare: Path) -> Path:
    """A developer's clone of `bare` whose `main` has one commit, pushed."""
    path = tmp_path / "work"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", str(bare))
    commit(path, "a.txt", "one\n", "one")
    git(path, "push", "-q", "origin", "main")
    return path


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    server = FakeGitHub(clock=WallClock())
    accept_actions_token(server)
    yield server
    assert server.unexpected == [], "requests the fake does not expect"
    assert server.violations == [], "a request inside a rate-limit window"


def test_a_pull_lives_in_the_bare_repository(fake: FakeGitHub, bare: Path, work: Path) -> None:
    main_before = git(bare, "rev-parse", "refs/heads/main")
    git(work, "checkout", "-qb", "pair/card-1")
    first = commit(work, "a.txt", "two\n", "two")

    async def scenario(base_url: str) -> None:
        async with make_host(base_url, remote_url=str(bare)) as host:
            assert await host.identity() == ACTIONS_BOT  # GET /user is refused, as on Actions
            assert await host.push_branch(work, "pair/card-1") == first
            pull = await host.open_pull("pair/card-1", "main", "Card 1", "body", draft=True)
            assert (pull.draft, pull.head_sha, pull.base_branch) == (True, first, "main")

            await host.set_review_status(pull.number, first, "success", "reviewed")
            assert await host.get_review_status(pull.number, first) == ReviewStatus(
                head_sha=first, state="success", description="reviewed"
            )

            second = commit(work, "b.txt", "three\n", "three")
            assert await host.push_branch(work, "pair/card-1") == second
            assert (await host.get_pull(pull.number)).head_sha == second
            assert await host.get_review_status(pull.number, second) is None  # stays on `first`
            with pytest.raises(Conflict, match="head moved"):
                await host.merge(pull.number, first, "merge")

            result = await host.merge(pull.number, second, "merge")  # marks it ready first
            assert result.merged and result.sha is not None
            merged = await host.get_pull(pull.number)
            assert (merged.state, merged.head_sha, merged.draft) == ("merged", second, False)

        main = git(bare, "rev-parse", "refs/heads/main")
        assert main == result.sha
        assert git(bare, "rev-parse", f"{main}^1", f"{main}^2").split() == [main_before, second]
        assert git(bare, "log", "-1", "--format=%an <%ae>%n%B", main).splitlines()[:3] == [
            "GitHub <noreply@github.com>",
            f"Merge pull request #{pull.number} from octocat/pair/card-1",
            "",
        ]
        git(work, "fetch", "-q", "origin")
        assert git(work, "rev-parse", "origin/main") == main

    with serve_fake_github(fake, bare_repo=bare) as base_url:
        assert base_url.endswith("/api/v3")
        asyncio.run(scenario(base_url))
    assert [s["context"] for s in fake.statuses[first]] == [REVIEW_CONTEXT]
    assert fake.mints == 0


def test_a_stale_pinned_sha_is_refused_by_the_fake(
    fake: FakeGitHub, bare: Path, work: Path
) -> None:
    # The adapter refuses a moved head itself; the fake's own 409 is what a race meets.
    git(work, "checkout", "-qb", "topic")
    stale = commit(work, "a.txt", "two\n", "two")
    git(work, "push", "-q", "origin", "topic")
    number = fake.seed_pull("topic")  # `topic` is in the bare repository: the real SHA
    fresh = commit(work, "a.txt", "three\n", "three")
    git(work, "push", "-q", "origin", "topic")
    main = git(bare, "rev-parse", "refs/heads/main")
    with serve_fake_github(fake, bare_repo=bare) as base_url:
        assert fake.pulls[number].head_sha == fresh
        headers = {"authorization": f"token {ACTIONS_TOKEN}"}
        url = f"{base_url}/repos/{REPO}/pulls/{number}/merge"
        with httpx.Client(trust_env=False, headers=headers) as client:
            refused = client.put(url, json={"sha": stale, "merge_method": "merge"})
            assert refused.status_code == 409
            assert git(bare, "rev-parse", "refs/heads/main") == main
            done = client.put(url, json={"sha": fresh, "merge_method": "merge"})
            assert done.status_code == 200
            assert git(bare, "rev-parse", "refs/heads/main") == done.json()["sha"]


def test_a_pull_needs_a_pushed_head(fake: FakeGitHub, bare: Path, work: Path) -> None:
    async def scenario(base_url: str) -> None:
        async with make_host(base_url) as host:
            with pytest.raises(Conflict, match="422"):
                await host.open_pull("never-pushed", "main", "t", "b")

    with serve_fake_github(fake, bare_repo=bare) as base_url:
        asyncio.run(scenario(base_url))
    assert fake.pulls == {}


def test_squash_rebase_and_conflicting_merges(fake: FakeGitHub, bare: Path, work: Path) -> None:
    for branch, name in (("squashed", "s.txt"), ("rebased", "r.txt"), ("clashing", "a.txt")):
        git(work, "checkout", "-q", "-b", branch, "main")
        commit(work, name, f"{branch} 1\n", f"{branch} 1")
        commit(work, name, f"{branch} 2\n", f"{branch} 2")
        git(work, "push", "-q", "origin", branch)
    git(work, "checkout", "-q", "main")
    commit(work, "a.txt", "main moved\n", "main moved")  # so `clashing` conflicts
    git(work, "push", "-q", "origin", "main")

    async def scenario(base_url: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with make_host(base_url) as host:
            for branch, method in (("squashed", "squash"), ("rebased", "rebase")):
                pull = await host.open_pull(branch, "main", branch.title(), "", draft=False)
                out[branch] = (pull, await host.merge(pull.number, pull.head_sha, method))
            pull = await host.open_pull("clashing", "main", "Clash", "", draft=False)
            before = git(bare, "rev-parse", "refs/heads/main")
            with pytest.raises(Conflict, match="405"):
                await host.merge(pull.number, pull.head_sha, "merge")
            assert git(bare, "rev-parse", "refs/heads/main") == before
            assert (await host.get_pull(pull.number)).state == "open"
        return out

    with serve_fake_github(fake, bare_repo=bare) as base_url:
        merged = asyncio.run(scenario(base_url))

    squash_pull, squash = merged["squashed"]
    assert len(git(bare, "rev-parse", f"{squash.sha}^@").split()) == 1
    assert git(bare, "log", "-1", "--format=%s", squash.sha) == f"Squashed (#{squash_pull.number})"
    assert git(bare, "show", f"{squash.sha}:s.txt") == "squashed 2"

    _, rebase = merged["rebased"]
    main = git(bare, "rev-parse", "refs/heads/main")
    assert rebase.sha == main
    assert git(bare, "log", "--format=%s", "-2", main).splitlines() == ["rebased 2", "rebased 1"]
    assert git(bare, "rev-parse", f"{main}~2") == squash.sha  # linear on top of the squash
    assert git(bare, "worktree", "list").count("\n") == 0  # the scratch worktree is gone


def test_the_git_edge_takes_pushes_with_the_token(fake: FakeGitHub, bare: Path, work: Path) -> None:
    git(work, "checkout", "-qb", "pair/card-2")
    head = commit(work, "c.txt", "c\n", "c")

    async def scenario(base_url: str) -> None:
        # No remote_url: the adapter derives http://127.0.0.1:<port>/octocat/Hello-World.git.
        async with make_host(base_url, token=STRANGER) as stranger:
            # A refused header is a 401 that git answers by asking for a user name, as on
            # Actions with a bad token.
            with pytest.raises(Forbidden, match="could not read Username"):
                await stranger.push_branch(work, "pair/card-2")
        async with make_host(base_url) as host:
            assert await host.push_branch(work, "pair/card-2") == head
            pull = await host.open_pull("pair/card-2", "main", "Card 2", "")
            assert pull.head_sha == head

    with serve_fake_github(fake, bare_repo=bare) as base_url:
        asyncio.run(scenario(base_url))
    assert git(bare, "rev-parse", "refs/heads/pair/card-2") == head
    assert fake.mutations == 1  # the pull; git traffic is not REST


def test_a_checkout_fetches_and_pushes_the_state_branch(
    fake: FakeGitHub, bare: Path, work: Path, tmp_path: Path
) -> None:
    # What the Action does with its workspace: fetch, ls-remote and a compare-and-swap push of
    # `pair-state` through `origin`, authenticated by the persisted header alone.
    def tick(host_id: str) -> StateBranch:
        return StateBranch(workspace, clock=lambda: datetime.now(UTC), host_id=host_id)

    with serve_fake_github(fake, bare_repo=bare) as base_url:
        workspace = checkout(fake, base_url, tmp_path / "workspace")
        assert git(workspace, "rev-parse", "HEAD") == git(bare, "rev-parse", "refs/heads/main")
        lease = tick("runner-1").try_lock("run-1")
        assert lease is not None
        assert tick("runner-2").try_lock("run-2") is None  # the lock is on the remote: skip
        assert fake.requests == 0  # git traffic is not REST

        headers = {"authorization": f"Bearer {fake.pat}"}
        with httpx.Client(trust_env=False, headers=headers) as client:
            status = client.get(f"{base_url}/repos/{REPO}/commits/pair-state/status")
        assert status.json()["sha"] == lease.commit  # the pushed branch, read before routing
    lock = git(bare, "show", f"refs/heads/pair-state:{LOCK_FILE}")
    assert '"runId":"run-1"' in lock


def test_a_subprocess_reaches_the_fake(fake: FakeGitHub) -> None:
    number = fake.seed_issue("Card", "from the test process")
    script = (
        "import os, sys, httpx\n"
        "url = os.environ['GITHUB_API_URL'] + '/repos/' + os.environ['GITHUB_REPOSITORY']\n"
        "auth = {'authorization': 'Bearer ' + os.environ['GITHUB_TOKEN']}\n"
        "with httpx.Client(trust_env=False, headers=auth) as client:\n"
        "    answer = client.get(url + '/issues/' + sys.argv[1])\n"
        "answer.raise_for_status()\n"
        "print(answer.json()['body'])\n"
    )
    with serve_fake_github(fake, bare_repo=None) as base_url:
        env = {**os.environ, **github_env(fake, base_url)}
        done = subprocess.run(
            [sys.executable, "-c", script, str(number)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the test process"
    assert (fake.requests, fake.counted, fake.mutations) == (1, 1, 0)
    assert fake.log == [("GET", f"/repos/{REPO}/issues/{number}", 200)]
    assert fake.base_url == "https://api.github.com"  # restored for whatever runs next


def test_app_credentials_over_http(fake: FakeGitHub, bare: Path, work: Path) -> None:
    # A real-time clock on both sides: the JWT's iat/exp and the token's expiry agree.
    git(work, "checkout", "-qb", "pair/card-3")
    head = commit(work, "d.txt", "d\n", "d")

    async def scenario(base_url: str) -> None:
        async with GitHubHost(
            REPO,
            GitHubCredentials.app(fake.app_id, rsa_key()[0], fake.installation_id),
            base_url=base_url,
            options=GitHubOptions(write_spacing_s=0.0),
            sleep=_no_sleep,
        ) as host:
            assert (await host.identity()).login == "pairbot[bot]"
            assert await host.push_branch(work, "pair/card-3") == head  # the minted token

    with serve_fake_github(fake, bare_repo=bare) as base_url:
        asyncio.run(scenario(base_url))
    assert fake.mints == 1
    assert git(bare, "rev-parse", "refs/heads/pair/card-3") == head


def test_a_timeout_fault_drops_the_connection(fake: FakeGitHub) -> None:
    number = fake.seed_issue("Card", "body")
    fake.fail("GET", rf"/issues/{number}$", "timeout")

    async def scenario(base_url: str) -> str:
        async with make_host(base_url) as host:
            return (await host.get_card(number)).body  # a read: retried once

    with serve_fake_github(fake, bare_repo=None) as base_url:
        assert asyncio.run(scenario(base_url)) == "body"
    path = f"/repos/{REPO}/issues/{number}"
    assert fake.log == [("GET", path, 0), ("GET", path, 200)]
