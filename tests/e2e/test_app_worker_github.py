"""End to end: the self-hosted GitHub App in `execution: worker` mode, against a fake GitHub.

The App is the installed `pairbot serve` in a subprocess, configured by its PAIR_* variables,
its root a clone of the fake's repository; signed `issue_comment` deliveries go to its webhook
and the test watches the fake GitHub (and the bare repository behind it) until the work is done.

A command's job runs one step (`app.web.worker.cycle_executor`); the worker's own ticks
(`app.web.ticker`) take the card on from there, step after step, until it waits for a person —
one comment takes a card to a reviewed pull request, as a scheduled workflow does for the
Action. The tests wait for the state the ticks reach, never for a time.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.app_harness import AppWorld, app_world

pytestmark = pytest.mark.slow

BOT = "pairbot[bot]"


def _script(world: AppWorld, steps: dict[str, list[str]]) -> None:
    (world.scratch / "script.json").write_text(json.dumps({"default": "ok", "steps": steps}))


def _run(world: AppWorld, body: str, jobs: int, *, number: int | None = None) -> str:
    """Deliver a maintainer's comment and wait for the App to finish its job; the job's result."""
    _, _, answer = world.comment(body, number=number)
    assert answer.status_code == 202, answer.text
    done = world.settle(jobs)
    assert done[-1]["state"] == "done", done[-1]
    return str(done[-1]["result"])


def _until(condition: Callable[[], bool], within_s: float = 240.0) -> None:
    """Wait for the App's ticks to reach a state (a bound for a stuck App, not a timing)."""
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "the App never reached the state"
        time.sleep(0.05)


def _transitions(world: AppWorld) -> list[str]:
    return [
        str(r["transition"])
        for r in world.journal()
        if r.get("kind") == "completion" and r.get("transition")
    ]


def _tracking(world: AppWorld) -> str:
    """The card's one tracking comment, written by the App's installation."""
    found = [
        c
        for c in world.fake.comments_on(world.card)
        if c.body.startswith(f"<!-- pair:tracking #{world.card} -->")
    ]
    assert len(found) == 1, [c.body for c in found]
    assert found[0].user.login == BOT
    return found[0].body


def _labels(world: AppWorld, number: int) -> list[str]:
    return [lb for lb in world.fake.issues[number].labels if lb.startswith("pr-state:")]


def _no_secret_leaked(world: AppWorld) -> None:
    """Neither an installation token the App minted nor the operator's fetch token is in the
    App's output or in the checkout's git config (pairbot's pushes pass theirs per command)."""
    assert world.fake.minted  # the App did authenticate as its installation
    config = (world.root / ".git" / "config").read_text()
    output = world.log_text()
    for secret in [*world.fake.minted, world.fake.pat]:
        assert secret not in output
        assert secret not in config
    assert "extraheader" not in config


