"""A comment's first requests come before the lock: its author's permission, then one 👀 — and
only for a command that runs; an idle tick takes no lock and loads neither pydantic nor githubkit.

`python -m action` as a subprocess against the fake GitHub (tests/e2e/action_harness.py); the
fake records every REST request in order (`FakeGitHub.arrivals`).
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.action_harness import ActionRepo, action_repo
from tests.support.git import run_git
from tests.support.project import AGENT_COMMAND

pytestmark = pytest.mark.slow

REACTIONS = r"/issues/comments/\d+/reactions$"


def _requests(repo: ActionRepo) -> list[tuple[str, str]]:
    return [(method, path) for _, method, path in repo.fake.arrivals]


def _reaction_posts(repo: ActionRepo) -> list[str]:
    return [path for method, path in _requests(repo) if method == "POST" and "/reactions" in path]


def _eyes(repo: ActionRepo) -> list[tuple[str, int, str, str]]:
    return [r for r in repo.fake.reactions if r[2] == "eyes"]


@pytest.mark.parametrize(
    ("body", "login", "bot"),
    [
        pytest.param("/pair implement", "dependabot[bot]", True, id="bot-author"),
        pytest.param("> /pair implement\n\nas asked above", "octocat", False, id="quoted"),
        pytest.param("Looks good to me, thanks!", "octocat", False, id="no-command"),
        pytest.param("```\n/pair implement\n```", "octocat", False, id="fenced"),
    ],
)
def test_a_comment_pairbot_ignores_gets_no_request_at_all(
    tmp_path: Path, body: str, login: str, bot: bool
) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.user(login, bot=bot)
        done = repo.run(repo.comment_event(body, login=login))
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["status"] == "ignored"
        assert _requests(repo) == []
        assert not repo.fake.reactions


def test_a_disallowed_author_is_asked_about_once_and_refused_without_a_reaction(
    tmp_path: Path,
) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.user("stranger")  # no permission on the repository
        done = repo.run(repo.comment_event("/pair implement", login="stranger"))
        assert done.code == 0, done.stdout + done.stderr
        requests = _requests(repo)
        permission = f"/repos/{repo.fake.owner}/{repo.fake.repo}/collaborators/stranger/permission"
        assert requests[0] == ("GET", permission)
        assert requests.count(("GET", permission)) == 1  # the run reused the early answer
        assert _reaction_posts(repo) == []
        refusals = [c for c in repo.fake.comments_on(repo.card) if "Sorry, stranger" in c.body]
        assert len(refusals) == 1


def test_a_command_is_authorized_and_acknowledged_first_and_only_once(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        event = repo.comment_event("/pair implement")
        comment = event[1]["comment"]["id"]
        done = repo.run(event)
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["transition"] == "propose"
        api = f"/repos/{repo.fake.owner}/{repo.fake.repo}"
        # The permission, then 👀: before any other request (and before the lock).
        assert _requests(repo)[:2] == [
            ("GET", f"{api}/collaborators/octocat/permission"),
            ("POST", f"{api}/issues/comments/{comment}/reactions"),
        ]
        # The run's checkpoints and its end acknowledge what is owed: nothing is.
        assert len(_reaction_posts(repo)) == 1 and len(_eyes(repo)) == 1
        assert run_git(repo.bare, "show", "pair-state:.pair/acks.json").returncode != 0
        # A re-run of the same workflow run is recognised: no second 👀 is owed or posted.
        again = repo.run(event)
        assert again.code == 0, again.stdout + again.stderr
        assert len(_eyes(repo)) == 1
        repo.assert_invariants()


def test_an_early_reaction_that_fails_is_posted_once_the_command_is_recorded(
    tmp_path: Path,
) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.fail("POST", REACTIONS, "5xx", times=1)  # only the early one
        event = repo.comment_event("/pair implement")
        done = repo.run(event)
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["transition"] == "propose"
        assert f"could not acknowledge comment {event[1]['comment']['id']} yet" in done.stdout
        assert len(_reaction_posts(repo)) == 2  # the refused early one, then the owed one
        assert len(_eyes(repo)) == 1
        repo.assert_invariants()


def test_an_idle_tick_takes_no_lock_and_makes_only_its_catch_up_listing(
    tmp_path: Path,
) -> None:
    with action_repo(tmp_path) as repo:
        done = repo.run(repo.schedule_event(), extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["status"] == "nothing-ready"
        imported = [
            line.rsplit("|", 1)[-1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        ]
        assert "action.statebranch" in imported  # the import listing is there
        # Changed deliberately with the catch-up (docs/action.md, "Catch-up"): an idle tick makes
        # one listing of the repository's recent comments, through githubkit; nothing else.
        assert "hosts.github.recent" in imported
        assert not [
            m for m in imported if m.startswith(("app.cycle.card_cycle", "app.engine.step"))
        ]
        assert _requests(repo) == [
            ("GET", f"/repos/{repo.fake.owner}/{repo.fake.repo}/issues/comments")
        ]
        # Nothing was locked, so nothing was pushed: the state branch was never created.
        assert run_git(repo.bare, "rev-parse", "--verify", "-q", "pair-state").returncode != 0


def test_a_tick_while_a_card_waits_for_a_person_leaves_the_state_branch_as_it_was(
    tmp_path: Path,
) -> None:
    # Only the workflow, as docs/action.md sets it up: a plan waits for its approval.
    inputs = {
        "INPUT_AGENT": "command",
        "INPUT_AGENT_COMMAND": shlex.join(AGENT_COMMAND),
    }
    with action_repo(tmp_path, config=False) as repo:
        first = repo.run(repo.comment_event("/pair implement"), extra_env=inputs)
        assert first.outputs["status"] == "awaiting-approval", first.stdout + first.stderr
        tip = run_git(repo.bare, "rev-parse", "pair-state").stdout.strip()
        done = repo.run(repo.schedule_event(), extra_env=inputs)
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["status"] == "nothing-ready"
        assert run_git(repo.bare, "rev-parse", "pair-state").stdout.strip() == tip


def test_a_command_that_never_gets_the_lock_says_it_did_not_run(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        # Another run holds the lock (fresh: it is not reclaimed), and this one may not wait.
        at = datetime.now(UTC).isoformat()
        lock = json.dumps({"runId": "999-other", "host": "actions:999", "at": at}) + "\n"
        blob = run_git(repo.bare, "hash-object", "-w", "--stdin", input=lock).stdout.strip()
        tree = run_git(repo.bare, "mktree", input=f"100644 blob {blob}\tlock.json\n").stdout
        commit = run_git(repo.bare, "commit-tree", tree.strip(), "-m", "lock").stdout.strip()
        run_git(repo.bare, "update-ref", "refs/heads/pair-state", commit)
        event = repo.comment_event("/pair implement")
        done = repo.run(event, extra_env={"PAIR_STATE_LOCK_WAIT_S": "0"})
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["status"] == "nothing-ready"
        comment = event[1]["comment"]["id"]
        assert f"the command of comment {comment} did not run: comment it again" in done.stdout
        assert run_git(repo.bare, "rev-parse", "pair-state").stdout.strip() == commit
