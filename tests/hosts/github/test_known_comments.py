"""A marker comment once found is read by itself: on a long issue an upsert costs one request.

Against FakeGitHub's MockTransport (GitHub's shapes, ETags and 304s), with the hosts of one
installation sharing a session as the App's jobs do (`GitHubSessions`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from hosts.github import GitHubHost
from hosts.github.session import GitHubSessions, KnownComments
from hosts.markers import make_marker
from hosts.models import Target, Upserted
from tests.hosts.github.joined import joined_host
from tests.support.fake_github import FakeGitHub

LONG = 250  # three pages of comments before pairbot's


def run_jobs(fake: FakeGitHub, body: Callable[[Callable[[], GitHubHost]], Awaitable[Any]]) -> Any:
    """`body(host)`, where each `host()` is a new host joining one session (a job each)."""
    sessions = GitHubSessions()

    def host() -> GitHubHost:
        return joined_host(fake, sessions)

    async def scenario() -> Any:
        try:
            return await body(host)
        finally:
            await sessions.aclose()

    return asyncio.run(asyncio.wait_for(scenario(), 60))


def long_issue(fake: FakeGitHub) -> int:
    number = fake.seed_issue("A long discussion", "body")
    for n in range(LONG):
        fake.add_comment(number, f"comment {n}", "octocat")
    return number


def listings(fake: FakeGitHub, number: int) -> int:
    path = f"/repos/{fake.owner}/{fake.repo}/issues/{number}/comments"
    return sum(p == path for p, _, _ in fake.gets)


def test_a_known_tracking_comment_costs_one_read_however_long_the_issue() -> None:
    fake = FakeGitHub()
    number = long_issue(fake)
    target, marker = Target("card", number), make_marker("tracking", number)

    async def jobs(host: Callable[[], GitHubHost]) -> list[tuple[Upserted, int, int]]:
        seen = []
        for text in ("queued", "queued", "queued", "running", "running"):
            before = (fake.requests, listings(fake, number))
            outcome = (await host().upsert_comment(target, marker, text)).outcome
            seen.append((outcome, fake.requests - before[0], listings(fake, number) - before[1]))
        return seen

    seen = run_jobs(fake, jobs)
    # Created (listed, posted, read back in the listing); listed once more, where it is found
    # and remembered; then one conditional GET (a 304), and an edit read back by itself.
    assert [(outcome, listed) for outcome, _, listed in seen] == [
        (Upserted.CREATED, 3 + 3),  # 100, 100 and 50 comments: three pages, before and after
        (Upserted.UNCHANGED, 3),
        (Upserted.UNCHANGED, 0),
        (Upserted.UPDATED, 0),
        (Upserted.UNCHANGED, 0),
    ]
    assert [requests for _, requests, _ in seen[2:]] == [1, 3, 1]  # GET; GET, PATCH, GET; GET
    mine = [c for c in fake.comments_on(number) if c.body.startswith(marker)]
    assert len(mine) == 1 and "running" in mine[0].body
    assert fake.unexpected == []


def test_a_known_comment_deleted_or_rewritten_by_a_person_sends_the_next_upsert_to_the_list() -> (
    None
):
    fake = FakeGitHub()
    number = long_issue(fake)
    target, marker = Target("card", number), make_marker("tracking", number)

    async def jobs(host: Callable[[], GitHubHost]) -> tuple[Upserted, Upserted, int]:
        await host().upsert_comment(target, marker, "queued")
        first = await host().upsert_comment(target, marker, "queued")  # remembered now
        del fake.comments[int(first.comment.id)]  # a maintainer deleted it
        again = await host().upsert_comment(target, marker, "queued")
        await host().upsert_comment(target, marker, "queued")  # remembered again
        # A maintainer edits the marker away: a person's comment now, never edited by pairbot.
        fake.comments[int(again.comment.id)].body = "I rewrote this."
        other = await host().upsert_comment(target, marker, "queued")
        found = await host().find_comment(target, marker)
        assert found is not None and found.id == other.comment.id
        return again.outcome, other.outcome, len(fake.comments_on(number))

    assert run_jobs(fake, jobs) == (Upserted.CREATED, Upserted.CREATED, LONG + 2)
    assert fake.comments[int(max(c.id for c in fake.comments_on(number)))].body.startswith(marker)
    assert fake.unexpected == []


def test_the_oldest_of_two_racing_comments_is_the_one_remembered() -> None:
    fake = FakeGitHub()
    number = fake.seed_issue("Raced", "body")
    target, marker = Target("card", number), make_marker("tracking", number)
    bot = fake.bot_user.login

    async def jobs(host: Callable[[], GitHubHost]) -> str:
        older = fake.add_comment(number, f"{marker}\nfrom a replica", bot)
        fake.add_comment(number, f"{marker}\nfrom another", bot)
        done = await host().upsert_comment(target, marker, "queued")
        assert done.outcome is Upserted.UPDATED and done.comment.id == str(older)
        again = await host().upsert_comment(target, marker, "queued")
        return again.comment.id

    assert run_jobs(fake, jobs) == str(fake.comments_on(number)[0].id)


def test_known_comments_are_bounded_and_forget_what_they_drop() -> None:
    known = KnownComments(entries=2)
    known.keep(("o", "r", 1, "m"), "11")
    known.keep(("o", "r", 2, "m"), "12")
    assert known.get(("o", "r", 1, "m")) == "11"  # now the most recently used
    known.keep(("o", "r", 3, "m"), "13")
    assert known.get(("o", "r", 2, "m")) is None and not known.knows("12")
    assert known.knows("11") and known.knows("13")
    known.keep(("o", "r", 1, "m"), "21")  # a new keeper for the same key
    assert not known.knows("11") and known.get(("o", "r", 1, "m")) == "21"
    known.forget(("o", "r", 1, "m"))
    assert not known.knows("21")
