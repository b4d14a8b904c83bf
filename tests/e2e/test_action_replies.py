"""The Action answers the comment whose command a user error stopped: once, edited on a re-run.

`python -m action` as a subprocess against the fake GitHub (tests/e2e/action_harness.py). The
run still fails the way it did (`::error::`, exit code 2); the person who commented now also
reads why on the issue, under the App's reply marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.domain.intake.pair_request import CommentRef, PairRequest
from app.domain.text import mdtext
from hosts.markers import make_marker
from tests.e2e.action_harness import MAINTAINER, action_repo

pytestmark = pytest.mark.slow


def test_approve_on_a_card_without_a_cycle_is_answered_once(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        event = repo.comment_event("/pair approve")
        comment = event[1]["comment"]["id"]
        message = (
            f"card #{repo.card} has no pairbot cycle yet; comment `/pair implement` on it first"
        )
        marker = make_marker("reply", repo.card, run=str(comment))
        for _ in range(2):  # the same event twice: a re-run of the workflow
            done = repo.run(event)
            assert done.code == 2, done.stdout + done.stderr
            assert "::error::" in done.stdout and "has no pairbot cycle yet" in done.stdout
            replies = [c for c in repo.fake.comments.values() if c.body.startswith(marker)]
            assert len(replies) == 1
            assert "pairbot could not run `/pair approve`: " in replies[0].body
            assert mdtext.inline(message) in replies[0].body
        assert replies[0].user.login == "github-actions[bot]"
        # A comment the Action saw itself was announced by nobody: no tracking comment appears.
        tracking = make_marker("tracking", repo.card)
        assert not [c for c in repo.fake.comments.values() if c.body.startswith(tracking)]
        assert repo.state_journal() == []  # nothing was recorded for the card
        repo.assert_invariants()


def test_a_dispatched_command_that_cannot_run_is_answered_on_its_comment(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        octocat = repo.fake.user(MAINTAINER)
        comment = repo.fake.add_comment(repo.card, "/pair retry", MAINTAINER)
        request = PairRequest(
            card=repo.card,
            verb="retry",
            comment=CommentRef(id=str(comment), author_login=MAINTAINER, author_id=octocat.id),
            delivery="d-1",
        )
        event = ("repository_dispatch", {"action": "pair", "client_payload": request.to_payload()})
        done = repo.run(event)
        assert done.code == 2, done.stdout + done.stderr
        marker = make_marker("reply", repo.card, run=str(comment))
        [reply] = [c for c in repo.fake.comments.values() if c.body.startswith(marker)]
        assert "pairbot could not run `/pair retry`: " in reply.body
        assert "has no pairbot cycle yet" in reply.body
        # The App announced it ("queued … runs next"): the tracking comment now says it failed.
        tracking = make_marker("tracking", repo.card)
        [status] = [c for c in repo.fake.comments.values() if c.body.startswith(tracking)]
        assert f"`/pair retry` (requested by **{MAINTAINER}**) could not run" in status.body


def test_a_tick_is_never_answered(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        done = repo.run(repo.schedule_event())
        assert done.code == 0, done.stdout + done.stderr
        assert not [c for c in repo.fake.comments.values() if "pair:reply" in c.body]
