"""The behavioural contract every host adapter passes: one suite, three adapters.

An adapter's test module collects the whole suite by importing it and providing `harness`:

    from tests.hosts.contract import *  # noqa: F403 - collects the contract's tests here

    @pytest.fixture
    def harness(tmp_path: Path) -> Iterator[ContractHarness]:
        ...  # build the adapter over its backend (a fake forge, a loopback server, a directory)
        yield the_harness
        ...  # tear the backend down

`ContractHarness` is `tests.hosts.harness.HostHarness` plus `restart()`: a second adapter
instance over the same backend sharing nothing in memory with the first, which is how "a restart
never posts twice" is tested. `writes()` counts every mutating request of every instance the
harness made.

Each test is a plain function of `harness` that runs one async scenario with `asyncio.run` (there
is no pytest-asyncio): one event loop per test, created and closed inside the test.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, get_args

import pytest

from hosts.base import Host, Reaction
from hosts.cardhash import card_hash
from hosts.errors import Conflict, HostUnavailable, NotFound, Unsupported
from hosts.labels import PREFIX, PrState
from hosts.markers import MAX_BODY, is_own, make_marker, render
from hosts.models import REVIEW_CONTEXT, WRITE_PERMISSIONS, Comment, Permission, Target, Upserted
from tests.hosts.harness import HostHarness

__all__ = [
    "test_a_create_that_failed_before_landing_raises_and_posts_nothing",
    "test_a_create_that_landed_before_failing_is_adopted_not_posted_again",
    "test_an_edit_that_failed_raises_and_leaves_the_comment",
    "test_an_edit_that_landed_before_failing_counts",
    "test_card_crud_and_close",
    "test_card_hash_ignores_labels_comments_and_whitespace",
    "test_comments_oldest_first_with_authors",
    "test_concurrent_state_labels_leave_exactly_one",
    "test_concurrent_upserts_of_one_marker_leave_one_comment",
    "test_duplicates_collapse_to_the_oldest",
    "test_each_run_keeps_its_own_comment",
    "test_forged_marker_is_never_edited",
    "test_head_checks_are_bound_to_the_head_and_leave_pair_review_out",
    "test_human_tail_survives_an_update",
    "test_identity_is_pairbots",
    "test_long_body_is_truncated_with_a_notice",
    "test_markers_past_the_first_page_are_found",
    "test_merge_refused_on_a_moved_head",
    "test_merge_refused_when_not_open",
    "test_not_found_on_unknown_numbers",
    "test_open_pull_is_idempotent",
    "test_pairbots_own_packet_is_not_a_decision",
    "test_permission_levels",
    "test_react_or_say_unsupported",
    "test_restart_never_posts_twice",
    "test_review_status_is_bound_to_the_head",
    "test_scope_decision_round_trip",
    "test_squash_merge_on_the_current_head",
    "test_state_label_is_exclusive_on_a_card",
    "test_state_label_is_exclusive_on_a_pull",
    "test_upsert_create_unchanged_update",
    "test_upsert_on_a_pull",
]

UNKNOWN = 987_654


class ContractHarness(HostHarness, Protocol):
    """`HostHarness` plus a second adapter instance on the same backend."""

    def restart(self) -> Host:
        """A fresh adapter over the same backend: no cache, no memory of the first instance."""
        ...


Scenario = Callable[[ContractHarness], Coroutine[Any, Any, None]]


def contract(scenario: Scenario) -> Callable[[ContractHarness], None]:
    """Turn an async scenario into a plain test of the `harness` fixture."""

    @functools.wraps(scenario)
    def test(harness: ContractHarness) -> None:
        asyncio.run(scenario(harness))

    return test


def own_with(comments: list[Comment], marker: str, harness: ContractHarness) -> list[Comment]:
    """pairbot's comments carrying `marker`."""
    return [c for c in comments if c.body.startswith(marker) and is_own(c.author, harness.identity)]


def by_id(comments: list[Comment], comment_id: str) -> Comment:
    return next(c for c in comments if c.id == comment_id)


# -- identity and comments ------------------------------------------------------------------------


@contract
async def test_identity_is_pairbots(harness: ContractHarness) -> None:
    me = await harness.host.identity()
    assert is_own(me, harness.identity)
    assert not is_own(harness.human, me)


