"""Commands end to end: a signed delivery → the real app on uvicorn → GitHub (faked at HTTP).

Who may act, what is acknowledged, what is dispatched, and what never runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.domain.intake.pair_request import PairRequest
from app.web.app import create_app
from app.web.jobs import HeadMovedJob, ScopeDecisionJob
from hosts.markers import make_marker
from tests.web.conftest import (
    AppGitHub,
    RecordingExecutor,
    StepClock,
    app_settings,
    comment_event,
    fixture,
    github_forges,
    github_headers,
    served,
)


def serve_for(fake: AppGitHub, tmp_path: Path, **kwargs: Any) -> Any:
    settings_overrides = kwargs.pop("settings", {})
    app = create_app(
        app_settings(tmp_path, **settings_overrides),
        github=github_forges(fake),
        poll_s=0.05,
        **kwargs,
    )
    return served(app)


def no_errors(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def test_an_accepted_command_is_acknowledged_once_and_dispatched(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    card = fake.seed_issue("Add login", "As a user…")
    octocat = fake.users["octocat"]
    comment = fake.add_comment(card, "/pair implement until: merged merge: never", "octocat")
    with serve_for(fake, tmp_path) as app:
        delivery = str(uuid.uuid4())
        payload = comment_event(
            fake, card, comment, "/pair implement until: merged merge: never", octocat
        )
        response = app.deliver("issue_comment", payload, delivery=delivery)
        assert (response.status_code, response.json()) == (202, {"status": "queued", "jobs": 1})
        app.wait_idle()
        again = app.deliver("issue_comment", payload, delivery=delivery)
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")
        app.wait_idle()
        jobs = app.run(app.service.store.jobs())
    assert [(j.state, j.result, j.verb) for j in jobs] == [
        ("done", "dispatched to GitHub Actions", "implement")
    ]
    assert fake.posts(f"/issues/comments/{comment}/reactions") == [
        f"/repos/octocat/Hello-World/issues/comments/{comment}/reactions"
    ]
    assert ("comment", comment, "eyes", "pairbot[bot]") in fake.reactions
    tracking = [c for c in fake.comments_on(card) if c.user.login == "pairbot[bot]"]
    assert len(tracking) == 1
    assert tracking[0].body.startswith(make_marker("tracking", card))
    assert "queued `/pair implement`" in tracking[0].body
    assert len(fake.dispatches) == 1
    dispatched = fake.dispatches[0]
    assert dispatched["event_type"] == "pair"
    request = PairRequest.from_payload(dispatched["client_payload"])
    assert (request.card, request.verb, dict(request.args)) == (
        card,
        "implement",
        {"until": "merged", "merge": "never"},
    )
    assert request.delivery == delivery
    assert request.comment is not None and request.comment.id == str(comment)
    assert request.comment.author_id == octocat.id
    assert fake.unexpected == []
    no_errors(caplog)


@pytest.mark.parametrize("level", ["read", "triage", "none", "stranger"])
def test_read_triage_and_non_collaborators_get_one_refusal_and_nothing_runs(
    fake: AppGitHub, tmp_path: Path, level: str
) -> None:
    card = fake.seed_issue("Card", "")
    login = f"user-{level}"
    user = fake.user(login)
    if level != "stranger":
        fake.collaborators[login] = level
    comment = fake.add_comment(card, "/pair implement", login)
    payload = comment_event(fake, card, comment, "/pair implement", user)
    with serve_for(fake, tmp_path) as app:
        assert app.deliver("issue_comment", payload).status_code == 202
        app.wait_idle()
        # The same comment in a second delivery (another webhook, say) is not a second refusal.
        assert app.deliver("issue_comment", payload).is_success
        app.wait_idle()
        jobs = app.run(app.service.store.jobs())
        statuses = sorted(d.status.split(":")[0] for d in app.run(app.service.store.deliveries()))
    assert statuses == ["already-queued", "queued"]
    replies = [c for c in fake.comments_on(card) if c.user.login == "pairbot[bot]"]
    assert len(replies) == 1
    assert replies[0].body.startswith(make_marker("reply", card, run=str(comment)))
    assert f"Sorry, {login} (id {user.id})" in replies[0].body
    assert "write, maintain or admin" in replies[0].body
    assert fake.dispatches == []
    assert fake.reactions == []
    assert [j.result.split(":")[0] for j in jobs] == ["refused"]
    assert fake.unexpected == []


def test_an_allowlisted_numeric_id_acts_whatever_its_login(fake: AppGitHub, tmp_path: Path) -> None:
    card = fake.seed_issue("Card", "")
    # The account was renamed: its login is new, its id is what the operator allowlisted.
    renamed = fake.user("renamed-login", uid=583_231)
    comment = fake.add_comment(card, "/pair refine", "renamed-login")
    settings = {"allowlist": frozenset({583_231})}
    with serve_for(fake, tmp_path, settings=settings) as app:
        app.deliver("issue_comment", comment_event(fake, card, comment, "/pair refine", renamed))
        app.wait_idle()
    assert [PairRequest.from_payload(p).verb for p in fake.comment_payloads()] == ["refine"]
    # The allowlist decided: no permission lookup was needed.
    assert not any("/permission" in path for _, path, _ in fake.log)


def test_an_edited_comment_never_acts(fake: AppGitHub, tmp_path: Path) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair approve", "octocat")
    payload = comment_event(
        fake, card, comment, "/pair approve", fake.users["octocat"], action="edited"
    )
    with serve_for(fake, tmp_path) as app:
        response = app.deliver("issue_comment", payload)
        assert response.status_code == 200
        assert "only a newly created comment acts" in response.json()["reason"]
        app.wait_idle()
        assert app.run(app.service.store.jobs()) == []
    assert fake.log == []  # not one request to GitHub


def test_bots_and_pairbots_own_comments_are_ignored_before_anything_is_written(
    fake: AppGitHub, tmp_path: Path
) -> None:
    card = fake.seed_issue("Card", "")
    dependabot = fake.users["dependabot[bot]"]
    pairbot = fake.users["pairbot[bot]"]
    payloads = [
        comment_event(fake, card, 1, "/pair implement", dependabot),
        # pairbot's own comment, recognised by its App id (and by its login)
        comment_event(fake, card, 2, "/pair implement", pairbot, via_app=fake.app_id),
        comment_event(fake, card, 3, "/pair implement", pairbot),
    ]
    with serve_for(fake, tmp_path) as app:
        for payload in payloads:
            response = app.deliver("issue_comment", payload)
            assert (response.status_code, response.json()["status"]) == (200, "ignored")
        assert app.run(app.service.store.deliveries()) == []
        assert app.run(app.service.store.jobs()) == []
    assert fake.log == []


def test_an_allowlisted_bot_may_act(fake: AppGitHub, tmp_path: Path) -> None:
    card = fake.seed_issue("Card", "")
    bot = fake.users["dependabot[bot]"]
    comment = fake.add_comment(card, "/pair retry", "dependabot[bot]")
    with serve_for(fake, tmp_path, settings={"allowlist": frozenset({bot.id})}) as app:
        app.deliver("issue_comment", comment_event(fake, card, comment, "/pair retry", bot))
        app.wait_idle()
    assert [PairRequest.from_payload(p).verb for p in fake.comment_payloads()] == ["retry"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param("/pair frobnicate", "unknown verb 'frobnicate'", id="unknown-verb"),
        pytest.param("/pair approve now please", "approve takes no arguments", id="bad-args"),
        pytest.param("/pair rerun-proof", "rerun-proof needs a phase name", id="missing-arg"),
    ],
)
def test_a_malformed_command_gets_the_usage_and_runs_nothing(
    fake: AppGitHub, tmp_path: Path, body: str, expected: str
) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, body, "octocat")
    with serve_for(fake, tmp_path) as app:
        app.deliver(
            "issue_comment", comment_event(fake, card, comment, body, fake.users["octocat"])
        )
        app.wait_idle()
    replies = [c.body for c in fake.comments_on(card) if c.user.login == "pairbot[bot]"]
    assert len(replies) == 1
    assert expected in replies[0]
    assert "/pair " in replies[0]  # the usage
    assert fake.dispatches == []
    assert fake.reactions == []


def test_help_is_answered_by_the_app(fake: AppGitHub, tmp_path: Path) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair help", "octocat")
    with serve_for(fake, tmp_path) as app:
        app.deliver(
            "issue_comment", comment_event(fake, card, comment, "/pair help", fake.users["octocat"])
        )
        app.wait_idle()
    replies = [c.body for c in fake.comments_on(card) if c.user.login == "pairbot[bot]"]
    assert len(replies) == 1 and "`/pair implement" in replies[0]
    assert fake.dispatches == []


def test_a_command_on_a_pull_is_acknowledged_with_eyes_only_and_dispatched(
    fake: AppGitHub, tmp_path: Path
) -> None:
    """The App cannot know which card a pull request is (the cycle maps it): no "tracking"
    comment on the pull, which nothing would ever rewrite; the PR's number is dispatched."""
    pull = fake.seed_pull("pair/card-3")
    comment = fake.add_comment(pull, "/pair retry", "octocat")
    payload = comment_event(fake, pull, comment, "/pair retry", fake.users["octocat"], on_pull=True)
    with serve_for(fake, tmp_path) as app:
        assert app.deliver("issue_comment", payload).status_code == 202
        app.wait_idle()
    assert ("comment", comment, "eyes", "pairbot[bot]") in fake.reactions
    assert [c for c in fake.comments_on(pull) if c.user.login == "pairbot[bot]"] == []
    [dispatched] = fake.dispatches
    request = PairRequest.from_payload(dispatched["client_payload"])
    assert (request.card, request.verb) == (pull, "retry")
    assert request.comment is not None and request.comment.on_pull
    assert fake.unexpected == []


