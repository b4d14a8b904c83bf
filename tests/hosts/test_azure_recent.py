"""The Azure DevOps catch-up listing (`hosts.azure_devops.recent`): the comments made since a
moment on work items and in the threads of active pull requests, bounded, against the
loopback fake (tests/support/fake_azure.py); and the Azure Pipelines entry's reading of them
(`action.azure.catchup`), which finds a missed `/pair` command on a pull request as the
pull-request comment hook would have read it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

from action.azure.catchup import AzureCatchup
from app.domain.intake.intent import Policy
from hosts.azure_devops.recent import AzureRecentHost
from hosts.markers import make_marker
from hosts.models import Target
from tests.hosts.test_azure_devops import TOKEN, cache_dir, fake
from tests.support.fake_azure import PROJECT, REPO, FakeAzureDevOps

__all__ = ["cache_dir", "fake"]  # the fixtures this module uses


def recent_host(fake: FakeAzureDevOps, cache_dir: Path) -> AzureRecentHost:
    return AzureRecentHost(fake.base_url, PROJECT, REPO, TOKEN, timeout_s=10, cache_dir=cache_dir)


def since(fake: FakeAzureDevOps) -> datetime:
    """A moment before everything the fake writes (its clock starts at `epoch`)."""
    return fake.epoch - timedelta(minutes=1)


def test_comments_in_pull_request_threads_are_listed_with_work_item_comments(
    fake: FakeAzureDevOps, cache_dir: Path
) -> None:
    card = Target("card", fake.seed_card("A card", "AC-1: it works"))
    on_card = fake.comment_as(fake.human.author, card, "<div>/pair status</div>")
    pull = fake.seed_pull("pair/listed")
    opened = fake.comment_as(fake.human.author, Target("pull", pull), "/pair status")
    thread = int(opened.split("/")[0])
    reply = fake.reply_as(fake.bot.author, pull, thread, "a bot's reply")
    closed = fake.seed_pull("pair/closed")
    fake.comment_as(fake.human.author, Target("pull", closed), "/pair status")
    fake.pull(closed).status = "abandoned"  # a maintainer abandons it: not listed

    listed = asyncio.run(recent_host(fake, cache_dir).comments_since(since(fake)))
    assert listed.complete
    assert [(t.kind, t.number, c.id) for t, c in listed.comments] == [
        ("card", card.number, on_card),
        ("pull", pull, opened),
        ("pull", pull, reply),
    ]
    assert fake.count("GET", r"/pullrequests$") == 1  # one listing of the active pulls
    assert fake.count("GET", rf"/pullRequests/{pull}/threads$") == 1


def test_a_thread_not_updated_since_and_older_comments_are_left_out(
    fake: FakeAzureDevOps, cache_dir: Path
) -> None:
    pull = fake.seed_pull("pair/old")
    old = fake.comment_as(fake.human.author, Target("pull", pull), "/pair status")
    middle = datetime.fromisoformat(fake.threads(pull)[0]["lastUpdatedDate"].replace("Z", "+00:00"))
    newer = fake.reply_as(fake.human.author, pull, int(old.split("/")[0]), "/pair retry")
    host = recent_host(fake, cache_dir)
    later = asyncio.run(host.comments_since(middle + timedelta(milliseconds=1)))
    assert [c.id for _, c in later.comments] == [newer]  # the thread moved: its new comment
    after_all = datetime.fromisoformat(
        fake.threads(pull)[0]["lastUpdatedDate"].replace("Z", "+00:00")
    ) + timedelta(seconds=1)
    assert asyncio.run(host.comments_since(after_all)).comments == ()


def test_more_active_pull_requests_than_the_bound_make_the_listing_incomplete(
    fake: FakeAzureDevOps, cache_dir: Path
) -> None:
    for n in range(3):
        fake.seed_pull(f"pair/many-{n}")
    host = recent_host(fake, cache_dir)
    assert asyncio.run(host.comments_since(since(fake))).complete
    host.max_pulls = 2  # the bound, made small for the test (the default is 20)
    before = fake.count("GET", r"/threads$")
    assert not asyncio.run(host.comments_since(since(fake))).complete
    assert fake.count("GET", r"/threads$") - before == 2  # the two newest only


def test_the_pipelines_catch_up_finds_a_missed_command_on_a_pull_request(
    fake: FakeAzureDevOps, cache_dir: Path
) -> None:
    pull = fake.seed_pull("pair/missed")
    target = Target("pull", pull)
    missed = fake.comment_as(fake.human.author, target, "/pair status")
    edited = fake.comment_as(fake.human.author, target, "/pair retry")
    fake.edit_comment_as(target, edited, "/pair retry please")  # an edit never acts
    answered = fake.comment_as(fake.human.author, target, "/pair approve")
    reply = make_marker("reply", pull, run=answered.replace("/", "-"))
    fake.comment_as(fake.pairbot.author, target, f"{reply}\nDone.")
    source = AzureCatchup(recent_host(fake, cache_dir), Policy(trigger="pair"))

    listing = asyncio.run(source.recent(since(fake)))
    keys = [f.key for f in listing.found]
    thread, comment = missed.split("/")
    assert keys[0] == f"pr{pull}:{thread}/{comment}"
    assert listing.found[0].journal == f"azure-pr{pull}:{thread}/{comment}"
    first = listing.found[0].intent
    assert (first.is_pull, first.card, first.command.verb) == (True, pull, "status")
    assert f"pr{pull}:{edited}" not in keys
    assert f"{pull}:{answered}" in listing.replied  # pairbot's reply says it was answered
    assert listing.complete and len(listing.scanned) == 4