@contract
async def test_comments_oldest_first_with_authors(harness: ContractHarness) -> None:
    target = Target("card", await harness.seed_card("Comments", "body"))
    first = await harness.comment_as(harness.human, target, "one")
    second = await harness.comment_as(harness.bot, target, "two")
    comments = await harness.host.list_comments(target)
    assert [c.id for c in comments] == [first, second]
    assert [c.body for c in comments] == ["one", "two"]
    assert comments[0].author.login == harness.human.login
    assert not comments[0].author.is_bot
    assert comments[1].author.is_bot  # app/domain refuses bots: the flag must come through


@contract
async def test_upsert_create_unchanged_update(harness: ContractHarness) -> None:
    host = harness.host
    card = await harness.seed_card("Upsert", "body")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r1")

    created = await host.upsert_comment(target, marker, "first version")
    assert created.outcome is Upserted.CREATED
    assert created.comment.body.startswith(marker)
    assert "first version" in created.comment.body
    assert created.duplicates == ()
    assert is_own(created.comment.author, harness.identity)

    writes = harness.writes()
    unchanged = await host.upsert_comment(target, marker, "first version")
    assert unchanged.outcome is Upserted.UNCHANGED
    assert unchanged.comment.id == created.comment.id
    assert harness.writes() == writes, "an unchanged upsert must not write"

    updated = await host.upsert_comment(target, marker, "second version")
    assert updated.outcome is Upserted.UPDATED
    assert updated.comment.id == created.comment.id
    assert "second version" in updated.comment.body
    assert "first version" not in updated.comment.body
    assert harness.writes() > writes

    comments = await host.list_comments(target)
    mine = own_with(comments, marker, harness)
    assert [c.id for c in mine] == [created.comment.id]
    assert mine[0].body == updated.comment.body


@contract
async def test_upsert_on_a_pull(harness: ContractHarness) -> None:
    pull = await harness.seed_pull("pair/upsert")
    target = Target("pull", pull)
    marker = make_marker("first-review", 1, pr=pull, run="r1")
    created = await harness.host.upsert_comment(target, marker, "review")
    again = await harness.host.upsert_comment(target, marker, "review")
    assert (created.outcome, again.outcome) == (Upserted.CREATED, Upserted.UNCHANGED)
    comments = await harness.host.list_comments(target)
    assert [c.id for c in own_with(comments, marker, harness)] == [created.comment.id]


@contract
async def test_each_run_keeps_its_own_comment(harness: ContractHarness) -> None:
    # A later cycle on the same PR posts its own comment instead of overwriting the previous one.
    pull = await harness.seed_pull("pair/runs")
    target = Target("pull", pull)
    first = await harness.host.upsert_comment(
        target, make_marker("synthesis", 1, pr=pull, run="r1"), "cycle one"
    )
    second = await harness.host.upsert_comment(
        target, make_marker("synthesis", 1, pr=pull, run="r2"), "cycle two"
    )
    assert first.outcome is second.outcome is Upserted.CREATED
    assert first.comment.id != second.comment.id
    comments = await harness.host.list_comments(target)
    assert "cycle one" in by_id(comments, first.comment.id).body


@contract
async def test_restart_never_posts_twice(harness: ContractHarness) -> None:
    card = await harness.seed_card("Restart", "body")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r1")
    created = await harness.host.upsert_comment(target, marker, "published")

    restarted = harness.restart()
    again = await restarted.upsert_comment(target, marker, "published")
    assert again.outcome is Upserted.UNCHANGED
    assert again.comment.id == created.comment.id
    changed = await restarted.upsert_comment(target, marker, "republished")
    assert changed.outcome is Upserted.UPDATED
    assert changed.comment.id == created.comment.id

    comments = await harness.host.list_comments(target)
    assert [c.id for c in own_with(comments, marker, harness)] == [created.comment.id]


EARLIER = 99  # pairbot's three markers then land at 100-102: across GitHub's page of 100