def test_comments_take_a_card_to_a_reviewed_pull_request_and_a_retry_on_it_acts_on_the_card(
    tmp_path: Path,
) -> None:
    with app_world(tmp_path) as world:
        fake, card = world.fake, world.card
        _script(world, {"verify": ["block", "ok"]})

        # One comment: its job runs propose, then the worker's ticks run apply (pushed, the
        # draft PR opened) and verify, where the reviewer reports a blocker and the card waits.
        assert _run(world, "/pair implement", 1) == "executed by the worker"
        implement = next(c for c in fake.comments_on(card) if c.body == "/pair implement")
        assert ("comment", implement.id, "eyes", BOT) in fake.reactions
        # The label is set before the tracking comment is rewritten: wait for both.
        _until(lambda: _labels(world, card) == ["pr-state:blocked"])
        _until(lambda: "`pr-state:blocked`" in _tracking(world))
        assert _transitions(world) == ["propose", "apply"]  # the blocked verify completed nothing
        assert len(world.jobs()) == 1  # nobody commented again
        tracking = _tracking(world)
        # The App announced "queued …" there; the steps wrote the card's state over it.
        assert "queued" not in tracking and "`pr-state:blocked`" in tracking
        (pull,) = fake.pulls
        assert fake.pulls[pull].head_ref == f"pair/card-{card}" and fake.pulls[pull].draft
        assert fake.issues[pull].user.login == BOT
        head = world.bare_git("rev-parse", f"pair/card-{card}")
        assert fake.pulls[pull].head_sha == head
        commits = world.bare_git("rev-list", f"main..pair/card-{card}").split()
        assert len(commits) >= 2  # the plan, then the work
        # The worker fetched what it started from into its private refs: the operator's
        # credential helper made the checkout fetchable.
        private = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname)", "refs/pairbot/"],
            cwd=world.root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert "refs/pairbot/bases/main" in private
        assert _labels(world, pull) == ["pr-state:blocked"]

        # `/pair retry` commented on the PR acts on the card behind it: the park clears, the
        # verify runs again, and the ticks publish the synthesis: ready-for-merge.
        assert _run(world, "/pair retry", 2, number=pull) == "executed by the worker"
        retry = next(c for c in fake.comments_on(pull) if c.body == "/pair retry")
        assert ("comment", retry.id, "eyes", BOT) in fake.reactions
        assert [e["verb"] for e in world.cycle_events("command")][-1] == "retry"
        _until(lambda: _labels(world, card) == ["pr-state:ready-for-merge"])
        _until(lambda: "`pr-state:ready-for-merge`" in _tracking(world))
        assert _labels(world, pull) == ["pr-state:ready-for-merge"]
        assert _transitions(world)[:3] == ["propose", "apply", "verify"]
        # No tracking comment on the PR: the card's stays the only one.
        assert not [c for c in fake.comments_on(pull) if "pair:tracking" in c.body]
        reviewed = [e["head"] for e in world.cycle_events("reviewed")]
        assert reviewed == [head]
        status = fake.statuses[head][-1]
        assert status["context"] == "pair-review" and status["state"] == "success"
        assert status["creator"]["login"] == BOT
        assert "`pr-state:ready-for-merge`" in _tracking(world)

        # A redelivery of the last delivery runs nothing: no job, no request to GitHub.
        delivery, payload, _ = world.comment("/pair status")
        world.settle(3)
        _until(lambda: "`pr-state:ready-for-merge`" in _tracking(world))
        tracking, requests = _tracking(world), fake.requests
        again = world.post(payload, delivery)
        assert again.status_code == 200 and again.json() == {"status": "duplicate"}
        assert len(world.jobs()) == 3 and fake.requests == requests
        # `/pair status` left the card's state in its tracking comment, not "queued".
        assert "queued" not in tracking and "`pr-state:ready-for-merge`" in tracking

        duplicated = {m: n for m, n in world.markers().items() if n > 1}
        assert not duplicated, duplicated
        assert fake.unexpected == []
    _no_secret_leaked(world)


def test_a_read_only_approver_is_refused_once_and_nothing_runs(tmp_path: Path) -> None:
    with app_world(tmp_path) as world:
        fake = world.fake
        fake.user("mallory")
        fake.collaborators["mallory"] = "read"
        delivery, payload, answer = world.comment("/pair approve", login="mallory")
        assert answer.status_code == 202, answer.text
        (job,) = world.settle(1)
        assert job["state"] == "done" and str(job["result"]).startswith("refused:")
        assert world.post(payload, delivery).json() == {"status": "duplicate"}
        replies = [c for c in fake.comments_on(world.card) if c.user.login == BOT]
        assert len(replies) == 1, [c.body for c in replies]
        assert "pair:reply" in replies[0].body.splitlines()[0]
        assert not fake.reactions  # no 👀: nothing was accepted
        assert world.journal() == []
        assert not (world.root / ".pair" / "batches").exists()
        assert world.bare_git("for-each-ref", "--format=%(refname)") == "refs/heads/main"
        assert not fake.pulls and not fake.statuses
        assert fake.unexpected == []
    _no_secret_leaked(world)