def test_a_scope_decision_on_a_pull_is_dispatched_for_the_cycle_to_apply(
    fake: AppGitHub, tmp_path: Path
) -> None:
    pull = fake.seed_pull("pair/card-3")
    decision = (
        "Decided:\n\n```json\n"
        '{"schemaVersion": 1, "scopeBaselineHash": "abc", "decisions": '
        '[{"id": "sc-1", "action": "ignore"}]}\n```\n'
    )
    comment = fake.add_comment(pull, decision, "octocat")
    payload = comment_event(fake, pull, comment, decision, fake.users["octocat"], on_pull=True)
    with serve_for(fake, tmp_path) as app:
        assert app.deliver("issue_comment", payload).status_code == 202
        app.wait_idle()
    [dispatched] = fake.comment_payloads()
    assert dispatched["kind"] == "scope-decision" and dispatched["delivery"]
    expected = ScopeDecisionJob(pull=pull, comment_id=str(comment), delivery=dispatched["delivery"])
    assert dispatched == expected.to_payload()
    assert fake.reactions == []  # a decision is acknowledged by the cycle applying it


def test_synchronize_on_a_pairbot_branch_marks_the_head_moved(
    fake: AppGitHub, tmp_path: Path
) -> None:
    payload = fixture("github-webhooks/pull_request/synchronize.json")
    payload["repository"]["full_name"] = "octocat/Hello-World"
    payload["pull_request"]["head"]["repo"]["full_name"] = "octocat/Hello-World"
    payload["installation"] = {"id": fake.installation_id}
    sha = payload["pull_request"]["head"]["sha"]
    other = json.loads(json.dumps(payload))
    payload["pull_request"]["head"]["ref"] = "pair/card-12"
    fork = json.loads(json.dumps(payload))
    fork["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
    with serve_for(fake, tmp_path) as app:
        assert app.deliver("pull_request", other).status_code == 200  # head ref "changes"
        refused = app.deliver("pull_request", fork)
        assert "another repository" in refused.json()["reason"]
        assert app.deliver("pull_request", payload).status_code == 202
        app.wait_idle()
    [dispatched] = fake.comment_payloads()
    expected = HeadMovedJob(pull=payload["number"], head_sha=sha, delivery=dispatched["delivery"])
    assert dispatched == expected.to_payload()


def test_the_worker_executes_jobs_one_at_a_time_per_card_and_bounded_overall(
    fake: AppGitHub, tmp_path: Path
) -> None:
    executor = RecordingExecutor(delay_s=0.02)
    cards = [fake.seed_issue(f"Card {n}", "") for n in range(6)]
    events = []
    for card in cards:
        for verb in ("implement", "status", "retry"):
            comment = fake.add_comment(card, f"/pair {verb}", "octocat")
            events.append(
                comment_event(fake, card, comment, f"/pair {verb}", fake.users["octocat"])
            )
    with serve_for(
        fake,
        tmp_path,
        executor=executor,
        settings={"execution": "worker", "worker_concurrency": 2},
    ) as app:
        for payload in events:
            assert app.deliver("issue_comment", payload).status_code == 202
        app.wait_idle()
        assert app.service.worker.max_parallel <= 2
    assert fake.dispatches == []
    assert executor.overlaps == []
    assert executor.max_parallel <= 2
    by_card: dict[int, list[str]] = {}
    for job, repo, installation in executor.calls:
        assert isinstance(job, PairRequest)
        assert (repo, installation) == ("octocat/Hello-World", fake.installation_id)
        by_card.setdefault(job.card, []).append(job.verb)
    # One at a time per card, in the order the comments arrived.
    assert by_card == {card: ["implement", "status", "retry"] for card in cards}


def test_permission_is_cached_briefly(fake: AppGitHub, tmp_path: Path) -> None:
    clock = StepClock()
    card = fake.seed_issue("Card", "")
    first = fake.add_comment(card, "/pair status", "octocat")
    second = fake.add_comment(card, "/pair retry", "octocat")
    third = fake.add_comment(card, "/pair abandon", "octocat")
    octocat = fake.users["octocat"]
    with serve_for(fake, tmp_path, clock=clock) as app:
        for comment, body in ((first, "/pair status"), (second, "/pair retry")):
            app.deliver("issue_comment", comment_event(fake, card, comment, body, octocat))
            app.wait_idle()
        assert app.service.handler.permissions.lookups == 1
        clock.now += 61  # past the cache's minute
        app.deliver("issue_comment", comment_event(fake, card, third, "/pair abandon", octocat))
        app.wait_idle()
        assert app.service.handler.permissions.lookups == 2
    assert len(fake.dispatches) == 3


def test_a_rate_limited_dispatch_is_retried_later_and_sent_once(
    fake: AppGitHub, tmp_path: Path
) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair implement", "octocat")
    fake.fail("POST", r"/dispatches$", "429", retry_after=1)
    with serve_for(fake, tmp_path) as app:
        app.deliver(
            "issue_comment",
            comment_event(fake, card, comment, "/pair implement", fake.users["octocat"]),
        )
        app.wait_idle(timeout=60)
        jobs = app.run(app.service.store.jobs())
    assert [(j.state, j.attempts) for j in jobs] == [("done", 2)]
    assert len(fake.dispatches) == 1
    # The retry resumed after the acknowledgement: one reaction, one tracking comment.
    assert len(fake.posts(f"/comments/{comment}/reactions")) == 1
    assert len([c for c in fake.comments_on(card) if c.user.login == "pairbot[bot]"]) == 1


def test_a_thousand_deliveries_at_16_way_concurrency_run_each_command_once(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """1000 signed deliveries: 200 distinct commands, 700 comments that are not for pairbot,
    and 100 redeliveries (10% duplicate delivery ids), sent 16 at a time in random order."""
    caplog.set_level(logging.INFO)
    rng = random.Random(6)
    octocat = fake.users["octocat"]
    cards = [fake.seed_issue(f"Card {n}", "") for n in range(20)]
    verbs = ["implement", "refine", "status", "retry", "approve"]
    deliveries: list[tuple[str, bytes]] = []
    commands: list[int] = []
    for n in range(200):
        card = cards[n % len(cards)]
        body = f"/pair {verbs[n % len(verbs)]}"
        comment = fake.add_comment(card, body, "octocat")
        commands.append(comment)
        payload = comment_event(fake, card, comment, body, octocat)
        deliveries.append((str(uuid.uuid4()), json.dumps(payload).encode()))
    for n in range(700):
        payload = comment_event(fake, rng.choice(cards), 50_000_000 + n, "LGTM, thanks!", octocat)
        deliveries.append((str(uuid.uuid4()), json.dumps(payload).encode()))
    deliveries += rng.sample(deliveries, 100)
    rng.shuffle(deliveries)
    assert len(deliveries) == 1000 and len({d for d, _ in deliveries}) == 900

    with serve_for(fake, tmp_path) as app:

        async def send_all() -> list[int]:
            gate = asyncio.Semaphore(16)
            # An idle connection is dropped by the client well before uvicorn's keep-alive
            # timeout closes it: reusing one the server is closing is a reset, not a bug.
            limits = httpx.Limits(
                max_connections=16, max_keepalive_connections=16, keepalive_expiry=1.0
            )
            async with httpx.AsyncClient(base_url=app.url, limits=limits, timeout=60) as client:

                async def send(delivery: str, body: bytes) -> int:
                    async with gate:
                        response = await client.post(
                            "/webhooks/github",
                            content=body,
                            headers=github_headers("issue_comment", body, delivery),
                        )
                        return response.status_code

                return await asyncio.gather(*(send(d, b) for d, b in deliveries))

        statuses = asyncio.run(send_all())
        app.wait_idle(timeout=120)
        jobs = app.run(app.service.store.jobs(1000))
        permission_lookups = app.service.handler.permissions.lookups
    assert all(200 <= status < 300 for status in statuses)
    assert statuses.count(202) == 200
    assert len(jobs) == 200 and {j.state for j in jobs} == {"done"}
    dispatched = [PairRequest.from_payload(p) for p in fake.comment_payloads()]
    per_comment = sorted(int(r.comment.id) for r in dispatched if r.comment is not None)
    assert per_comment == sorted(commands)  # every command exactly once
    reactions = fake.posts("/reactions")
    assert sorted(reactions) == sorted(
        f"/repos/octocat/Hello-World/issues/comments/{c}/reactions" for c in commands
    )  # exactly one acknowledgement each
    trackers = [c for c in fake.comments.values() if c.user.login == "pairbot[bot]"]
    assert sorted(c.issue for c in trackers) == sorted(cards)  # one tracking comment per card
    assert permission_lookups == 1
    assert fake.unexpected == []
    no_errors(caplog)