@contract
async def test_markers_past_the_first_page_are_found(harness: ContractHarness) -> None:
    # Three markers upserted twice each after 99 earlier comments: the second round finds each
    # one where it lives (page 1 or page 2), even when the adapter's cached page 1 is still
    # current and answered without its body, so nothing is posted twice; a restart (no cache)
    # agrees. On a card and on a pull: they are different listings on Azure DevOps.
    card = await harness.seed_card("Busy", "body")
    pull = await harness.seed_pull("pair/busy")
    for target in (Target("card", card), Target("pull", pull)):
        for i in range(EARLIER):
            await harness.comment_as(harness.human, target, f"earlier {i}")
        markers = [
            make_marker(kind, card, pr=pull, run="r1") for kind in ("plan", "review", "synthesis")
        ]
        created = [await harness.host.upsert_comment(target, m, f"{m} body") for m in markers]
        assert [r.outcome for r in created] == [Upserted.CREATED] * 3
        writes = harness.writes()
        for host in (harness.host, harness.restart()):
            again = [await host.upsert_comment(target, m, f"{m} body") for m in markers]
            assert [r.outcome for r in again] == [Upserted.UNCHANGED] * 3
            assert [r.comment.id for r in again] == [r.comment.id for r in created]
        assert harness.writes() == writes
        comments = await harness.host.list_comments(target)
        assert len(comments) == EARLIER + 3
        for marker, result in zip(markers, created, strict=True):
            assert [c.id for c in own_with(comments, marker, harness)] == [result.comment.id]


@contract
async def test_duplicates_collapse_to_the_oldest(harness: ContractHarness) -> None:
    card = await harness.seed_card("Duplicates", "body")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r1")
    oldest = await harness.comment_as(harness.identity, target, render(marker, "one"))
    newer = await harness.comment_as(harness.identity, target, render(marker, "two"))

    result = await harness.host.upsert_comment(target, marker, "three")
    assert result.outcome is Upserted.UPDATED
    assert result.comment.id == oldest
    assert result.duplicates == (newer,)

    comments = await harness.host.list_comments(target)
    assert "three" in by_id(comments, oldest).body
    assert by_id(comments, newer).body == render(marker, "two")  # reported, never deleted


@contract
async def test_forged_marker_is_never_edited(harness: ContractHarness) -> None:
    card = await harness.seed_card("Forgery", "body")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r1")
    forged_by_human = await harness.comment_as(harness.human, target, render(marker, "forged"))
    forged_by_bot = await harness.comment_as(harness.bot, target, render(marker, "forged too"))

    result = await harness.host.upsert_comment(target, marker, "the real one")
    assert result.outcome is Upserted.CREATED
    assert result.comment.id not in (forged_by_human, forged_by_bot)
    assert result.duplicates == ()

    comments = await harness.host.list_comments(target)
    assert by_id(comments, forged_by_human).body == render(marker, "forged")
    assert by_id(comments, forged_by_bot).body == render(marker, "forged too")
    again = await harness.host.upsert_comment(target, marker, "the real one")
    assert (again.outcome, again.comment.id) == (Upserted.UNCHANGED, result.comment.id)


@contract
async def test_human_tail_survives_an_update(harness: ContractHarness) -> None:
    card = await harness.seed_card("Tail", "body")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r1")
    tail = "\n\nNote from a maintainer: ship it after the release."
    # pairbot's comment as a maintainer left it after appending a note under the owned section.
    existing = await harness.comment_as(harness.identity, target, render(marker, "v1") + tail)

    updated = await harness.host.upsert_comment(target, marker, "v2")
    assert updated.outcome is Upserted.UPDATED
    assert updated.comment.id == existing
    assert updated.comment.body == render(marker, "v2") + tail
    again = await harness.host.upsert_comment(target, marker, "v2")
    assert again.outcome is Upserted.UNCHANGED


@contract
async def test_long_body_is_truncated_with_a_notice(harness: ContractHarness) -> None:
    card = await harness.seed_card("Long", "body")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r1")
    created = await harness.host.upsert_comment(target, marker, "x" * (MAX_BODY + 5_000))
    assert len(created.comment.body) <= MAX_BODY
    assert "truncated by pairbot" in created.comment.body
    again = await harness.host.upsert_comment(target, marker, "x" * (MAX_BODY + 5_000))
    assert again.outcome is Upserted.UNCHANGED


# -- the shared upsert's failure paths: on a card and on a pull (another listing on Azure DevOps) --


async def both_targets(harness: ContractHarness) -> list[Target]:
    card = await harness.seed_card("Failures", "body")
    return [Target("card", card), Target("pull", await harness.seed_pull(f"pair/fail-{card}"))]


