"""The GitHub adapter: the whole host contract over the fake, plus what only GitHub has.

The contract runs twice, as a GitHub App installation and with a plain token. The adapter talks
to `tests.support.fake_github` through an injected `httpx.MockTransport` (no sockets); time is a
`FakeClock` the adapter and the fake share, so rate-limit windows and token lifetimes are exact
and no test sleeps. `push_branch` pushes for real, to a local bare repository (and, for the
header test, to a loopback HTTP server that only records what git sends).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx
import jwt
import pytest

from hosts.base import Host
from hosts.calls import RateWindow
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
    RateLimited,
)
from hosts.github import ACTIONS_BOT, GitHubCredentials, GitHubHost, GitHubOptions
from hosts.github.push import basic_credential
from hosts.github.transport import EdgeTransport
from hosts.labels import PrState
from hosts.markers import make_marker, render
from hosts.models import Author, Target, Upserted
from tests.hosts.contract import *  # noqa: F403 - collects the contract's tests for `github`
from tests.hosts.contract import ContractHarness
from tests.hosts.harness import CommentWrite, ReportedState
from tests.support.fake_github import FakeClock, FakeGitHub, rsa_key
from tests.support.git import git

Mode = Literal["app", "token"]
HUMAN = Author(login="octocat", id="1")
OTHER_BOT = Author(login="dependabot[bot]", id="49699333", is_bot=True)


SEAMS = ("base_url", "transport", "clock", "sleep")


def make_host(fake: FakeGitHub, mode: Mode = "app", **options: Any) -> GitHubHost:
    """An adapter over `fake`, on the fake's clock; other keywords are `GitHubOptions`."""
    settings: dict[str, Any] = {
        "base_url": fake.base_url,
        "transport": fake.transport,
        "clock": fake.clock,
        "sleep": fake.clock.sleep,
        **{key: value for key, value in options.items() if key in SEAMS},
    }
    limits = GitHubOptions(**{k: v for k, v in options.items() if k not in SEAMS})
    repo = f"{fake.owner}/{fake.repo}"
    if mode == "token":
        return GitHubHost(repo, GitHubCredentials.token(fake.pat), options=limits, **settings)
    credentials = GitHubCredentials.app(fake.app_id, rsa_key()[0], fake.installation_id)
    return GitHubHost(repo, credentials, options=limits, **settings)


def pairbot_identity(fake: FakeGitHub, mode: Mode) -> Author:
    user = fake.bot_user if mode == "app" else fake.pat_user
    return Author(login=user.login, id=str(user.id), is_bot=user.type == "Bot")


@dataclass
class GitHubHarness:
    """`ContractHarness` over the fake; the outside world acts on the fake's state directly."""

    fake: FakeGitHub
    mode: Mode
    host: Host  # typed as the protocol: mypy checks that GitHubHost is one
    identity: Author
    human: Author = HUMAN
    bot: Author = OTHER_BOT
    instances: list[GitHubHost] = field(default_factory=list)

    def restart(self) -> Host:
        host = make_host(self.fake, self.mode)
        self.instances.append(host)
        return host

    async def seed_card(
        self, title: str, body: str, labels: tuple[str, ...] = (), assignees: tuple[str, ...] = ()
    ) -> int:
        return self.fake.seed_issue(title, body, labels, assignees, author=self.human.login)

    async def seed_pull(self, head_branch: str, base_branch: str = "main") -> int:
        return self.fake.seed_pull(head_branch, base_branch, author=self.human.login)

    async def head_of(self, pull: int) -> str:
        return self.fake.pulls[pull].head_sha

    async def move_head(self, pull: int) -> str:
        return self.fake.move_head(pull)

    async def comment_as(self, author: Author, target: Target, body: str) -> str:
        login = self.fake.user(author.login, bot=author.is_bot).login
        return str(self.fake.add_comment(target.number, body, login))

    async def report_check(
        self, pull: int, sha: str, name: str, state: ReportedState, summary: str = ""
    ) -> None:
        self.fake.add_check_run(sha, name, None if state == "pending" else state, title=summary)

    def fail_comment_write(self, target: Target, write: CommentWrite, *, landed: bool) -> None:
        # Comments on pulls are issue comments: one path for both kinds of target.
        path = (
            rf"/issues/{target.number}/comments$" if write == "create" else r"/issues/comments/\d+$"
        )
        self.fake.fail(
            "POST" if write == "create" else "PATCH", path, "5xx-after" if landed else "5xx"
        )

    def writes(self) -> int:
        return self.fake.mutations


@pytest.fixture(params=["app", "token"])
def harness(request: pytest.FixtureRequest) -> Iterator[ContractHarness]:
    mode: Mode = request.param
    fake = FakeGitHub()
    yield GitHubHarness(fake, mode, make_host(fake, mode), pairbot_identity(fake, mode))
    assert fake.unexpected == [], "the adapter sent requests the fake does not expect"
    assert fake.violations == [], "a request was sent inside a rate-limit window"
    assert fake.max_parallel_mutations <= 1, "mutations must go one at a time"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    server = FakeGitHub()
    yield server
    assert server.unexpected == [], "the adapter sent requests the fake does not expect"
    assert server.violations == [], "a request was sent inside a rate-limit window"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- auth -----------------------------------------------------------------------------------------


def test_jwt_claims_are_backdated_and_short(fake: FakeGitHub) -> None:
    host = make_host(fake)
    assert host._app is not None
    token = host._app.jwt()
    claims = jwt.decode(
        token,
        rsa_key()[1],
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False},
    )
    now = int(fake.clock())
    assert claims == {"iat": now - 60, "exp": now + 540, "iss": str(fake.app_id)}
    assert claims["exp"] <= now + 600
    assert jwt.get_unverified_header(token)["alg"] == "RS256"


def test_identity_of_an_app_is_its_bot_user(fake: FakeGitHub) -> None:
    host = make_host(fake)
    me = run(host.identity())
    assert me == Author(login="pairbot[bot]", id=str(fake.bot_user.id), is_bot=True)
    assert fake.jwt_claims, "GET /app is authenticated with the JWT"
    requests = fake.requests
    run(host.identity())
    assert fake.requests == requests, "the identity is looked up once"


def test_identity_of_the_actions_token_is_github_actions_bot(fake: FakeGitHub) -> None:
    fake.pat_user = fake.user("github-actions[bot]", bot=True, uid=41898282)
    assert run(make_host(fake, "token").identity()) == ACTIONS_BOT


