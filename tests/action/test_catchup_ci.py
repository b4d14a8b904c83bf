"""Catch-up in the GitHub Action: a scheduled tick handles a command whose own run never
happened. `python -m action` as a subprocess, one fresh runner per run, a real `pair-state`
branch, the fake GitHub on loopback listing the repository's comments
(`GET /repos/{o}/{r}/issues/comments?since=…`) — tests/e2e/action_harness.py.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.action_harness import MAINTAINER, ActionRepo, Invocation, action_repo
from tests.support.git import run_git

pytestmark = pytest.mark.slow

# No grace period: every comment here is older than the run that looks for it.
NOW = {"PAIR_CATCHUP_GRACE_S": "0"}


def state_file(repo: ActionRepo, path: str) -> Any:
    return json.loads(run_git(repo.bare, "show", f"pair-state:{path}").stdout)


def cursor(repo: ActionRepo) -> datetime:
    return datetime.fromisoformat(state_file(repo, ".pair/catchup.json")["cursor"])


def tick(repo: ActionRepo, extra: dict[str, str] | None = None) -> Invocation:
    done = repo.run(repo.schedule_event(), extra_env={**NOW, **(extra or {})})
    assert done.code == 0, done.stderr + done.stdout
    return done


def listings(repo: ActionRepo) -> list[dict[str, str]]:
    path = f"/repos/{repo.fake.owner}/{repo.fake.repo}/issues/comments"
    return [q for p, q, _ in repo.fake.gets if p.endswith(path)]


def test_a_missed_command_is_taken_by_the_next_tick_once(tmp_path: Any) -> None:
    with action_repo(tmp_path, declare_hosts=False) as repo:
        fake = repo.fake
        # A command whose run happened: `/pair status` on a card with no cycle, answered.
        answered = repo.run(repo.comment_event("/pair status"), extra_env=NOW)
        assert answered.code == 2, answered.stdout
        [status_id] = [c.id for c in fake.comments.values() if c.body == "/pair status"]
        # Then three comments whose runs never happened: a bot's command, a remark, a command.
        fake.add_comment(repo.card, "/pair implement", "dependabot[bot]")
        fake.add_comment(repo.card, "thanks, looks good", MAINTAINER)
        missed = fake.add_comment(repo.card, "/pair implement", MAINTAINER)
        replies_before = len(fake.comments)

        first = tick(repo)
        assert f"catching up on a command nobody ran: comment {missed}" in first.stdout
        assert first.outputs["transition"] == "propose", first.stdout
        # Acknowledged as its own run would have: 👀 on the missed comment, nothing else.
        eyes = [r for r in fake.reactions if r[2] == "eyes"]
        assert any(str(missed) in map(str, r) for r in eyes), fake.reactions
        assert not any(str(status_id) == str(r[1]) and r[0] == "comment" for r in eyes[1:])
        journal = repo.state_journal()
        commands = [r["data"] for r in journal if r.get("data", {}).get("event") == "command"]
        assert [c["delivery"] for c in commands] == [f"comment-{missed}"]
        handled = state_file(repo, ".pair/deliveries.json")["handled"]
        assert f"comment-{missed}" in handled and f"comment-{status_id}" in handled
        stored = fake.comments[missed].created_at.replace("Z", "+00:00")
        assert cursor(repo) == datetime.fromisoformat(stored)
        # The answered `/pair status` got no second reply; the bot and the remark none.
        assert len(fake.comments) - replies_before <= 1  # the card's tracking comment
        repo.assert_invariants()

        # The next tick lists again (from the cursor), finds nothing new, and steps the card.
        second = tick(repo)
        assert "catching up" not in second.stdout
        assert second.outputs["transition"] == "apply", second.stdout
        assert cursor(repo) >= datetime.fromisoformat(stored)
        since = [q.get("since", "") for q in listings(repo)]
        assert len(since) == 2 and since[1] >= since[0], since
        shapes = {(q.get("sort"), q.get("direction")) for q in listings(repo)}
        assert shapes == {("created", "asc")}
        commands = [r for r in repo.state_journal() if r.get("data", {}).get("event") == "command"]
        assert len(commands) == 1  # never run twice
        repo.assert_invariants()


def test_an_idle_tick_costs_one_listing_and_takes_no_lock(tmp_path: Any) -> None:
    with action_repo(tmp_path, declare_hosts=False) as repo:
        repo.fake.add_comment(repo.card, "just a remark", MAINTAINER)
        idle = tick(repo)
        assert idle.outputs["status"] == "nothing-ready", idle.stdout
        assert len(listings(repo)) == 1
        # Nothing worth a push: no lock was taken, so pair-state was never written.
        shown = run_git(repo.bare, "rev-parse", "--verify", "--quiet", "refs/heads/pair-state")
        assert shown.returncode != 0
        off = tick(repo, {"PAIR_CATCHUP_WINDOW_S": "0"})  # catch-up off: no listing at all
        assert off.outputs["status"] == "nothing-ready"
        assert len(listings(repo)) == 1


def test_a_command_within_the_grace_period_waits_for_its_own_run(tmp_path: Any) -> None:
    with action_repo(tmp_path, declare_hosts=False) as repo:
        repo.fake.add_comment(repo.card, "/pair implement", MAINTAINER)
        waiting = tick(repo, {"PAIR_CATCHUP_GRACE_S": "3600"})
        assert waiting.outputs["status"] == "nothing-ready", waiting.stdout
        assert "catching up" not in waiting.stdout
        bad = repo.run(repo.schedule_event(), extra_env={"PAIR_CATCHUP_WINDOW_S": "-1"})
        assert bad.code == 2
        assert "PAIR_CATCHUP_WINDOW_S='-1' is not allowed; allowed: a number of seconds" in (
            bad.stdout
        )