async def own_comments(harness: ContractHarness, target: Target, marker: str) -> list[Comment]:
    return own_with(await harness.restart().list_comments(target), marker, harness)


@contract
async def test_a_create_that_landed_before_failing_is_adopted_not_posted_again(
    harness: ContractHarness,
) -> None:
    for target in await both_targets(harness):
        marker = make_marker("synthesis", target.number, run="r1")
        harness.fail_comment_write(target, "create", landed=True)
        result = await harness.host.upsert_comment(target, marker, "published once")
        assert result.outcome is Upserted.CREATED
        assert "published once" in result.comment.body
        mine = await own_comments(harness, target, marker)
        assert [c.id for c in mine] == [result.comment.id], "adopted, never posted twice"
        again = await harness.host.upsert_comment(target, marker, "published once")
        assert (again.outcome, again.comment.id) == (Upserted.UNCHANGED, result.comment.id)


@contract
async def test_a_create_that_failed_before_landing_raises_and_posts_nothing(
    harness: ContractHarness,
) -> None:
    for target in await both_targets(harness):
        marker = make_marker("synthesis", target.number, run="r1")
        harness.fail_comment_write(target, "create", landed=False)
        with pytest.raises(HostUnavailable):
            await harness.host.upsert_comment(target, marker, "text")
        assert await own_comments(harness, target, marker) == []
        created = await harness.host.upsert_comment(target, marker, "text")
        assert created.outcome is Upserted.CREATED
        assert [c.id for c in await own_comments(harness, target, marker)] == [created.comment.id]


@contract
async def test_an_edit_that_landed_before_failing_counts(harness: ContractHarness) -> None:
    for target in await both_targets(harness):
        marker = make_marker("synthesis", target.number, run="r1")
        created = await harness.host.upsert_comment(target, marker, "v1")
        harness.fail_comment_write(target, "edit", landed=True)
        updated = await harness.host.upsert_comment(target, marker, "v2")
        assert (updated.outcome, updated.comment.id) == (Upserted.UPDATED, created.comment.id)
        assert updated.comment.body == render(marker, "v2")
        mine = await own_comments(harness, target, marker)
        assert [(c.id, c.body) for c in mine] == [(created.comment.id, render(marker, "v2"))]


@contract
async def test_an_edit_that_failed_raises_and_leaves_the_comment(harness: ContractHarness) -> None:
    for target in await both_targets(harness):
        marker = make_marker("synthesis", target.number, run="r1")
        created = await harness.host.upsert_comment(target, marker, "v1")
        harness.fail_comment_write(target, "edit", landed=False)
        with pytest.raises(HostUnavailable):
            await harness.host.upsert_comment(target, marker, "v2")
        mine = await own_comments(harness, target, marker)
        assert [(c.id, c.body) for c in mine] == [(created.comment.id, render(marker, "v1"))]
        updated = await harness.host.upsert_comment(target, marker, "v2")
        assert (updated.outcome, updated.comment.id) == (Upserted.UPDATED, created.comment.id)


@contract
async def test_concurrent_upserts_of_one_marker_leave_one_comment(
    harness: ContractHarness,
) -> None:
    for target in await both_targets(harness):
        marker = make_marker("review", target.number, run="r1")
        texts = ["first", "second", "third"]
        results = await asyncio.gather(
            *(harness.host.upsert_comment(target, marker, text) for text in texts)
        )
        assert sorted(r.outcome.value for r in results).count(Upserted.CREATED.value) == 1
        assert len({r.comment.id for r in results}) == 1
        mine = await own_comments(harness, target, marker)
        assert [c.id for c in mine] == [results[0].comment.id], "one marker, one comment"
        assert mine[0].body in {render(marker, text) for text in texts}


@contract
async def test_concurrent_state_labels_leave_exactly_one(harness: ContractHarness) -> None:
    card = await harness.seed_card("Racing labels", "body", labels=("bug",))
    target = Target("card", card)
    states = [PrState.IN_PROGRESS, PrState.AWAITING_VERIFY, PrState.BLOCKED]
    await asyncio.gather(*(harness.host.set_state_label(target, s) for s in states))
    labels = (await harness.host.get_card(card)).labels
    assert "bug" in labels
    state_labels = [lb for lb in labels if lb.startswith(PREFIX)]
    assert len(state_labels) == 1, "never two state labels, whatever the race"
    assert state_labels[0] in {s.value for s in states}