def test_installation_token_is_refreshed_minutes_before_expiry(fake: FakeGitHub) -> None:
    host = make_host(fake, token_refresh_margin_s=300)
    run(host.get_card(fake.seed_issue("t", "b")))
    assert fake.mints == 1
    fake.clock.now += fake.token_lifetime_s - 301  # 5 min + 1 s before expiry: still good
    run(host.get_card(1))
    assert fake.mints == 1
    fake.clock.now += 2  # inside the margin: a new token before the old one dies
    run(host.get_card(1))
    assert fake.mints == 2
    assert all(method != "GET" or status != 401 for method, _, status in fake.log)


def test_one_mint_when_fifty_callers_race(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("race", "body")

    async def race() -> None:
        cards = await asyncio.gather(*(host.get_card(number) for _ in range(50)))
        assert {card.title for card in cards} == {"race"}

    run(race())
    assert fake.mints == 1
    mint_posts = [entry for entry in fake.log if entry[1].endswith("/access_tokens")]
    assert len(mint_posts) == 1


def test_a_401_mints_once_and_retries_once(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("revoked", "body")
    run(host.get_card(number))
    fake.fail("GET", rf"/issues/{number}$", "revoke")
    assert run(host.get_card(number)).title == "revoked"
    assert fake.mints == 2


def test_a_persistent_401_is_forbidden_after_one_re_mint(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("revoked", "body")
    fake.fail("GET", rf"/issues/{number}$", "revoke", times=10)
    with pytest.raises(Forbidden, match="401"):
        run(host.get_card(number))
    assert fake.mints == 2, "one re-mint, never a loop"
    assert len([e for e in fake.log if e[1].endswith(f"/issues/{number}")]) == 2


def test_a_401_on_a_mutation_is_retried_once_after_a_re_mint(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("revoked", "body")
    run(host.get_card(number))
    fake.fail("POST", rf"/issues/{number}/comments$", "revoke")
    result = run(host.upsert_comment(Target("card", number), make_marker("s", number), "hi"))
    assert result.outcome is Upserted.CREATED
    assert len(fake.comments_on(number)) == 1
    assert fake.mints == 2


def test_a_bad_token_is_forbidden_without_retry(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    fake.pat = "ghp_someOtherToken"  # the host's token is no longer accepted
    with pytest.raises(Forbidden):
        run(host.get_card(fake.seed_issue("t", "b")))
    assert fake.requests == 1


def test_credentials_are_validated() -> None:
    # The literals below are validation probes, not secrets.
    with pytest.raises(ValueError, match="empty"):
        GitHubCredentials.token("  ")
    with pytest.raises(ValueError, match="empty"):
        GitHubCredentials.actions("")
    with pytest.raises(ValueError, match="all of"):
        GitHubCredentials.app(1, rsa_key()[0], 0)
    with pytest.raises(ValueError, match="all of"):
        GitHubCredentials.app(" ", rsa_key()[0], 3)
    with pytest.raises(ValueError, match="owner/name"):
        GitHubHost("just-a-name", GitHubCredentials.token("t0ken"))
    shown = repr(GitHubCredentials.app(7, rsa_key()[0], 9)) + str(GitHubCredentials.token("t0ken"))
    assert "t0ken" not in shown
    assert "PRIVATE KEY" not in shown
    secret = (
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END PRIVATE KEY-----\n"  # noqa: S105 - made up
    )
    with pytest.raises(ValueError) as raised:
        GitHubHost("o/r", GitHubCredentials.app(1, secret, 2))
    assert "c2VjcmV0" not in str(raised.value)
    assert raised.value.__cause__ is None
    assert raised.value.__context__ is None or "c2VjcmV0" not in str(raised.value.__context__)


# -- rate limits and retries ----------------------------------------------------------------------


def test_no_request_inside_a_retry_after_window(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("limited", "body")
    fake.fail("GET", rf"/issues/{number}$", "secondary", retry_after=20)
    assert run(host.get_card(number)).title == "limited"  # waited 20 s, then read
    assert 20 in fake.clock.sleeps
    # The fake records any request that arrives inside the window it announced.
    assert fake.violations == []


def test_a_429_with_retry_after_is_waited_out_for_reads(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("limited", "body")
    fake.fail("GET", rf"/issues/{number}$", "429", retry_after=5)
    assert run(host.get_card(number)).title == "limited"
    assert fake.clock.sleeps == [5]


def test_a_secondary_limit_without_retry_after_waits_a_minute(fake: FakeGitHub) -> None:
    host = make_host(fake, "token", max_wait_s=120)
    number = fake.seed_issue("limited", "body")
    fake.fail("GET", rf"/issues/{number}$", "secondary-no-header")
    assert run(host.get_card(number)).title == "limited"
    assert fake.clock.sleeps == [60.0]


def test_a_long_window_raises_rate_limited_and_sends_nothing_more(fake: FakeGitHub) -> None:
    host = make_host(fake, "token", max_wait_s=60)
    number = fake.seed_issue("limited", "body")
    fake.fail("GET", rf"/issues/{number}$", "primary", retry_after=1800)
    with pytest.raises(RateLimited) as raised:
        run(host.get_card(number))
    assert raised.value.retry_after == pytest.approx(1800)
    assert "rate limit" in str(raised.value)
    sent = fake.requests
    with pytest.raises(RateLimited) as again:
        run(host.get_card(number))
    assert fake.requests == sent, "no request inside the known window"
    assert again.value.retry_after is not None
    assert again.value.retry_after <= 1800
    fake.clock.now += 1800
    assert run(host.get_card(number)).title == "limited"


def test_retries_are_bounded_then_rate_limited(fake: FakeGitHub) -> None:
    host = make_host(fake, "token", read_attempts=3)
    number = fake.seed_issue("limited", "body")
    fake.fail("GET", rf"/issues/{number}$", "429", retry_after=10, times=5)
    with pytest.raises(RateLimited):
        run(host.get_card(number))
    assert len([e for e in fake.log if e[1].endswith(f"/issues/{number}")]) == 3


def test_a_spent_quota_on_a_success_closes_the_gate(fake: FakeGitHub) -> None:
    host = make_host(fake, "token", max_wait_s=10)
    number = fake.seed_issue("last", "body")
    fake._remaining = 1  # this read is the last one the quota allows
    run(host.get_card(number))
    sent = fake.requests
    with pytest.raises(RateLimited, match="spent"):
        run(host.get_card(number))
    assert fake.requests == sent


def test_reads_retry_server_errors_with_backoff(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("flaky", "body")
    fake.fail("GET", rf"/issues/{number}$", "5xx", times=2)
    assert run(host.get_card(number)).title == "flaky"
    assert fake.clock.sleeps == [0.5, 1.0]


def test_reads_give_up_after_bounded_server_errors(fake: FakeGitHub) -> None:
    host = make_host(fake, "token", read_attempts=3)
    number = fake.seed_issue("down", "body")
    fake.fail("GET", rf"/issues/{number}$", "5xx", times=9)
    with pytest.raises(HostUnavailable, match="502"):
        run(host.get_card(number))
    assert len([e for e in fake.log if e[1].endswith(f"/issues/{number}")]) == 3


def test_a_rate_limited_mutation_is_not_retried(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("card", "body")
    fake.fail("POST", r"/labels$", "secondary", retry_after=30)
    with pytest.raises(RateLimited):
        run(host.set_state_label(Target("card", number), PrState.READY))
    posts = [e for e in fake.log if e[0] == "POST"]
    assert len(posts) == 1
    # The next call waits the window out before it sends anything.
    assert run(host.set_state_label(Target("card", number), PrState.READY)) is True
    assert 30 in [round(s) for s in fake.clock.sleeps]


def test_mutations_go_one_at_a_time(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    numbers = [fake.seed_issue(f"card {i}", "body") for i in range(8)]

    async def publish() -> None:
        await asyncio.gather(
            *(host.set_state_label(Target("card", n), PrState.IN_PROGRESS) for n in numbers),
            *(host.react(Target("card", n), None, "eyes") for n in numbers),
        )

    run(publish())
    assert fake.max_parallel_mutations == 1
    spacing = [s for s in fake.clock.sleeps if s > 0]
    assert len(spacing) >= 15, "writes are spaced a second apart"


# -- reconciliation -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["5xx-after", "timeout-after"])
def test_a_create_stored_before_a_failure_is_reconciled(fake: FakeGitHub, kind: Any) -> None:
    host = make_host(fake)
    number = fake.seed_issue("card", "body")
    target = Target("card", number)
    marker = make_marker("synthesis", number, run="r1")
    fake.fail("POST", rf"/issues/{number}/comments$", kind)
    result = run(host.upsert_comment(target, marker, "published once"))
    assert result.outcome is Upserted.CREATED
    assert len(fake.comments_on(number)) == 1
    assert len([e for e in fake.log if e[0] == "POST" and e[1].endswith("/comments")]) == 1
    again = run(host.upsert_comment(target, marker, "published once"))
    assert (again.outcome, again.comment.id) == (Upserted.UNCHANGED, result.comment.id)


class LaggingListings(httpx.AsyncBaseTransport):
    """The fake behind a comment listing that lags its writes, as GitHub's lists may: a comment
    created through this transport is left out of the next `lag` listings of its issue. A
    listing it filtered carries no ETag, so no cache keeps the lagging page."""

    def __init__(self, fake: FakeGitHub, lag: int) -> None:
        self.fake = fake
        self.lag = lag
        self.hidden: dict[int, int] = {}  # comment id -> listings it stays out of

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        before = set(self.fake.comments)
        try:
            response = await self.fake.transport.handle_async_request(request)
        finally:
            for new in set(self.fake.comments) - before:
                self.hidden[new] = self.lag
        listing = request.method == "GET" and request.url.path.endswith("/comments")
        if not listing or response.status_code != 200 or not self.hidden:
            return response
        await response.aread()
        items = [c for c in json.loads(response.content) if c["id"] not in self.hidden]
        self.hidden = {cid: left - 1 for cid, left in self.hidden.items() if left > 1}
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("etag", "content-length", "content-encoding")
        }
        return httpx.Response(200, headers=headers, json=items)


@pytest.mark.parametrize("kind", ["timeout-after", "5xx-after"])
def test_a_create_stored_before_a_failure_is_reconciled_until_the_listing_shows_it(
    fake: FakeGitHub, kind: Any
) -> None:
    host = make_host(fake, transport=LaggingListings(fake, lag=2))
    number = fake.seed_issue("card", "body")
    target = Target("card", number)
    marker = make_marker("review", number, run="r1")
    fake.fail("POST", rf"/issues/{number}/comments$", kind)
    result = run(host.upsert_comment(target, marker, "reviewed once"))
    assert result.outcome is Upserted.CREATED
    assert len(fake.comments_on(number)) == 1
    assert len([e for e in fake.log if e[0] == "POST" and e[1].endswith("/comments")]) == 1
    assert fake.clock.sleeps.count(0.5) >= 1 and fake.clock.sleeps.count(1.0) >= 1  # backoff
    again = run(host.upsert_comment(target, marker, "reviewed once"))
    assert (again.outcome, again.comment.id) == (Upserted.UNCHANGED, result.comment.id)


def test_a_create_whose_listing_never_settles_raises_after_bounded_reads(fake: FakeGitHub) -> None:
    host = make_host(fake, transport=LaggingListings(fake, lag=50))
    number = fake.seed_issue("card", "body")
    target = Target("card", number)
    fake.fail("POST", rf"/issues/{number}/comments$", "timeout-after")
    with pytest.raises(HostUnavailable, match="timed out"):
        run(host.upsert_comment(target, make_marker("review", number), "text"))
    listings = [e for e in fake.log if e[0] == "GET" and e[1].endswith("/comments")]
    assert len(listings) == 1 + 4  # the upsert's own read, then four settling reads
    assert len(fake.comments_on(number)) == 1  # stored once, never posted again


def test_a_create_that_failed_before_storing_raises_and_posts_nothing(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("card", "body")
    target = Target("card", number)
    marker = make_marker("synthesis", number)
    fake.fail("POST", rf"/issues/{number}/comments$", "5xx")
    with pytest.raises(HostUnavailable):
        run(host.upsert_comment(target, marker, "text"))
    assert fake.comments_on(number) == []
    assert run(host.upsert_comment(target, marker, "text")).outcome is Upserted.CREATED
    assert len(fake.comments_on(number)) == 1


def test_an_edit_that_landed_before_a_failure_counts(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("card", "body")
    target = Target("card", number)
    marker = make_marker("synthesis", number)
    created = run(host.upsert_comment(target, marker, "v1"))
    fake.fail("PATCH", r"/issues/comments/\d+$", "5xx-after")
    updated = run(host.upsert_comment(target, marker, "v2"))
    assert (updated.outcome, updated.comment.id) == (Upserted.UPDATED, created.comment.id)
    fake.fail("PATCH", r"/issues/comments/\d+$", "5xx")
    with pytest.raises(HostUnavailable):
        run(host.upsert_comment(target, marker, "v3"))


def test_a_card_created_before_a_failure_is_not_created_twice(fake: FakeGitHub) -> None:
    host = make_host(fake)
    fake.fail("POST", r"/issues$", "5xx-after")
    card = run(host.create_card("Once", "only once"))
    assert card.title == "Once"
    assert [i.title for i in fake.issues.values()] == ["Once"]


def test_a_pull_opened_before_a_failure_is_returned(fake: FakeGitHub) -> None:
    host = make_host(fake)
    fake.branches["pair/x"] = "a" * 40
    fake.fail("POST", r"/pulls$", "5xx-after")
    pull = run(host.open_pull("pair/x", "main", "T", "B"))
    assert pull.head_branch == "pair/x"
    assert len(fake.pulls) == 1


def test_a_merge_that_landed_before_a_failure_is_merged(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/m")
    fake.fail("PUT", r"/merge$", "5xx-after")
    result = run(host.merge(number, fake.pulls[number].head_sha, "squash"))
    assert result.merged
    assert result.sha == fake.pulls[number].merge_commit_sha


# -- pulls ----------------------------------------------------------------------------------------


def test_a_draft_is_marked_ready_through_graphql_before_merging(fake: FakeGitHub) -> None:
    host = make_host(fake)
    fake.branches["pair/draft"] = "b" * 40
    pull = run(host.open_pull("pair/draft", "main", "Draft", "body", draft=True))
    assert pull.draft
    result = run(host.merge(pull.number, pull.head_sha, "squash"))
    assert result.merged
    assert ("POST", "/graphql", 200) in fake.log
    assert not fake.pulls[pull.number].draft


def test_a_not_mergeable_pull_is_a_conflict_with_the_reason(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/blocked")
    fake.pulls[number].mergeable = False
    with pytest.raises(Conflict, match="not mergeable"):
        run(host.merge(number, fake.pulls[number].head_sha, "merge"))


def test_a_head_that_moves_during_the_merge_is_a_conflict(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/race")
    reviewed = fake.pulls[number].head_sha

    def push_lands(method: str, path: str) -> None:
        if method == "PUT":  # a push lands between the adapter's read and its merge
            fake.move_head(number)

    fake.before_route = push_lands
    with pytest.raises(Conflict, match=r"409.*Head branch was modified"):
        run(host.merge(number, reviewed, "merge"))
    merge_calls = [e for e in fake.log if e[0] == "PUT"]
    assert merge_calls == [("PUT", f"/repos/octocat/Hello-World/pulls/{number}/merge", 409)]


def test_status_descriptions_fit_githubs_limit(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/long")
    head = fake.pulls[number].head_sha
    status = run(host.set_review_status(number, head, "failure", "x" * 500))
    assert len(status.description) == 140


def test_a_decision_by_reference_must_be_on_the_pull(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/scope")
    packet = render(
        make_marker("scope-decision", 1, pr=number),
        'Answer with:\n```json\n{"schemaVersion": 1, "scopeBaselineHash": "sha256:.."}\n```',
    )
    fake.add_comment(number, packet, fake.bot_user.login)
    assert run(host.read_scope_decision(number)) is None
    other = fake.seed_pull("pair/other")
    comment = fake.add_comment(other, "hello", "octocat")
    with pytest.raises(NotFound):
        run(host.read_scope_decision(number, str(comment)))
    url = f"https://github.com/octocat/Hello-World/pull/{other}#issuecomment-{comment}"
    found = run(host.read_scope_decision(other, url))
    assert found is not None
    assert found.id == str(comment)


def test_ghes_uses_its_api_path_and_version() -> None:
    fake = FakeGitHub(base_url="https://ghe.example.com/api/v3")
    seen: list[httpx.Request] = []
    inner = fake.transport

    async def spy(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return await inner.handle_async_request(request)

    host = make_host(fake, transport=httpx.MockTransport(spy))
    number = fake.seed_pull("pair/ghes")
    fake.pulls[number].draft = True
    run(host.merge(number, fake.pulls[number].head_sha, "merge"))
    assert {r.url.host for r in seen} == {"ghe.example.com"}
    assert all(r.headers["x-github-api-version"] == "2022-11-28" for r in seen)
    assert any(r.url.path == "/api/graphql" for r in seen)
    assert host._remote_url == "https://ghe.example.com/octocat/Hello-World.git"


# -- conditional reads ----------------------------------------------------------------------------


def test_repeated_reads_are_conditional_and_304s_are_not_counted(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("etag", "body")
    first = run(host.get_card(number))
    counted = fake.counted
    again = run(host.get_card(number))
    assert again == first
    assert fake.not_modified == 1
    assert fake.counted == counted
    fake.issues[number].title = "changed"
    assert run(host.get_card(number)).title == "changed"
    assert fake.counted == counted + 1


def test_a_refreshed_token_does_not_reuse_another_credentials_cache(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_issue("etag", "body")
    run(host.get_card(number))
    fake.clock.now += fake.token_lifetime_s  # a new installation token: a new cache key
    run(host.get_card(number))
    assert fake.not_modified == 0
    run(host.get_card(number))
    assert fake.not_modified == 1


def test_an_idempotent_publication_costs_only_conditional_reads(fake: FakeGitHub) -> None:
    host = make_host(fake)
    pull = fake.seed_pull("pair/publish")
    head = fake.pulls[pull].head_sha
    target = Target("pull", pull)
    marker = make_marker("synthesis", 1, pr=pull, run="r1")

    async def publish() -> None:
        await host.upsert_comment(target, marker, "the synthesis")
        await host.set_review_status(pull, head, "success", "reviewed")
        await host.set_state_label(target, PrState.READY_FOR_MERGE)

    run(publish())
    before = (fake.requests, fake.mutations, fake.counted)
    run(publish())
    requests, mutations, counted = (
        fake.requests - before[0],
        fake.mutations - before[1],
        fake.counted - before[2],
    )
    assert (requests, mutations, counted) == (3, 0, 0)


# -- secrets --------------------------------------------------------------------------------------


def test_no_secret_in_any_error_log_or_repr(
    fake: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app = make_host(fake)
    token_host = make_host(fake, "token")
    number = fake.seed_issue("secrets", "body")
    errors: list[BaseException] = []

    async def provoke() -> None:
        for host in (app, token_host):
            await host.get_card(number)
            fake.fail("GET", r"/issues/\d+$", "5xx", times=3)
            fake.fail("GET", r"/comments$", "revoke", times=5)
            fake.fail("POST", r"/labels$", "secondary", retry_after=1)
            for call in (
                host.get_card(number),
                host.list_comments(Target("card", number)),
                host.set_state_label(Target("card", number), PrState.READY),
                host.get_pull(987),
                host.merge(987, "0" * 40, "merge"),
            ):
                try:
                    await call
                except HostError as error:
                    errors.append(error)
            fake.clock.now += 5

    run(provoke())
    assert len(errors) >= 8
    pem = rsa_key()[0]
    assert len(fake.minted) >= 2, "the revoked token and its successor"
    secrets = [fake.pat, basic_credential(fake.pat), *fake.minted, pem.splitlines()[1]]
    secrets += [basic_credential(t) for t in fake.minted]
    assert app._app is not None
    secrets.append(app._app.jwt())
    texts = [str(e) for e in errors] + [repr(e) for e in errors]
    texts += [repr(app), repr(token_host), repr(vars(app)), repr(vars(token_host))]
    texts += [record.getMessage() for record in caplog.records]
    texts += [str(record.args) for record in caplog.records]
    for text in texts:
        for secret in secrets:
            assert secret not in text
    for error in errors:
        assert error.__cause__ is None
        assert error.__suppress_context__ or error.__context__ is None


def test_scrubbing_covers_a_token_echoed_by_the_server(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("echo", "body")
    echoed = {"message": f"token {fake.pat} is not allowed here", "documentation_url": ""}
    fake.fail("GET", rf"/issues/{number}$", "canned", status=422, body=echoed)
    with pytest.raises(Conflict) as raised:
        run(host.get_card(number))
    assert fake.pat not in str(raised.value)
    assert "***" in str(raised.value)


# -- push_branch ----------------------------------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text("one\n")
    git(work, "add", "a.txt")
    git(work, "commit", "-qm", "one")
    git(work, "checkout", "-qb", "pair/card-1")
    (work / "a.txt").write_text("two\n")
    git(work, "commit", "-qam", "two")
    return work


def argv_recorder(tmp_path: Path) -> tuple[Path, Path]:
    """A `git` that appends its argv and the env's git config to a log, then runs git."""
    log = tmp_path / "argv.jsonl"
    script = tmp_path / "git-recorder"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    env = {k: v for k, v in os.environ.items() if k.startswith('GIT_CONFIG')}\n"
        "    f.write(json.dumps({'argv': sys.argv, 'env': env}) + '\\n')\n"
        "os.execvp('git', ['git', *sys.argv[1:]])\n"
    )
    script.chmod(0o755)
    return script, log


def test_push_branch_to_a_local_bare_repository(
    fake: FakeGitHub, tmp_path: Path, checkout: Path
) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    recorder, log = argv_recorder(tmp_path)
    host = make_host(fake, remote_url=str(bare), git=str(recorder))
    head = run(host.push_branch(checkout, "pair/card-1"))
    assert head == git(checkout, "rev-parse", "pair/card-1")
    assert git(bare, "rev-parse", "refs/heads/pair/card-1") == head

    git(checkout, "commit", "-q", "--amend", "-m", "rewritten")
    with pytest.raises(Conflict, match="rejected"):
        run(host.push_branch(checkout, "pair/card-1"))
    forced = run(host.push_branch(checkout, "pair/card-1", force=True))
    assert git(bare, "rev-parse", "refs/heads/pair/card-1") == forced

    token = next(iter(fake.tokens))
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    pushes = [c for c in calls if "push" in c["argv"]]
    assert len(pushes) == 3
    for call in calls:
        assert all(token not in arg and basic_credential(token) not in arg for arg in call["argv"])
    header = f"AUTHORIZATION: basic {basic_credential(token)}"
    assert all(header in p["env"].values() for p in pushes)


def test_push_branch_errors_are_scrubbed(fake: FakeGitHub, tmp_path: Path, checkout: Path) -> None:
    host = make_host(fake, "token", remote_url=str(tmp_path / "missing.git"))
    with pytest.raises(NotFound) as raised:
        run(host.push_branch(checkout, "pair/card-1"))
    assert fake.pat not in str(raised.value)
    with pytest.raises(NotFound, match="no local branch"):
        run(host.push_branch(checkout, "pair/absent"))
    with pytest.raises(ValueError, match="branch name"):
        run(host.push_branch(checkout, "--upload-pack=evil"))


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[list[str]]] = []

    def do_GET(self) -> None:
        _Recorder.seen.append(self.headers.get_all("Authorization") or [])
        self.send_response(403)
        self.end_headers()
        self.wfile.write(b"denied")

    def log_message(self, *args: Any) -> None:
        return None


def test_push_sends_exactly_one_authorization_header(
    fake: FakeGitHub, tmp_path: Path, checkout: Path
) -> None:
    # actions/checkout persists its own header for the server; ours must replace it, not join it.
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        origin = f"http://127.0.0.1:{server.server_port}/"
        git(checkout, "config", f"http.{origin}.extraheader", "AUTHORIZATION: basic STALE")
        remote = f"{origin}octocat/Hello-World.git"
        host = make_host(fake, "token", remote_url=remote)
        with pytest.raises(Forbidden) as raised:
            run(host.push_branch(checkout, "pair/card-1"))
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen
    assert all(h == [f"basic {basic_credential(fake.pat)}"] for h in _Recorder.seen)
    assert fake.pat not in str(raised.value)
    assert basic_credential(fake.pat) not in str(raised.value)


# -- the fake itself ------------------------------------------------------------------------------


def test_the_fake_answers_unexpected_requests_with_500_and_records_them() -> None:
    fake = FakeGitHub()

    async def stray() -> httpx.Response:
        async with httpx.AsyncClient(transport=fake.transport) as client:
            return await client.get(
                "https://api.github.com/repos/octocat/Hello-World/branches",
                headers={"Authorization": f"Bearer {fake.pat}"},
            )

    response = run(stray())
    assert response.status_code == 500
    assert "unexpected request" in response.json()["message"]
    assert fake.unexpected == ["GET /repos/octocat/Hello-World/branches: no such route in the fake"]


def test_the_fake_refuses_a_jwt_that_lives_too_long() -> None:
    fake = FakeGitHub()
    now = int(fake.clock())
    token = jwt.encode(
        {"iat": now - 60, "exp": now + 3600, "iss": str(fake.app_id)}, rsa_key()[0], "RS256"
    )

    async def get_app() -> httpx.Response:
        async with httpx.AsyncClient(transport=fake.transport) as client:
            return await client.get(
                "https://api.github.com/app", headers={"Authorization": f"Bearer {token}"}
            )

    assert run(get_app()).status_code == 401


def test_clock_is_shared() -> None:
    clock = FakeClock()
    run(clock.sleep(3))
    assert clock() == clock.now
    assert clock.sleeps == [3]


# -- edges of the translation ---------------------------------------------------------------------


def test_comments_are_read_across_pages(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("busy", "body")
    ids = [fake.add_comment(number, f"comment {i}", "octocat") for i in range(150)]
    comments = run(host.list_comments(Target("card", number)))
    assert [c.id for c in comments] == [str(i) for i in ids]
    assert len([e for e in fake.log if e[1].endswith("/comments")]) == 2


def comment_reads(fake: FakeGitHub, number: int) -> list[tuple[int, int]]:
    """(page, status) of every listing of #number's comments the fake answered, in order."""
    path = f"/repos/{fake.owner}/{fake.repo}/issues/{number}/comments"
    return [(int(query.get("page", "1")), status) for p, query, status in fake.gets if p == path]


def test_a_cached_page_one_does_not_hide_markers_on_page_two(fake: FakeGitHub) -> None:
    # The bug this guards: 99 earlier comments, then three markers. Page 1 (100 comments) is
    # stored when the first marker is read back, with no `rel="next"`; it stays 304 after the
    # second and third land on page 2, and trusting its replayed `Link` made every upsert of
    # those two fail with "not visible yet" and post them again.
    host = make_host(fake, "token")
    number = fake.seed_issue("busy", "body")
    for i in range(99):
        fake.add_comment(number, f"earlier {i}", "octocat")
    target = Target("card", number)
    markers = [make_marker(kind, number) for kind in ("plan", "review", "synthesis")]

    async def round_of_upserts() -> list[Upserted]:
        return [(await host.upsert_comment(target, m, "body")).outcome for m in markers]

    assert run(round_of_upserts()) == [Upserted.CREATED] * 3
    before = (fake.counted, fake.mutations, len(comment_reads(fake, number)))
    assert run(round_of_upserts()) == [Upserted.UNCHANGED] * 3
    # Page 1 answered 304 every time, and page 2 was read anyway: for free, also 304.
    assert comment_reads(fake, number)[before[2] :] == [(1, 304), (2, 304)] * 3
    assert (fake.counted, fake.mutations) == before[:2]
    stored = [c.body for c in fake.comments_on(number)]
    assert len(stored) == 102
    assert all(sum(b.startswith(m) for b in stored) == 1 for m in markers)


def test_a_full_last_page_costs_one_empty_read_then_only_304s(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("round", "body")
    for i in range(200):
        fake.add_comment(number, f"comment {i}", "octocat")
    assert len(run(host.list_comments(Target("card", number)))) == 200
    assert comment_reads(fake, number) == [(1, 200), (2, 200), (3, 200)]
    counted = fake.counted
    fake.add_comment(number, "the 201st", "octocat")  # page 3 changes; pages 1 and 2 do not
    comments = run(host.list_comments(Target("card", number)))
    assert comments[-1].body == "the 201st"
    assert comment_reads(fake, number)[3:] == [(1, 304), (2, 304), (3, 200)]
    assert fake.counted == counted + 1


def test_a_replayed_304_keeps_the_link_it_was_stored_with(fake: FakeGitHub) -> None:
    # Why `list_comments` ignores a replayed `Link`: the edge cache hands back the stored one.
    number = fake.seed_issue("stale", "body")
    for i in range(100):
        fake.add_comment(number, f"comment {i}", "octocat")
    edge = EdgeTransport(fake.transport, RateWindow(fake.clock))
    url = f"{fake.base_url}/repos/{fake.owner}/{fake.repo}/issues/{number}/comments"

    async def page_one() -> httpx.Response:
        async with httpx.AsyncClient(transport=edge) as client:
            headers = {"Authorization": f"Bearer {fake.pat}"}
            return await client.get(url, params={"per_page": 100, "page": 1}, headers=headers)

    first = run(page_one())
    assert (first.status_code, "next" in first.links) == (200, False)
    fake.add_comment(number, "on page 2", "octocat")
    again = run(page_one())
    assert (again.status_code, edge.not_modified) == (200, 1)  # a 304, replayed as the 200
    assert "next" not in again.links  # stale: page 2 exists now
    assert again.headers["x-ratelimit-remaining"] == str(fake._remaining)  # refreshed


def test_the_fake_pages_comments_like_github(fake: FakeGitHub) -> None:
    busy = fake.seed_issue("links", "body")
    for i in range(250):
        fake.add_comment(busy, f"comment {i}", "octocat")
    small = fake.seed_issue("small", "body")
    fake.add_comment(small, "only one", "octocat")

    async def get(number: int, etag: str = "", **params: Any) -> httpx.Response:
        url = f"{fake.base_url}/repos/{fake.owner}/{fake.repo}/issues/{number}/comments"
        headers = {"Authorization": f"Bearer {fake.pat}"}
        if etag:
            headers["If-None-Match"] = etag
        async with httpx.AsyncClient(transport=fake.transport) as client:
            return await client.get(url, params=params, headers=headers)

    default = run(get(busy))
    assert len(default.json()) == 30  # GitHub's default page size
    assert {rel: link["url"].split("?")[1] for rel, link in default.links.items()} == {
        "next": "per_page=30&page=2",
        "last": "per_page=30&page=9",
    }
    capped = run(get(busy, per_page=500, page=3))
    assert len(capped.json()) == 50  # per_page is capped at 100
    assert set(capped.links) == {"prev", "first"}
    middle = run(get(busy, per_page=100, page=2))
    assert set(middle.links) == {"prev", "first", "next", "last"}
    assert run(get(busy, per_page=100, page=4)).json() == []
    assert "link" not in run(get(small, per_page=100)).headers  # all on one page: no Link
    again = run(get(busy, middle.headers["etag"], per_page=100, page=2))
    assert (again.status_code, again.content) == (304, b"")
    assert "link" not in again.headers
    assert again.headers["etag"] == middle.headers["etag"]


def test_transport_failures_and_timeouts_are_unavailable_after_retries(fake: FakeGitHub) -> None:
    number = fake.seed_issue("net", "body")
    attempts: list[str] = []

    async def unreachable(request: httpx.Request) -> httpx.Response:
        attempts.append(request.url.path)
        raise httpx.ConnectError("connection refused", request=request)

    host = make_host(fake, "token", transport=httpx.MockTransport(unreachable))
    with pytest.raises(HostUnavailable, match="ConnectError"):
        run(host.get_card(number))
    assert len(attempts) == 3

    fake.fail("GET", rf"/issues/{number}$", "timeout", times=3)
    with pytest.raises(HostUnavailable, match="timed out"):
        run(make_host(fake, "token").get_card(number))


def test_a_slow_answer_hits_the_end_to_end_deadline(fake: FakeGitHub) -> None:
    number = fake.seed_issue("slow", "body")

    async def stalls(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        raise AssertionError("unreachable")

    host = make_host(
        fake, "token", transport=httpx.MockTransport(stalls), timeout_s=0.01, read_attempts=1
    )
    with pytest.raises(HostUnavailable, match="in time"):
        run(host.get_card(number))
    with pytest.raises(ValueError, match="timeout"):
        make_host(fake, "token", timeout_s=0)


def test_a_body_that_is_not_json_is_a_host_error(fake: FakeGitHub) -> None:
    number = fake.seed_issue("html", "body")

    async def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>maintenance</html>")

    with pytest.raises(HostError, match="not JSON"):
        run(make_host(fake, "token", transport=httpx.MockTransport(html)).get_card(number))


def test_graphql_errors_are_translated(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/gql")
    fake.pulls[number].draft = True
    unknown = {
        "data": {"markPullRequestReadyForReview": None},
        "errors": [{"type": "NOT_FOUND", "message": "Could not resolve to a node"}],
    }
    fake.fail("POST", r"^/graphql$", "canned", body=unknown)
    with pytest.raises(NotFound, match="GraphQL"):
        run(host.merge(number, fake.pulls[number].head_sha, "merge"))
    assert not fake.pulls[number].merged


def test_a_mint_refused_is_forbidden_and_not_retried(fake: FakeGitHub) -> None:
    number = fake.seed_issue("mint", "body")
    wrong_app = make_host(fake)
    fake.app_id += 1  # the fake no longer recognises the JWT's issuer
    with pytest.raises(Forbidden):
        run(wrong_app.get_card(number))
    assert fake.mints == 0
    fake.app_id -= 1
    uninstalled = make_host(fake)
    fake.installation_id += 1  # the host's installation is gone
    with pytest.raises(NotFound, match="installation"):
        run(uninstalled.get_card(number))


def test_remerging_the_same_head_returns_the_merge(fake: FakeGitHub) -> None:
    host = make_host(fake)
    number = fake.seed_pull("pair/again")
    head = fake.pulls[number].head_sha
    first = run(host.merge(number, head, "merge"))
    assert run(host.merge(number, head, "merge")) == first
    assert len([e for e in fake.log if e[0] == "PUT"]) == 1


def test_small_edges(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("edges", "body")
    writes = fake.mutations
    assert run(host.update_card(number)).title == "edges"
    assert fake.mutations == writes, "nothing to change: no write"
    with pytest.raises(NotFound):
        run(host.react(Target("card", number), "not-an-id", "eyes"))
    with pytest.raises(NotFound):
        run(host.read_scope_decision(number, "https://example.com/nothing"))
    fake.fail("POST", r"/issues$", "5xx")
    with pytest.raises(HostUnavailable):
        run(host.create_card("Never stored", "body"))
    fake.branches["pair/none"] = "c" * 40
    fake.fail("POST", r"/pulls$", "5xx")
    with pytest.raises(HostUnavailable):
        run(host.open_pull("pair/none", "main", "T", "B"))
    assert "pair/none" not in {p.head_ref for p in fake.pulls.values()}

    async def in_context() -> None:
        async with make_host(fake, "token") as scoped:
            assert (await scoped.get_card(number)).title == "edges"

    run(in_context())


def test_the_request_benchmark_meets_its_target() -> None:
    from benchmarks import host_requests

    printed: list[str] = []
    rows = host_requests.main(out=printed.append)
    warm = [(r.requests, r.mutations, r.counted) for r in rows if r.phase == "republish"]
    assert warm == [(3, 0, 0), (3, 0, 0)]
    assert "target" in printed[-1]
    assert printed[-1].endswith(": met")


# -- state labels under faults --------------------------------------------------------------------


def _state_labels(fake: FakeGitHub, number: int) -> list[str]:
    return [lb for lb in fake.issues[number].labels if lb.startswith("pr-state:")]


def _watch_state_labels(fake: FakeGitHub, number: int) -> list[int]:
    """How many state labels the issue carried before each request the fake routed."""
    seen: list[int] = []
    fake.before_route = lambda method, path: seen.append(len(_state_labels(fake, number)))
    return seen


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        pytest.param("DELETE", r"/labels/", "5xx", id="unlabel-502"),
        pytest.param("DELETE", r"/labels/", "5xx-after", id="unlabel-stored-then-502"),
        pytest.param("POST", r"/labels$", "5xx", id="label-502"),
        pytest.param("POST", r"/labels$", "5xx-after", id="label-stored-then-502"),
        pytest.param("POST", r"/labels$", "timeout-after", id="label-stored-then-timeout"),
    ],
)
def test_a_state_label_converges_through_server_errors(
    fake: FakeGitHub, method: str, path: str, kind: str
) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("card", "body", labels=("bug", "pr-state:in-progress"))
    seen = _watch_state_labels(fake, number)
    fake.fail(method, path, kind, times=2)
    assert run(host.set_state_label(Target("card", number), PrState.READY)) is True
    assert fake.issues[number].labels.count("pr-state:ready") == 1
    assert _state_labels(fake, number) == ["pr-state:ready"]
    assert "bug" in fake.issues[number].labels  # other labels are never touched
    assert max(seen) <= 1, seen  # never two state labels, not even for a moment
    # Settled: the next call reads and writes nothing.
    writes = fake.mutations
    assert run(host.set_state_label(Target("card", number), PrState.READY)) is False
    assert fake.mutations == writes


def test_a_state_label_that_cannot_settle_never_leaves_two(fake: FakeGitHub) -> None:
    host = make_host(fake, "token", read_attempts=1)
    number = fake.seed_issue("card", "body", labels=("pr-state:in-progress",))
    fake.fail("DELETE", r"/labels/", "5xx", times=100)
    with pytest.raises(HostUnavailable, match="502"):
        run(host.set_state_label(Target("card", number), PrState.READY))
    assert _state_labels(fake, number) == ["pr-state:in-progress"]
    deletes = [e for e in fake.log if e[0] == "DELETE"]
    assert len(deletes) == 3  # LABEL_ROUNDS, then the error: bounded
    assert [s for s in fake.clock.sleeps if s in (1.0, 2.0)] == [1.0, 2.0]


def test_two_state_labels_left_by_someone_else_become_one(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("card", "body", labels=("pr-state:blocked", "pr-state:merged"))
    assert run(host.set_state_label(Target("card", number), PrState.MERGED)) is True
    assert _state_labels(fake, number) == ["pr-state:merged"]


def test_a_state_label_another_writer_keeps_changing_is_a_conflict(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    number = fake.seed_issue("card", "body", labels=("pr-state:blocked",))

    def rival(method: str, path: str) -> None:  # someone re-labels before each of our reads
        labels = fake.issues[number].labels
        if (
            method == "GET"
            and path.endswith(f"/issues/{number}")
            and "pr-state:blocked" not in labels
        ):
            labels.append("pr-state:blocked")

    fake.before_route = rival
    with pytest.raises(Conflict, match=f"#{number} reads back labels that still need"):
        run(host.set_state_label(Target("card", number), PrState.READY))
    assert len([e for e in fake.log if e[0] == "DELETE"]) == 3  # bounded rounds


# -- outside evidence -----------------------------------------------------------------------------


def test_head_checks_read_every_page_of_check_runs_and_statuses(fake: FakeGitHub) -> None:
    """150 check runs and 120 statuses: two pages each, read by `total_count`."""
    host = make_host(fake, "token")
    pull = fake.seed_pull("pair/paged")
    head = fake.pulls[pull].head_sha
    for n in range(150):
        fake.add_check_run(head, f"job-{n:03}", "success")
    fake.add_check_run(head, "job-149", "failure", title="3 tests failed")  # a re-run, newest
    for n in range(120):
        fake.add_status(head, f"ci/status-{n:03}", "success")
    fake.add_status(head, "ci/status-007", "error", description="the runner crashed")
    checks = run(host.head_checks(pull, head))
    runs = [c for c in checks if c.source == "check-run"]
    statuses = [c for c in checks if c.source == "status"]
    assert (len(runs), len(statuses)) == (150, 120)
    failing = {(c.name, c.state, c.summary) for c in checks if c.state != "success"}
    assert failing == {
        ("job-149", "failure", "3 tests failed"),
        ("ci/status-007", "failure", "the runner crashed"),
    }
    pages = [
        (path.rsplit("/", 1)[-1], query.get("page"))
        for path, query, _ in fake.gets
        if path.endswith(("/check-runs", "/status"))
    ]
    assert pages == [("check-runs", "1"), ("check-runs", "2"), ("status", "1"), ("status", "2")]


def test_head_checks_mark_what_branch_protection_requires(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    pull = fake.seed_pull("pair/required")
    head = fake.pulls[pull].head_sha
    fake.add_check_run(head, "build", None)
    fake.add_status(head, "ci/lint", "failure")
    fake.add_check_run(head, "optional", "neutral")
    fake.add_check_run(head, "flaky", "timed_out")
    unprotected = run(host.head_checks(pull, head))
    assert not any(c.required for c in unprotected), "no protection (404): none known"
    fake.protection["main"] = ["build", "ci/lint"]
    checks = {c.name: (c.state, c.required) for c in run(host.head_checks(pull, head))}
    assert checks == {
        "build": ("pending", True),
        "ci/lint": ("failure", True),
        "optional": ("neutral", False),
        "flaky": ("failure", False),
    }


def test_head_checks_without_the_right_to_read_protection_know_none(fake: FakeGitHub) -> None:
    host = make_host(fake, "token")
    pull = fake.seed_pull("pair/no-admin")
    head = fake.pulls[pull].head_sha
    fake.protection["main"] = ["build"]
    fake.fail(
        "GET",
        r".*/protection/required_status_checks",
        "canned",
        status=403,
        body={"message": "Resource not accessible by integration"},
    )
    fake.add_check_run(head, "build", "failure")
    assert [(c.name, c.required) for c in run(host.head_checks(pull, head))] == [("build", False)]


def test_an_apps_own_check_runs_and_pair_review_are_left_out(fake: FakeGitHub) -> None:
    host = make_host(fake, "app")
    pull = fake.seed_pull("pair/own")
    head = fake.pulls[pull].head_sha
    fake.add_check_run(head, "pairbot summary", "failure", app_slug=fake.app_slug)
    fake.add_check_run(head, "build", "success")
    run(host.set_review_status(pull, head, "failure", "1 blocking finding"))
    assert [c.name for c in run(host.head_checks(pull, head))] == ["build"]


def test_a_token_keeps_github_actions_check_runs(fake: FakeGitHub) -> None:
    """With a token pairbot is no App: every check run is someone else's, Actions' included."""
    host = make_host(fake, "token")
    pull = fake.seed_pull("pair/actions")
    head = fake.pulls[pull].head_sha
    fake.add_check_run(head, "test", "failure", app_slug="github-actions")
    assert [(c.name, c.state) for c in run(host.head_checks(pull, head))] == [("test", "failure")]


def test_without_checks_read_the_statuses_still_count(
    fake: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    host = make_host(fake, "token")
    pull = fake.seed_pull("pair/no-checks")
    head = fake.pulls[pull].head_sha
    fake.add_check_run(head, "build", "failure")
    fake.add_status(head, "ci/lint", "failure")
    fake.fail(
        "GET",
        r".*/check-runs",
        "canned",
        status=403,
        body={"message": "Resource not accessible by integration"},
    )
    assert [c.name for c in run(host.head_checks(pull, head))] == ["ci/lint"]
    assert "grant checks: read" in caplog.text
