"""A comment the edge queues unread, and what the worker then reads in it.

The edge screens a GitHub comment (`screen_comment`: own comments, bots, scope decisions, no
trigger anywhere) and queues one that may hold a command as a `command` job holding the comment
(`app.web.jobs.UnreadComment`); the worker reads its command lines before anything else
(app.web.handling). On real uvicorn over loopback, the real SQLite store and the fake GitHub.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from app.domain.intake.intent import NewComment
from app.store.base import JobRecord
from app.web.app import create_app
from app.web.jobs import CommandJob, UnreadComment, read_comment
from hosts.models import Author
from tests.web.conftest import AppGitHub, app_settings, comment_event, github_forges, served


def deliver_comment(
    fake: AppGitHub, tmp_path: Path, body: str, *, permission: str = "admin"
) -> tuple[list[JobRecord], int]:
    """`body` as a new comment by a collaborator with `permission`, delivered and run: the
    jobs as stored, and the issue it was written on."""
    card = fake.seed_issue("Card", "")
    fake.collaborators["octocat"] = permission
    user = fake.user("octocat")
    comment = fake.add_comment(card, body, "octocat")
    settings = app_settings(tmp_path)
    app = create_app(settings, github=github_forges(fake), poll_s=0.05)
    with served(app) as running:
        answer = running.deliver("issue_comment", comment_event(fake, card, comment, body, user))
        assert (answer.status_code, answer.json()["status"]) == (202, "queued")
        running.wait_idle()
        jobs = running.run(running.service.store.jobs())
    return jobs, card


def test_a_command_is_read_by_the_worker_and_kept_for_the_record(
    fake: AppGitHub, tmp_path: Path
) -> None:
    [job], card = deliver_comment(fake, tmp_path, "/pair status")
    assert "unread" in job.request  # the edge stored the comment, not its reading
    assert (job.state, job.result, job.verb) == ("done", "dispatched to GitHub Actions", "status")
    [dispatch] = fake.comment_payloads()
    assert dispatch["command"]["verb"] == "status" and dispatch["card"] == card
    assert len(fake.posts("/reactions")) == 1


def test_a_comment_whose_trigger_is_only_in_code_runs_nothing_and_says_nothing(
    fake: AppGitHub, tmp_path: Path
) -> None:
    body = "Try this:\n\n```\n/pair implement\n```"
    [job], card = deliver_comment(fake, tmp_path, body)
    assert (job.state, job.verb) == ("done", None)
    assert job.result == f"ignored: the comment on issue #{card} holds no command for pairbot"
    assert fake.dispatches == [] and fake.posts("/reactions") == []
    assert fake.posts("/comments") == []  # no reply, no tracking comment


def test_a_malformed_command_is_answered_with_its_usage_and_recorded_as_no_command(
    fake: AppGitHub, tmp_path: Path
) -> None:
    [job], card = deliver_comment(fake, tmp_path, "/pair frobnicate")
    assert (job.state, job.result, job.verb) == ("done", "answered with usage", None)
    assert fake.dispatches == []
    [reply] = [c for c in fake.comments_on(card) if c.user.login != "octocat"]
    assert "/pair status" in reply.body  # the usage lists the verbs


def test_a_refused_command_is_answered_and_still_kept_for_the_record(
    fake: AppGitHub, tmp_path: Path
) -> None:
    [job], _ = deliver_comment(fake, tmp_path, "/pair approve", permission="read")
    assert (job.state, job.verb) == ("done", "approve")
    assert job.result.startswith("refused: ")
    assert fake.dispatches == [] and fake.posts("/reactions") == []


def test_an_unread_comment_round_trips_through_its_stored_json() -> None:
    comment = NewComment(
        target="pull",
        number=7,
        comment_id="12345",
        url="https://github.com/o/r/pull/7#issuecomment-12345",
        body="@pairbot[bot] approve\n\u202eevil\u202c — ünïcödé",
        author=Author(login="helper[bot]", id="42", is_bot=True),
    )
    unread = UnreadComment(comment, "pair", "pairbot")
    assert UnreadComment.from_json(unread.to_json()) == unread
    assert UnreadComment.from_json({"card": 1}) is None  # a request the edge read itself


def test_the_worker_reads_with_the_slug_the_edge_screened_with() -> None:
    comment = NewComment(
        target="card",
        number=3,
        comment_id="9",
        url="",
        body="@pairbot[bot] status",
        author=Author(login="octocat", id="1"),
    )
    read = read_comment(UnreadComment(comment, "pair", "pairbot"), delivery=str(uuid.uuid4()))
    assert isinstance(read, tuple)
    command, record = read
    assert isinstance(command, CommandJob) and command.request is not None
    assert command.request.verb == "status"
    assert record is not None and (record.verb, record.comment_id) == ("status", "9")
    # Without the slug (an App that had not learned it yet), the same text addresses no one.
    unaddressed = read_comment(UnreadComment(comment, "pair", None), delivery="d")
    assert not isinstance(unaddressed, tuple)