@contract
async def test_react_or_say_unsupported(harness: ContractHarness) -> None:
    # Hosts differ in which reactions exist (Azure DevOps only likes): each call either reacts or
    # raises Unsupported("react") — never a silent no-op, never another error.
    target = Target("card", await harness.seed_card("React", "body"))
    comment = await harness.comment_as(harness.human, target, "/pair implement")
    calls: list[tuple[str | None, Reaction]] = [(comment, "eyes"), (comment, "+1"), (None, "+1")]
    for comment_id, reaction in calls:
        try:
            await harness.host.react(target, comment_id, reaction)
        except Unsupported as unsupported:
            assert unsupported.capability == "react"


# -- cards ----------------------------------------------------------------------------------------


@contract
async def test_card_crud_and_close(harness: ContractHarness) -> None:
    host = harness.host
    card = await host.create_card("A title", "A body", ("bug",))
    got = await host.get_card(card.number)
    assert (got.number, got.title, got.body, got.state) == (
        card.number,
        "A title",
        "A body",
        "open",
    )
    assert "bug" in got.labels

    body_edit = await host.update_card(card.number, body="A new body")
    assert (body_edit.title, body_edit.body) == ("A title", "A new body")
    title_edit = await host.update_card(card.number, title="A new title")
    assert (title_edit.title, title_edit.body) == ("A new title", "A new body")
    got = await host.get_card(card.number)
    assert (got.title, got.body) == ("A new title", "A new body")

    await host.close(Target("card", card.number))
    assert (await host.get_card(card.number)).state == "closed"


@contract
async def test_card_hash_ignores_labels_comments_and_whitespace(harness: ContractHarness) -> None:
    host = harness.host
    number = await harness.seed_card("Hash me", "Line one\nLine two", labels=("bug",))
    target = Target("card", number)
    before = await host.card_hash(number)
    card = await host.get_card(number)
    assert before == card_hash(card.title, card.body)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", before)

    await host.set_state_label(target, PrState.IN_PROGRESS)
    await harness.comment_as(harness.human, target, "a comment")
    await host.upsert_comment(target, make_marker("status", number), "pairbot's status")
    assert await host.card_hash(number) == before

    await host.update_card(number, body="Line one\r\n\r\nLine two  ")
    assert await host.card_hash(number) == before, "whitespace and line endings are not work"

    await host.update_card(number, body="Line one\nLine three")
    edited = await host.card_hash(number)
    assert edited != before
    await host.update_card(number, title="Hash me again")
    assert await host.card_hash(number) not in (before, edited)


# -- pulls, statuses and labels -------------------------------------------------------------------


@contract
async def test_open_pull_is_idempotent(harness: ContractHarness) -> None:
    number = await harness.seed_pull("pair/open")
    first = await harness.host.open_pull("pair/open", "main", "Title", "Body")
    second = await harness.host.open_pull("pair/open", "main", "Title", "Body")
    assert first.number == second.number == number
    assert first.head_sha == await harness.head_of(number)
    got = await harness.host.get_pull(number)
    assert (got.head_branch, got.base_branch, got.state) == ("pair/open", "main", "open")
    assert not got.merged


@contract
async def test_review_status_is_bound_to_the_head(harness: ContractHarness) -> None:
    host = harness.host
    pull = await harness.seed_pull("pair/status")
    head_a = await harness.head_of(pull)
    status = await host.set_review_status(pull, head_a, "success", "reviewed")
    assert (status.head_sha, status.state, status.context) == (head_a, "success", REVIEW_CONTEXT)
    on_a = await host.get_review_status(pull, head_a)
    assert on_a is not None
    assert on_a.state == "success"

    head_b = await harness.move_head(pull)
    assert head_b != head_a
    assert (await host.get_pull(pull)).head_sha == head_b
    assert await host.get_review_status(pull, head_b) is None, "a new head is not reviewed"
    still_a = await host.get_review_status(pull, head_a)
    assert still_a is not None
    assert still_a.state == "success"

    await host.set_review_status(pull, head_b, "pending", "re-review")
    on_b = await host.get_review_status(pull, head_b)
    assert on_b is not None
    assert on_b.state == "pending"


