"""The Action asks for its next run: `python -m action` as a subprocess, one fresh runner per
run, a real state branch, the fake GitHub on loopback (tests/e2e/action_harness.py).

A `/pair implement` comment takes one step and ends by dispatching this workflow
(`POST …/actions/workflows/pairbot.yml/dispatches`, the ref and `continued-from`) with the run's
token; a 403 (no `actions: write`) is said once in the log and the summary and the run stays
green; the daily bound stops the chain; a card at a gate asks for nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from tests.e2e.action_harness import ActionRepo, Invocation, action_repo
from tests.support.git import run_git
from tests.support.github_server import ACTIONS_TOKEN

pytestmark = pytest.mark.slow

WORKFLOW_REF = "octocat/Hello-World/.github/workflows/pairbot.yml@refs/heads/main"


class Dispatches:
    """Answers the Actions dispatch endpoint in front of the fake, recording each request."""

    def __init__(self, handle: Callable[[httpx.Request], Awaitable[httpx.Response]]) -> None:
        self._handle = handle
        self.seen: list[tuple[str, dict[str, Any], str]] = []  # (path, body, authorization)
        self.status = 204

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = unquote(request.url.path)
        if request.method == "POST" and path.endswith("/dispatches"):
            auth = request.headers.get("authorization", "")
            self.seen.append((path, json.loads(request.content), auth))
            if self.status == 403:
                refused = {"message": "Resource not accessible by integration"}
                return httpx.Response(403, json=refused)
            return httpx.Response(self.status)
        return await self._handle(request)


def env(limit: int = 50) -> dict[str, str]:
    return {"GITHUB_WORKFLOW_REF": WORKFLOW_REF, "INPUT_CONTINUE_LIMIT": str(limit)}


@pytest.mark.slow_first(20)
def test_a_command_run_dispatches_the_next_run_until_the_card_is_at_a_gate(
    tmp_path: Path,
) -> None:
    with action_repo(tmp_path, declare_hosts=False) as repo:
        dispatches = Dispatches(repo.fake.handle)
        repo.fake.handle = dispatches  # type: ignore[method-assign]  # served per request
        owner, name = repo.fake.owner, repo.fake.repo

        first = repo.run(repo.comment_event("/pair implement"), extra_env=env(limit=2))
        assert first.code == 0, first.stderr + first.stdout
        assert first.outputs["transition"] == "propose"
        path, body, auth = dispatches.seen[-1]
        assert path.endswith(f"/repos/{owner}/{name}/actions/workflows/pairbot.yml/dispatches")
        assert body == {"ref": "refs/heads/main", "inputs": {"continued-from": f"card-{repo.card}"}}
        assert auth == f"Bearer {ACTIONS_TOKEN}"  # the run's own GITHUB_TOKEN
        assert (
            f"asked for the next run of pairbot.yml on refs/heads/main after card-{repo.card}"
            in (first.stdout)
        )

        # Without `actions: write`: said once, in the log and the summary; the step stands.
        dispatches.status = 403
        refused = run_tick(repo, env(limit=2))
        assert refused.code == 0 and refused.outputs["transition"] == "apply"
        assert len(dispatches.seen) == 2
        assert refused.stdout.count("add `actions: write`") == 1
        assert "GitHub refused the next run of pairbot.yml" in refused.stdout
        assert "actions: write" in refused.summary and "Next run:" in refused.summary

        # The daily bound (2 here): the third chained run of the card is not asked for.
        dispatches.status = 204
        bounded = run_tick(repo, env(limit=2))
        assert bounded.outputs["transition"] == "verify"
        assert len(dispatches.seen) == 2
        assert f"card-{repo.card} took 2 chained runs today (the limit is 2)" in bounded.stdout

        # A fresh bound: the run that publishes leaves the card at a gate and asks for nothing.
        published = run_tick(repo, env(limit=50))
        assert published.outputs["status"] == "ready-for-merge", published.stdout
        assert len(dispatches.seen) == 2
        assert "next run" not in published.stdout
        counted = repo_state(repo, ".pair/continuation.json")
        assert counted["runs"] == {f"card-{repo.card}": 2}
        repo.assert_invariants()


def run_tick(repo: ActionRepo, extra: dict[str, str]) -> Invocation:
    """A scheduled tick (what the dispatched run does: a tick of every batch)."""
    done = repo.run(repo.schedule_event(), extra_env=extra)
    assert done.code == 0, done.stderr + done.stdout
    return done


def repo_state(repo: ActionRepo, path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(run_git(repo.bare, "show", f"pair-state:{path}").stdout)
    return loaded
