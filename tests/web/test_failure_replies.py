"""A command that fails for good is answered on its comment, once: `execution: worker`.

The real app (or the real `JobHandler` on the real SQLite store) and GitHub faked at HTTP; the
executor is the seam that fails. A `UserError` is answered with its own text, anything else
with a generic sentence that never carries the error's text; a job run again edits its reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.domain.text import mdtext
from app.errors import CommandNotRun, UserError
from app.hosting import HostSettings
from app.store.sqlite import SqliteStore
from app.web.app import create_app
from app.web.events import GITHUB, Policy, route_github
from app.web.handling import JobHandler, PermissionCache
from app.web.jobs import Job
from app.web.worker import cycle_executor
from hosts.markers import make_marker
from tests.support.fake_github import StoredComment
from tests.support.git import git
from tests.web.conftest import AppGitHub, app_settings, comment_event, github_forges, served

NO_CYCLE = "card #{card} has no pairbot cycle yet; comment `/pair implement` on it first"


def replies(fake: AppGitHub, number: int, comment: int) -> list[StoredComment]:
    marker = make_marker("reply", number, run=str(comment))
    return [c for c in fake.comments_on(number) if c.body.startswith(marker)]


def serve_worker(fake: AppGitHub, tmp_path: Path, executor: Any) -> Any:
    settings = app_settings(tmp_path, execution="worker")
    return served(create_app(settings, github=github_forges(fake), executor=executor, poll_s=0.05))


def test_a_user_error_is_answered_once_with_its_message(fake: AppGitHub, tmp_path: Path) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair approve", "octocat")
    message = NO_CYCLE.format(card=card)

    async def executor(job: Job, repo: str, installation: int | None) -> None:
        raise UserError(message)

    payload = comment_event(fake, card, comment, "/pair approve", fake.users["octocat"])
    with serve_worker(fake, tmp_path, executor) as app:
        assert app.deliver("issue_comment", payload).status_code == 202
        app.wait_idle()
        jobs = app.run(app.service.store.jobs())
    assert [(j.state, j.result) for j in jobs] == [("failed", message)]
    [reply] = replies(fake, card, comment)
    assert "pairbot could not run `/pair approve`: " in reply.body
    assert mdtext.inline(message) in reply.body
    assert reply.user.login == "pairbot[bot]"
    # Besides the reply, only the tracking comment: nothing else was said. It no longer
    # announces a run that will not come.
    ours = [c for c in fake.comments_on(card) if c.user.login == "pairbot[bot]"]
    assert len(ours) == 2
    [tracking] = [c for c in ours if c is not reply]
    assert "runs next" not in tracking.body
    assert "`/pair approve` (requested by **octocat**) could not run" in tracking.body
    assert fake.unexpected == []


def test_a_refusal_after_which_the_cycle_restored_the_card_leaves_the_tracking_comment(
    fake: AppGitHub, tmp_path: Path
) -> None:
    """`CommandNotRun`: the cycle wrote the card's own status back into the tracking comment
    before refusing; the reply says why, and the tracking comment is not touched again."""
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair approve", "octocat")
    restored = f"<!-- pair:tracking #{card} -->\nthe card's own status"

    async def executor(job: Job, repo: str, installation: int | None) -> None:
        tracking = [c for c in fake.comments_on(card) if "pair:tracking" in c.body]
        tracking[0].body = restored  # what the cycle's republish leaves
        raise CommandNotRun("card #1 is not waiting for an approval; nothing to approve")

    payload = comment_event(fake, card, comment, "/pair approve", fake.users["octocat"])
    with serve_worker(fake, tmp_path, executor) as app:
        assert app.deliver("issue_comment", payload).status_code == 202
        app.wait_idle()
    [reply] = replies(fake, card, comment)
    assert "not waiting for an approval" in reply.body
    [tracking] = [c for c in fake.comments_on(card) if "pair:tracking" in c.body]
    assert tracking.body == restored


def _handler(fake: AppGitHub, store: SqliteStore, executor: Any) -> JobHandler:
    policy = Policy(trigger="pair", app_slug=fake.app_slug, app_id=fake.app_id)
    return JobHandler(
        store=store,
        github=github_forges(fake),
        azure=None,
        executor=executor,
        execution="worker",
        policy=lambda: policy,
        permissions=PermissionCache(),
    )


def test_the_same_job_run_again_edits_its_reply(fake: AppGitHub, tmp_path: Path) -> None:
    """A job run a second time (a process that died after answering, then recovered) edits
    the reply it already posted: one comment, the newer reason."""
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair retry", "octocat")
    reasons = iter(["first reason", "second reason"])

    async def executor(job: Job, repo: str, installation: int | None) -> None:
        raise UserError(next(reasons))

    async def go() -> list[Any]:
        store = SqliteStore(tmp_path / "store.sqlite3")
        await store.open()
        policy = Policy(trigger="pair", app_slug=fake.app_slug, app_id=fake.app_id)
        payload = comment_event(fake, card, comment, "/pair retry", fake.users["octocat"])
        delivery = str(uuid.uuid4())
        routed = route_github("issue_comment", "created", payload, policy, delivery)
        await store.enqueue_delivery(
            delivery,
            "issue_comment",
            "created",
            routed.jobs,
            source=GITHUB,
            status=routed.reason,
            installation=routed.installation,
        )
        [job] = await store.claim(1, time.time())
        handler = _handler(fake, store, executor)
        try:
            await handler(job)
            [first] = replies(fake, card, comment)
            assert "`/pair retry`: first reason" in first.body
            await handler(job)  # the same record again: what a recovered job runs
            return await store.jobs()
        finally:
            await handler.github.aclose()
            await store.close()

    jobs = asyncio.run(go())
    [reply] = replies(fake, card, comment)
    assert "pairbot could not run `/pair retry`: second reason" in reply.body
    assert "first reason" not in reply.body
    edits = [p for m, p, _ in fake.log if m == "PATCH" and p.endswith(f"/comments/{reply.id}")]
    assert len(edits) == 1
    assert [j.state for j in jobs] == ["failed"]


def test_an_unexpected_error_gets_a_generic_reply_and_the_traceback_goes_to_the_log(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair status", "octocat")
    secret = "ghs_notForAComment0123456789"  # noqa: S105 - what must never be echoed

    async def executor(job: Job, repo: str, installation: int | None) -> None:
        raise RuntimeError(f"token {secret} rejected at /srv/pairbot/internal.py")

    payload = comment_event(fake, card, comment, "/pair status", fake.users["octocat"])
    with serve_worker(fake, tmp_path, executor) as app:
        app.deliver("issue_comment", payload)
        app.wait_idle()
        [job] = app.run(app.service.store.jobs())
    assert job.state == "failed"
    [reply] = replies(fake, card, comment)
    assert "pairbot could not run `/pair status`: it failed on pairbot" in reply.body
    assert f"job {job.id}" in reply.body
    for leak in (secret, "RuntimeError", "internal.py", "Traceback"):
        assert leak not in reply.body
    [logged] = [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
    assert logged.levelno == logging.ERROR and logged.exc_info is not None
    assert isinstance(logged.exc_info[1], RuntimeError)


def test_a_reply_that_cannot_be_posted_does_not_mask_the_failure(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair approve", "octocat")

    async def executor(job: Job, repo: str, installation: int | None) -> None:
        # The acknowledgement is posted; the reply that follows is refused by GitHub.
        fake.fail(
            "POST",
            rf"/issues/{card}/comments$",
            "canned",
            status=403,
            body={"message": "Resource not accessible by integration"},
        )
        raise UserError("card is not waiting for an approval")

    payload = comment_event(fake, card, comment, "/pair approve", fake.users["octocat"])
    with serve_worker(fake, tmp_path, executor) as app:
        app.deliver("issue_comment", payload)
        app.wait_idle()
        [job] = app.run(app.service.store.jobs())
    assert (job.state, job.result) == ("failed", "card is not waiting for an approval")
    assert replies(fake, card, comment) == []
    [logged] = [r for r in caplog.records if "could not be posted" in r.getMessage()]
    # A host's refusal is one line naming the call and the remedy: no traceback in the log.
    assert logged.exc_info is None
    assert "refused by the host" in logged.getMessage() and "permission" in logged.getMessage()


def test_a_scope_decision_that_fails_is_answered_on_the_pull(
    fake: AppGitHub, tmp_path: Path
) -> None:
    pull = fake.seed_pull("pair/card-3")
    decision = '```json\n{"schemaVersion": 1, "scopeBaselineHash": "x", "decisions": []}\n```\n'
    comment = fake.add_comment(pull, decision, "octocat")

    async def executor(job: Job, repo: str, installation: int | None) -> None:
        raise UserError("the decision names no proposal of the last review")

    payload = comment_event(fake, pull, comment, decision, fake.users["octocat"], on_pull=True)
    with serve_worker(fake, tmp_path, executor) as app:
        app.deliver("issue_comment", payload)
        app.wait_idle()
    [reply] = replies(fake, pull, comment)
    assert (
        "pairbot could not apply this scope decision: the decision names no proposal" in reply.body
    )


def _tree(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.relative_to(root).parts
    )


def test_a_job_for_a_repository_without_a_checkout_is_refused_on_its_comment(
    fake: AppGitHub, tmp_path: Path
) -> None:
    """The production executor on a worker whose only checkout is another repository's: the
    job fails before anything runs, and the comment says how to add a checkout."""
    root = tmp_path / "other"
    root.mkdir()
    (root / "README.md").write_text("# octo/other\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", "https://github.com/octo/other.git")
    before = _tree(root)

    def no_deps() -> Any:
        raise AssertionError("the engine's deps are never built for a refused job")

    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair implement", "octocat")
    payload = comment_event(fake, card, comment, "/pair implement", fake.users["octocat"])
    executor = cycle_executor(root, {}, no_deps, hosts=HostSettings())
    with serve_worker(fake, tmp_path / "app", executor) as app:
        app.deliver("issue_comment", payload)
        app.wait_idle()
        [job] = app.run(app.service.store.jobs())
    assert job.state == "failed"
    assert "no checkout of octocat/Hello-World" in job.result
    [reply] = replies(fake, card, comment)
    assert "pairbot could not run `/pair implement`: " in reply.body
    assert "no checkout of octocat/Hello-World, so nothing ran" in reply.body
    assert "PAIR\\_WORKER\\_CHECKOUTS" in reply.body  # how to add one (escaped: literal text)
    assert str(tmp_path) not in reply.body  # no server path in a comment
    assert _tree(root) == before