@contract
async def test_head_checks_are_bound_to_the_head_and_leave_pair_review_out(
    harness: ContractHarness,
) -> None:
    host = harness.host
    pull = await harness.seed_pull("pair/checks")
    head_a = await harness.head_of(pull)
    assert await host.head_checks(pull, head_a) == []
    await host.set_review_status(pull, head_a, "failure", "1 blocking finding")
    await harness.report_check(pull, head_a, "build", "failure", "2 tests failed")
    await harness.report_check(pull, head_a, "lint", "success")
    await harness.report_check(pull, head_a, "docs", "pending")
    checks = {c.name: c for c in await host.head_checks(pull, head_a)}
    assert sorted(checks) == ["build", "docs", "lint"], "pair-review is pairbot's own"
    assert (checks["build"].state, checks["lint"].state, checks["docs"].state) == (
        "failure",
        "success",
        "pending",
    )
    assert "2 tests failed" in checks["build"].summary

    await harness.report_check(pull, head_a, "build", "success")
    rerun = {c.name: c.state for c in await host.head_checks(pull, head_a)}
    assert rerun["build"] == "success", "the newest report of a name wins"

    head_b = await harness.move_head(pull)
    assert await host.head_checks(pull, head_b) == [], "a new head carries no old checks"
    await harness.report_check(pull, head_b, "build", "failure")
    assert [(c.name, c.state) for c in await host.head_checks(pull, head_b)] == [
        ("build", "failure")
    ]
    assert {c.name for c in await host.head_checks(pull, head_a)} == {"build", "docs", "lint"}


@contract
async def test_state_label_is_exclusive_on_a_card(harness: ContractHarness) -> None:
    host = harness.host
    number = await harness.seed_card("Labels", "body", labels=("bug", "pr-state:in-progress"))
    target = Target("card", number)

    assert await host.set_state_label(target, PrState.AWAITING_VERIFY) is True
    assert set((await host.get_card(number)).labels) == {"bug", "pr-state:awaiting-verify"}
    assert await host.set_state_label(target, PrState.READY_FOR_MERGE) is True
    labels = (await host.get_card(number)).labels
    assert set(labels) == {"bug", "pr-state:ready-for-merge"}
    assert [lb for lb in labels if lb.startswith(PREFIX)] == ["pr-state:ready-for-merge"]

    writes = harness.writes()
    assert await host.set_state_label(target, PrState.READY_FOR_MERGE) is False
    assert harness.writes() == writes, "setting the current state must not write"


@contract
async def test_state_label_is_exclusive_on_a_pull(harness: ContractHarness) -> None:
    host = harness.host
    pull = await harness.seed_pull("pair/labels")
    target = Target("pull", pull)
    assert await host.set_state_label(target, PrState.IN_PROGRESS) is True
    assert await host.set_state_label(target, PrState.AWAITING_HUMAN) is True
    labels = (await host.get_pull(pull)).labels
    assert [lb for lb in labels if lb.startswith(PREFIX)] == ["pr-state:awaiting-human"]
    writes = harness.writes()
    assert await host.set_state_label(target, PrState.AWAITING_HUMAN) is False
    assert harness.writes() == writes


@contract
async def test_merge_refused_on_a_moved_head(harness: ContractHarness) -> None:
    host = harness.host
    pull = await harness.seed_pull("pair/merge")
    reviewed = await harness.head_of(pull)
    moved = await harness.move_head(pull)
    with pytest.raises(Conflict):
        await host.merge(pull, reviewed, "merge")
    assert (await host.get_pull(pull)).state == "open"

    result = await host.merge(pull, moved, "merge")
    assert result.merged
    after = await host.get_pull(pull)
    assert after.merged
    assert after.state == "merged"


@contract
async def test_squash_merge_on_the_current_head(harness: ContractHarness) -> None:
    pull = await harness.seed_pull("pair/squash")
    result = await harness.host.merge(pull, await harness.head_of(pull), "squash")
    assert result.merged
    assert (await harness.host.get_pull(pull)).merged


@contract
async def test_merge_refused_when_not_open(harness: ContractHarness) -> None:
    host = harness.host
    merged = await harness.seed_pull("pair/twice")
    earlier = await harness.head_of(merged)
    head = await harness.move_head(merged)
    first = await host.merge(merged, head, "merge")
    # Re-merging the same reviewed head is idempotent (a resumed step gets the first result);
    # any other head is refused.
    again = await host.merge(merged, head, "merge")
    assert again.merged and (first.sha is None or again.sha in (None, first.sha))
    with pytest.raises(Conflict):
        await host.merge(merged, earlier, "merge")

    closed = await harness.seed_pull("pair/closed")
    head = await harness.head_of(closed)
    await host.close(Target("pull", closed))
    after = await host.get_pull(closed)
    assert (after.state, after.merged) == ("closed", False)
    with pytest.raises(Conflict):
        await host.merge(closed, head, "merge")


# -- scope decisions and people -------------------------------------------------------------------

DECISION = {
    "schemaVersion": 1,
    "scopeBaselineHash": "sha256:" + "ab" * 32,
    "decisions": [{"id": "sc-1", "action": "new-card", "rationale": "later"}],
}


def decision_comment(decision: dict[str, Any]) -> str:
    return "My decision:\n\n```json\n" + json.dumps(decision, indent=2) + "\n```\n"


def fenced_json(body: str) -> Any:
    match = re.search(r"```json\n(.*?)```", body, re.DOTALL)
    assert match, body
    return json.loads(match.group(1))


@contract
async def test_scope_decision_round_trip(harness: ContractHarness) -> None:
    host = harness.host
    pull = await harness.seed_pull("pair/scope")
    target = Target("pull", pull)
    assert await host.read_scope_decision(pull) is None

    decided = await harness.comment_as(harness.human, target, decision_comment(DECISION))
    await harness.comment_as(harness.human, target, "Thanks, carry on.")

    found = await host.read_scope_decision(pull)
    assert found is not None
    assert found.id == decided
    assert found.author.login == harness.human.login
    assert fenced_json(found.body) == DECISION
    by_ref = await host.read_scope_decision(pull, decided)
    assert by_ref is not None
    assert by_ref.id == decided

    revised = {**DECISION, "decisions": [{"id": "sc-1", "action": "ignore"}]}
    newer = await harness.comment_as(harness.human, target, decision_comment(revised))
    latest = await host.read_scope_decision(pull)
    assert latest is not None
    assert latest.id == newer
    assert fenced_json(latest.body) == revised
    first = await host.read_scope_decision(pull, decided)
    assert first is not None
    assert fenced_json(first.body) == DECISION


@contract
async def test_pairbots_own_packet_is_not_a_decision(harness: ContractHarness) -> None:
    # The packet pairbot posts may show the JSON to copy; only someone else's answer is read.
    pull = await harness.seed_pull("pair/packet")
    target = Target("pull", pull)
    answer = await harness.comment_as(harness.human, target, decision_comment(DECISION))
    packet = make_marker("scope-decision", 1, pr=pull)
    await harness.host.upsert_comment(
        target, packet, "Copy and edit:\n\n" + decision_comment(DECISION)
    )
    found = await harness.host.read_scope_decision(pull)
    assert found is not None
    assert found.id == answer


@contract
async def test_permission_levels(harness: ContractHarness) -> None:
    levels = get_args(Permission)
    human = await harness.host.permission(harness.human.login)
    assert human in WRITE_PERMISSIONS
    stranger = await harness.host.permission("someone-without-access")
    assert stranger in levels
    assert stranger not in WRITE_PERMISSIONS


# -- errors ---------------------------------------------------------------------------------------


@contract
async def test_not_found_on_unknown_numbers(harness: ContractHarness) -> None:
    host = harness.host
    card, pull = Target("card", UNKNOWN), Target("pull", UNKNOWN)
    calls: list[Callable[[], Coroutine[Any, Any, object]]] = [
        lambda: host.get_card(UNKNOWN),
        lambda: host.card_hash(UNKNOWN),
        lambda: host.update_card(UNKNOWN, body="x"),
        lambda: host.list_comments(card),
        lambda: host.list_comments(pull),
        lambda: host.upsert_comment(card, make_marker("status", UNKNOWN), "x"),
        lambda: host.set_state_label(card, PrState.READY),
        lambda: host.get_pull(UNKNOWN),
        lambda: host.read_scope_decision(UNKNOWN),
        lambda: host.merge(UNKNOWN, "0" * 40, "merge"),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            await call()
