"""The Azure DevOps adapter: the whole host contract, plus what only Azure DevOps has.

The real azure-devops SDK talks HTTP to `FakeAzureDevOps` on 127.0.0.1 (discovery included), so
every request, header and payload the adapter makes is a real one. The SDK's on-disk location
cache is pointed at a temp dir (`AZURE_DEVOPS_CACHE_DIR` and `cache_dir=`), every sleep is
injected, and a test fails if the adapter sent anything the fake does not know.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from hosts.azure_devops import (
    AzureDevOpsHost,
    classify,
    permission_from_bits,
    push_command,
    retry_after_seconds,
    split_tags,
)
from hosts.azure_devops.convert import author_from, branch_bits, branch_token
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
    RateLimited,
    Unsupported,
)
from hosts.labels import PrState
from hosts.markers import make_marker
from hosts.models import Author, MergeResult, Target, Upserted
from tests.hosts.contract import *  # noqa: F403 - collects the contract's tests for azure-devops
from tests.hosts.contract import ContractHarness
from tests.hosts.harness import CommentWrite
from tests.support.fake_azure import (
    ADMIN,
    CONTRIBUTE,
    PROJECT,
    PROJECT_ID,
    READ,
    REPO,
    REPO_ID,
    AzureHarness,
    FakeAzureDevOps,
    running,
)
from tests.support.git import git

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "azdopat" + "7" * 45  # shaped like a PAT; never a real one
BASIC = base64.b64encode(f":{TOKEN}".encode()).decode()


class Clock:
    """A manual monotonic clock whose sleeps advance it and are recorded."""

    def __init__(self, fake: FakeAzureDevOps | None = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.requests_at_sleep: list[int] = []
        self.fake = fake

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 3))
        if self.fake is not None:
            self.requests_at_sleep.append(len(self.fake.requests))
        self.now += seconds


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The SDK's resource-location cache, kept out of ~/.azure-devops."""
    where = tmp_path / "azure-devops-cache"
    monkeypatch.setenv("AZURE_DEVOPS_CACHE_DIR", str(where))
    return where


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAzureDevOps]:
    with running(TOKEN, tmp_path / "fake") as server:
        yield server
    assert server.unexpected == [], "the adapter sent requests the fake does not know"


@pytest.fixture
def clock(fake: FakeAzureDevOps) -> Clock:
    return Clock(fake)


def make_host(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock, **kwargs: Any
) -> AzureDevOpsHost:
    options: dict[str, Any] = {
        "timeout_s": 10,
        "cache_dir": cache_dir,
        "sleep": clock.sleep,
        "clock": clock,
        **kwargs,
    }
    token = options.pop("token", TOKEN)
    return AzureDevOpsHost(fake.base_url, PROJECT, REPO, token, **options)


@pytest.fixture
def host(fake: FakeAzureDevOps, cache_dir: Path, clock: Clock) -> AzureDevOpsHost:
    return make_host(fake, cache_dir, clock)


class FailingAzureHarness(AzureHarness):
    """`AzureHarness` whose fake can fail the next comment write, as the contract asks."""

    def fail_comment_write(self, target: Target, write: CommentWrite, *, landed: bool) -> None:
        # A card comment is a work-item comment; a pull's is the first comment of a thread.
        where = rf"/workItems/{target.number}/comments"
        if target.kind == "pull":
            where = rf"/pullRequests/{target.number}/threads"
        method, pattern = ("POST", where + "$") if write == "create" else ("PATCH", where + r"/")
        if landed:
            self.fake.fail_after_store(method, pattern, 500)
        else:
            self.fake.fail_next(method, pattern, 503)


@pytest.fixture
def harness(fake: FakeAzureDevOps, cache_dir: Path, clock: Clock) -> ContractHarness:
    return FailingAzureHarness(fake, lambda: make_host(fake, cache_dir, clock))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- the SDK stays out of the way -----------------------------------------------------------------


def test_sdk_is_imported_only_when_the_adapter_is_used() -> None:
    script = (
        "import sys, importlib.util\n"
        "import hosts, hosts.base, hosts.local, hosts.azure_devops\n"
        "if importlib.util.find_spec('hosts.github'):\n"
        "    import hosts.github\n"
        "sdk = ('azure', 'msrest', 'requests', 'urllib3')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in sdk]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_discovery_follows_the_sdk_and_is_cached_in_cache_dir(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, cache_dir: Path
) -> None:
    me = run(host.identity())
    assert me == fake.pairbot.author
    assert fake.count("OPTIONS", r"/_apis$") >= 1
    pull = fake.seed_pull("pair/discovery")
    run(host.get_pull(pull))
    assert fake.count("GET", r"/_apis/ResourceAreas$") == 1
    options = json.loads((cache_dir / "options.json").read_text())
    assert any(url.startswith(f"{fake.base_url.lower()}") for url in options)
    assert all(r.status != 401 for r in fake.requests)


def test_repr_and_errors_never_show_the_token(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    good = make_host(fake, cache_dir, clock)
    assert TOKEN not in repr(good)
    assert TOKEN not in str(vars(good))
    errors: list[HostError] = []
    with pytest.raises(NotFound) as missing:
        run(good.get_card(424242))
    errors.append(missing.value)
    wrong = make_host(fake, cache_dir, clock, token=TOKEN[::-1])
    with pytest.raises(Forbidden) as denied:
        run(wrong.get_pull(1))
    errors.append(denied.value)
    fake.fail_next("GET", r"pullRequests/\d+$", 503, times=5)
    with pytest.raises(HostUnavailable) as down:
        run(good.get_pull(fake.seed_pull("pair/secret")))
    errors.append(down.value)
    for error in errors:
        for text in (str(error), repr(error), repr(error.__cause__), repr(error.__context__)):
            assert TOKEN not in text
            assert BASIC not in text
    assert TOKEN not in caplog.text
    assert BASIC not in caplog.text
    assert "TF401232" in str(missing.value)


def test_an_empty_token_is_refused() -> None:
    with pytest.raises(ValueError, match="token"):
        AzureDevOpsHost("https://dev.azure.com/fabrikam", PROJECT, REPO, "")


# -- cards ----------------------------------------------------------------------------------------


def test_new_cards_are_user_stories_with_tags(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    card = run(host.create_card("Add login", "As a user…", ("auth", "pr-state:ready")))
    stored = fake.card(card.number)
    assert stored["System.WorkItemType"] == "User Story"
    assert stored["System.Title"] == "Add login"
    assert stored["System.Description"] == "As a user…"
    assert stored["System.Tags"] == "auth; pr-state:ready"
    assert card.labels == ("auth", "pr-state:ready")
    assert card.url.endswith(f"/{PROJECT}/_workitems/edit/{card.number}")


def test_state_label_rewrites_tags_and_keeps_the_rest(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    number = fake.seed_card("Tags", "body", labels=("Bug", "pr-state:in-progress", "ux"))
    assert run(host.set_state_label(Target("card", number), PrState.BLOCKED)) is True
    assert split_tags(fake.card(number)["System.Tags"]) == ("Bug", "ux", "pr-state:blocked")
    patch = [r for r in fake.requests if r.method == "PATCH"]
    assert len(patch) == 1
    # An untagged work item gets its first tag with `add` (there is nothing to replace).
    bare = fake.seed_card("No tags", "body")
    assert run(host.set_state_label(Target("card", bare), PrState.READY)) is True
    assert fake.card(bare)["System.Tags"] == "pr-state:ready"


def test_close_uses_the_types_completed_state(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    story = fake.seed_card("Story", "body")
    issue = fake.seed_card("Issue", "body", item_type="Issue", state="To Do")
    run(host.close(Target("card", story)))
    run(host.close(Target("card", issue)))
    assert fake.card(story)["System.State"] == "Closed"
    assert fake.card(issue)["System.State"] == "Done"
    writes = fake.writes()
    run(host.close(Target("card", story)))
    assert fake.writes() == writes, "closing a closed card writes nothing"
    removed = fake.seed_card("Gone", "body", state="Removed")
    assert run(host.get_card(removed)).state == "closed"


def test_card_assignee_and_unchanged_update(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    number = fake.seed_card("Assigned", "body", assignees=(fake.human.author.login,))
    card = run(host.get_card(number))
    assert card.assignees == (fake.human.author.login,)
    writes = fake.writes()
    assert run(host.update_card(number)) == card
    assert fake.writes() == writes


# -- comments -------------------------------------------------------------------------------------


def test_card_comments_page_and_are_markdown(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock
) -> None:
    fake.page_size = 2
    host = make_host(fake, cache_dir, clock)
    number = fake.seed_card("Paged", "body")
    ids = [fake.comment_as(fake.human.author, Target("card", number), f"c{i}") for i in range(5)]
    comments = run(host.list_comments(Target("card", number)))
    assert [c.id for c in comments] == ids
    marker = make_marker("status", number)
    result = run(host.upsert_comment(Target("card", number), marker, "hello"))
    assert result.outcome is Upserted.CREATED
    stored = fake.wi_comments(number)[-1]
    assert (stored["format"], stored["text"]) == ("markdown", result.comment.body)


MARKER_KINDS = ("plan", "review", "synthesis")


def upsert_round(host: AzureDevOpsHost, target: Target, markers: list[str]) -> list[Upserted]:
    async def each() -> list[Upserted]:
        return [(await host.upsert_comment(target, m, f"{m} body")).outcome for m in markers]

    return run(each())


def test_card_markers_past_the_first_page_are_found(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    # Work-item comments come newest first, 200 a page: pairbot's markers start on page 1 and
    # drift to page 2 as people keep commenting. Each round must still find every one of them.
    number = fake.seed_card("Busy", "body")
    target = Target("card", number)
    for i in range(fake.page_size + 50):
        fake.comment_as(fake.human.author, target, f"earlier {i}")
    markers = [make_marker(kind, number) for kind in MARKER_KINDS]
    assert upsert_round(host, target, markers) == [Upserted.CREATED] * 3
    writes = fake.writes()
    assert upsert_round(host, target, markers) == [Upserted.UNCHANGED] * 3
    for i in range(fake.page_size + 50):
        fake.comment_as(fake.human.author, target, f"later {i}")
    pages = fake.count("GET", rf"/workItems/{number}/comments$")
    assert upsert_round(host, target, markers) == [Upserted.UNCHANGED] * 3
    assert fake.count("GET", rf"/workItems/{number}/comments$") - pages == 3 * 3  # 503: 3 pages
    assert fake.writes() == writes
    stored = [c["text"] for c in fake.wi_comments(number)]
    assert len(stored) == 2 * (fake.page_size + 50) + 3
    assert all(sum(text.startswith(m) for text in stored) == 1 for m in markers)


def test_a_card_comment_posted_between_pages_is_listed_once(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock
) -> None:
    fake.page_size = 2
    host = make_host(fake, cache_dir, clock)
    number = fake.seed_card("Moving", "body")
    target = Target("card", number)
    ids = [fake.comment_as(fake.human.author, target, f"c{i}") for i in range(5)]
    listings = 0

    def someone_comments(method: str, path: str) -> None:
        nonlocal listings
        if method == "GET" and path.endswith(f"/workItems/{number}/comments"):
            listings += 1
            if listings == 2:  # between page 1 and page 2: everything shifts by one
                fake.comment_as(fake.human.author, target, "meanwhile")

    fake.before_answer = someone_comments
    listed = [c.id for c in run(host.list_comments(target))]
    assert len(listed) == len(set(listed))
    assert set(ids) <= set(listed)


def test_pull_markers_among_hundreds_of_threads_are_found(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    # The thread list has no paging (one GET is every thread); hundreds of threads, more than
    # any page of the lists that do page, and markers old and new are all found.
    pull = fake.seed_pull("pair/busy")
    target = Target("pull", pull)
    for i in range(250):
        fake.comment_as(fake.human.author, target, f"earlier {i}")
    markers = [make_marker(kind, 1, pr=pull, run="r1") for kind in MARKER_KINDS]
    assert upsert_round(host, target, markers) == [Upserted.CREATED] * 3
    writes = fake.writes()
    for i in range(250):
        fake.comment_as(fake.human.author, target, f"later {i}")
    lists = fake.count("GET", rf"/pullRequests/{pull}/threads$")
    assert upsert_round(host, target, markers) == [Upserted.UNCHANGED] * 3
    assert fake.count("GET", rf"/pullRequests/{pull}/threads$") - lists == 3
    assert fake.writes() == writes
    firsts = [t["comments"][0]["content"] for t in fake.threads(pull)]
    assert len(firsts) == 503
    assert all(sum(text.startswith(m) for text in firsts) == 1 for m in markers)


def test_pr_comments_are_threads_with_the_marker_first(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    pull = fake.seed_pull("pair/threads")
    target = Target("pull", pull)
    marker = make_marker("synthesis", 1, pr=pull, run="r1")
    created = run(host.upsert_comment(target, marker, "v1"))
    thread_id = int(created.comment.id.split("/")[0])
    thread = next(t for t in fake.threads(pull) if t["id"] == thread_id)
    assert thread["status"] == "closed"
    assert thread["comments"][0]["content"] == created.comment.body
    # A human replying in pairbot's thread with the marker is not pairbot's comment.
    fake.reply_as(fake.human.author, pull, thread_id, created.comment.body)
    updated = run(host.upsert_comment(target, marker, "v2"))
    assert (updated.outcome, updated.comment.id) == (Upserted.UPDATED, created.comment.id)
    assert updated.duplicates == ()
    listed = run(host.list_comments(target))
    assert [c.id for c in listed] == [created.comment.id, f"{thread_id}/2"]


def test_system_comments_are_left_out(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    fake.commit("pair/system", {"a.txt": "a\n"}, "a")
    pull = run(host.open_pull("pair/system", "main", "Title", "Body"))
    assert any(
        c["commentType"] == "system" for t in fake.threads(pull.number) for c in t["comments"]
    )
    assert run(host.list_comments(Target("pull", pull.number))) == []


def test_a_create_stored_before_a_5xx_is_reconciled_not_reposted(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    pull = fake.seed_pull("pair/5xx")
    target = Target("pull", pull)
    marker = make_marker("synthesis", 1, pr=pull)
    run(host.identity())
    fake.fail_after_store("POST", r"/threads$", 500)
    result = run(host.upsert_comment(target, marker, "once"))
    assert result.outcome is Upserted.CREATED
    assert fake.count("POST", r"/threads$") == 1, "a failed create is never retried blindly"
    assert len(fake.threads(pull)) == 1


def test_a_create_that_failed_is_reported_not_retried(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    number = fake.seed_card("Down", "body")
    fake.fail_next("POST", r"/comments$", 503)
    with pytest.raises(HostUnavailable):
        run(host.upsert_comment(Target("card", number), make_marker("status", number), "x"))
    assert fake.count("POST", r"/comments$") == 1
    assert fake.wi_comments(number) == []


def test_reactions_where_azure_devops_has_them(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    number = fake.seed_card("React", "body")
    card_comment = fake.comment_as(fake.human.author, Target("card", number), "/pair go")
    run(host.react(Target("card", number), card_comment, "+1"))
    run(host.react(Target("card", number), card_comment, "confused"))
    assert [r[2] for r in fake.reactions] == ["like", "confused"]
    pull = fake.seed_pull("pair/like")
    pr_comment = fake.comment_as(fake.human.author, Target("pull", pull), "/pair go")
    run(host.react(Target("pull", pull), pr_comment, "+1"))
    assert len(fake.likes) == 1
    for target, comment_id, reaction in [
        (Target("pull", pull), pr_comment, "eyes"),
        (Target("card", number), card_comment, "rocket"),
        (Target("card", number), None, "+1"),
    ]:
        with pytest.raises(Unsupported) as unsupported:
            run(host.react(target, comment_id, reaction))  # type: ignore[arg-type]
        assert unsupported.value.capability == "react"


# -- pulls, statuses, merges ----------------------------------------------------------------------


def test_open_pull_creates_a_draft_with_a_bounded_description(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    head = fake.commit("pair/new", {"f.txt": "f\n"}, "feature")
    pull = run(host.open_pull("pair/new", "main", "Title", "x" * 5000))
    stored = fake.pull(pull.number)
    assert (pull.head_sha, pull.draft, pull.state) == (head, True, "open")
    assert len(stored.description) <= 4000
    assert "truncated by pairbot" in stored.description
    again = run(host.open_pull("pair/new", "main", "Title", "Body"))
    assert again.number == pull.number
    assert pull.url.endswith(f"/_git/{REPO}/pullrequest/{pull.number}")
    with pytest.raises(NotFound):
        run(host.open_pull("pair/missing", "main", "Title", "Body"))


def test_a_pull_request_stored_before_a_5xx_is_returned_not_reopened(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    fake.commit("pair/flaky", {"f.txt": "f\n"}, "feature")
    fake.fail_after_store("POST", r"/pullRequests$", 502)
    pull = run(host.open_pull("pair/flaky", "main", "Title", "Body"))
    assert fake.count("POST", r"/pullRequests$") == 1
    assert [pr.id for pr in fake.pulls() if pr.source == "pair/flaky"] == [pull.number]
    assert run(host.open_pull("pair/flaky", "main", "Title", "Body")).number == pull.number


def test_a_merged_pull_cannot_be_abandoned(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    pull = fake.seed_pull("pair/done")
    run(host.merge(pull, fake.head_of(pull), "squash"))
    with pytest.raises(Conflict):
        run(host.close(Target("pull", pull)))
    assert fake.pull(pull).status == "completed"


def test_get_pull_maps_azure_fields(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    pull = fake.seed_pull("pair/fields", draft=True)
    fake.add_reviewer(pull, fake.human)
    fake.set_merge_status(pull, "conflicts")
    got = run(host.get_pull(pull))
    assert (got.draft, got.mergeable, got.assignees) == (True, False, (fake.human.author.login,))
    fake.set_merge_status(pull, "queued")
    assert run(host.get_pull(pull)).mergeable is None
    run(host.close(Target("pull", pull)))
    assert run(host.get_pull(pull)).state == "closed"
    assert fake.pull(pull).status == "abandoned"


def test_review_status_is_a_pr_status_on_the_heads_iteration(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    pull = fake.seed_pull("pair/iteration")
    first = fake.head_of(pull)
    run(host.set_review_status(pull, first, "success", "reviewed by pairbot"))
    (status,) = fake.pull(pull).statuses
    assert status["iterationId"] == 1
    assert status["context"] == {"genre": "pair", "name": "pair-review"}
    assert (status["state"], status["description"]) == ("succeeded", "reviewed by pairbot")

    writes = fake.writes()
    run(host.set_review_status(pull, first, "success", "reviewed by pairbot"))
    assert fake.writes() == writes, "re-setting the same status writes nothing"

    second = fake.move_head(pull)
    assert run(host.get_review_status(pull, second)) is None
    run(host.set_review_status(pull, second, "failure", "changes requested"))
    assert [s["iterationId"] for s in fake.pull(pull).statuses] == [1, 2]
    on_first = run(host.get_review_status(pull, first))
    assert on_first is not None
    assert on_first.state == "success"

    with pytest.raises(Conflict):
        run(host.set_review_status(pull, "f" * 40, "success", "never pushed"))


def test_squash_merge_payload_pins_the_reviewed_head(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    pull = fake.seed_pull("pair/squash-payload", draft=True)
    head = fake.head_of(pull)
    result = run(host.merge(pull, head, "squash"))
    stored = fake.pull(pull)
    # transitionWorkItems: Azure DevOps' "Complete associated work items after merging", on
    # by default (PAIR_AZURE_DEVOPS_TRANSITION_WORK_ITEMS).
    assert stored.completion == {"mergeStrategy": "squash", "transitionWorkItems": True}
    assert (result.merged, result.sha) == (True, stored.merge_commit)
    assert not stored.draft, "a draft is published before it is completed"
    parents = git(fake.repo, "rev-list", "--parents", "-n", "1", str(stored.merge_commit)).split()
    assert len(parents) == 2, "a squash is one commit with one parent"
    assert fake.branch_sha("main") == stored.merge_commit


def test_a_queued_completion_is_polled(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, clock: Clock
) -> None:
    fake.complete_async = True
    pull = fake.seed_pull("pair/queued")
    result = run(host.merge(pull, fake.head_of(pull), "squash"))
    assert result.merged
    assert result.sha == fake.pull(pull).merge_commit
    assert clock.sleeps == [1.0]


def test_a_completion_still_queued_after_the_polls_is_not_merged_and_not_requested_twice(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock
) -> None:
    host = make_host(fake, cache_dir, clock, merge_polls=2)
    fake.complete_async, fake.queued_reads = True, 3
    pull = fake.seed_pull("pair/slow")
    head = fake.head_of(pull)
    assert run(host.merge(pull, head, "squash")) == MergeResult(merged=False)
    assert fake.pull(pull).status == "active"
    again = run(host.merge(pull, head, "squash"))  # the completion finishes meanwhile
    assert (again.merged, again.sha) == (True, fake.pull(pull).merge_commit)
    assert fake.count("PATCH", rf"pullRequests/{pull}$") == 1


def test_a_merge_that_fails_after_queueing_is_a_conflict(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock
) -> None:
    host = make_host(fake, cache_dir, clock, merge_polls=2)
    pull = fake.seed_pull("pair/conflicted")
    fake.commit("main", {"pair/conflicted.txt": "main's version\n"}, "conflicting change")
    with pytest.raises(Conflict):
        run(host.merge(pull, fake.head_of(pull), "merge"))
    assert fake.pull(pull).status == "active"


def test_merge_method_merge_is_no_fast_forward(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    pull = fake.seed_pull("pair/noff")
    run(host.merge(pull, fake.head_of(pull), "merge"))
    stored = fake.pull(pull)
    assert stored.completion == {"mergeStrategy": "noFastForward", "transitionWorkItems": True}
    parents = git(fake.repo, "rev-list", "--parents", "-n", "1", str(stored.merge_commit)).split()
    assert parents[2] == fake.head_of(pull)


def test_rebase_is_unsupported_without_a_request(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    pull = fake.seed_pull("pair/rebase")
    before = len(fake.requests)
    with pytest.raises(Unsupported) as unsupported:
        run(host.merge(pull, fake.head_of(pull), "rebase"))
    assert unsupported.value.capability == "merge:rebase"
    assert len(fake.requests) == before


def test_permission_from_repository_acl(host: AzureDevOpsHost, fake: FakeAzureDevOps) -> None:
    assert run(host.permission(fake.human.author.login)) == "admin"
    assert run(host.permission(fake.pairbot.author.login)) == "write"
    assert run(host.permission(fake.bot.author.login)) == "read"
    assert run(host.permission("nobody@elsewhere.example")) == "none"


@pytest.mark.parametrize(
    ("bits", "level"),
    [
        pytest.param(0, "none", id="nothing"),
        pytest.param(READ, "read", id="read"),
        pytest.param(READ | 16384, "triage", id="pr-contribute"),
        pytest.param(CONTRIBUTE, "write", id="contribute"),
        pytest.param(CONTRIBUTE | 2048, "maintain", id="edit-policies"),
        pytest.param(CONTRIBUTE | 32768, "maintain", id="bypass-pr-policy"),
        pytest.param(ADMIN, "admin", id="administer"),
        pytest.param(8192, "admin", id="manage-permissions"),
    ],
)
def test_permission_from_bits(bits: int, level: str) -> None:
    assert permission_from_bits(bits) == level


# -- push -----------------------------------------------------------------------------------------


def test_push_command_keeps_the_token_out_of_argv() -> None:
    argv, env = push_command(
        "https://fabrikam@dev.azure.com/fabrikam/P/_git/r",
        "pair/1",
        TOKEN,
        force=True,
        base_env={"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "c"},
    )
    assert not any(TOKEN in arg or BASIC in arg for arg in argv)
    assert argv[-2:] == [
        "https://fabrikam@dev.azure.com/fabrikam/P/_git/r",
        "refs/heads/pair/1:refs/heads/pair/1",
    ]
    assert "--force" in argv
    assert env["GIT_CONFIG_COUNT"] == "2"
    assert env["GIT_CONFIG_KEY_0"] == "a.b", "existing entries are kept"
    assert env["GIT_CONFIG_KEY_1"] == "http.https://dev.azure.com/.extraheader"
    assert env["GIT_CONFIG_VALUE_1"] == f"Authorization: Basic {BASIC}"
    assert TOKEN not in json.dumps({k: v for k, v in env.items() if k != "GIT_CONFIG_VALUE_1"})


def test_push_branch_over_http_with_the_header(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, tmp_path: Path
) -> None:
    pull = fake.seed_pull("pair/push")
    work = tmp_path / "work"
    git(tmp_path, "clone", "--quiet", "--branch", "pair/push", str(fake.repo), work.name)
    (work / "more.txt").write_text("more\n")
    git(work, "add", "more.txt")
    git(work, "commit", "--quiet", "-m", "more")
    local = git(work, "rev-parse", "HEAD")
    assert run(host.push_branch(work, "pair/push")) == local
    assert fake.branch_sha("pair/push") == local
    assert fake.head_of(pull) == local, "a push to a PR's branch is a new iteration"
    assert len(fake.pull(pull).iterations) == 2
    pushes = [r for r in fake.requests if "/_git/" in r.path]
    assert pushes
    assert all(r.status != 401 for r in pushes), "the header authenticated every git request"
    with pytest.raises(NotFound):
        run(host.push_branch(work, "pair/absent"))


def test_push_branch_refusals(
    fake: FakeAzureDevOps, cache_dir: Path, clock: Clock, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    git(tmp_path, "clone", "--quiet", str(fake.repo), work.name)
    git(work, "switch", "--quiet", "-c", "pair/race")
    (work / "a.txt").write_text("a\n")
    git(work, "add", "a.txt")
    git(work, "commit", "--quiet", "-m", "a")
    host = make_host(fake, cache_dir, clock)
    run(host.identity())  # repository lookups work with the right token …
    fake.commit("pair/race", {"b.txt": "b\n"}, "someone else")
    with pytest.raises(Conflict):
        run(host.push_branch(work, "pair/race"))
    assert run(host.push_branch(work, "pair/race", force=True)) == git(work, "rev-parse", "HEAD")

    # The repository is known (looked up once per host); then the token is revoked: git is
    # refused, and says so without the token.
    fake.token = TOKEN.upper()
    with pytest.raises(Forbidden) as denied:
        run(host.push_branch(work, "pair/race", force=True))
    assert "could not read Username" in str(denied.value)
    assert TOKEN not in str(denied.value)
    assert BASIC not in str(denied.value)


# -- rate limits and transport --------------------------------------------------------------------


def test_retry_after_on_a_200_delays_the_next_call(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, clock: Clock
) -> None:
    pull = fake.seed_pull("pair/delay")
    run(host.get_pull(pull))
    fake.delay_next(2.5, pattern=r"pullRequests/\d+$")
    run(host.get_pull(pull))
    assert clock.sleeps == []
    before = len(fake.requests)
    run(host.get_pull(pull))
    assert clock.sleeps == [2.5]
    assert clock.requests_at_sleep == [before], "no request inside the Retry-After window"
    run(host.get_pull(pull))
    assert clock.sleeps == [2.5], "the window closed"


def test_retry_after_as_seconds_or_an_http_date() -> None:
    assert retry_after_seconds("2.5", 0.0) == 2.5
    assert retry_after_seconds("-3", 0.0) == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0) == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:30 GMT", 1445412480.0) == 30.0
    assert retry_after_seconds("soon", 0.0) is None
    assert retry_after_seconds(None, 0.0) is None


def test_a_long_retry_after_raises_rate_limited(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, clock: Clock
) -> None:
    pull = fake.seed_pull("pair/long")
    run(host.get_pull(pull))
    fake.delay_next(600, pattern=r"pullRequests/\d+$")
    run(host.get_pull(pull))  # answered, with a 10-minute Retry-After
    before = len(fake.requests)
    with pytest.raises(RateLimited) as limited:
        run(host.get_pull(pull))
    assert limited.value.retry_after == pytest.approx(600)
    assert len(fake.requests) == before
    assert clock.sleeps == []


def test_429_is_waited_out_on_reads_and_raised_on_writes(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, clock: Clock
) -> None:
    pull = fake.seed_pull("pair/429")
    run(host.get_pull(pull))
    fake.fail_next("GET", r"pullRequests/\d+$", 429, retry_after=3)
    assert run(host.get_pull(pull)).number == pull
    assert clock.sleeps == [3.0]
    fake.fail_next("POST", r"/threads$", 429, retry_after=4)
    with pytest.raises(RateLimited) as limited:
        run(host.upsert_comment(Target("pull", pull), make_marker("status", 1, pr=pull), "x"))
    assert limited.value.retry_after == 4.0
    assert fake.count("POST", r"/threads$") == 1


def test_5xx_reads_are_retried_a_bounded_number_of_times(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, clock: Clock
) -> None:
    pull = fake.seed_pull("pair/503")
    run(host.get_pull(pull))
    fake.fail_next("GET", r"pullRequests/\d+$", 503, times=1)
    assert run(host.get_pull(pull)).number == pull
    fake.fail_next("GET", r"pullRequests/\d+$", 503, times=10)
    attempts = fake.count("GET", r"pullRequests/\d+$")
    with pytest.raises(HostUnavailable):
        run(host.get_pull(pull))
    assert fake.count("GET", r"pullRequests/\d+$") - attempts == 3
    assert clock.sleeps == [1.0, 1.0, 2.0]


def test_discovery_goes_through_the_same_transport(
    host: AzureDevOpsHost, fake: FakeAzureDevOps, clock: Clock
) -> None:
    # The SDK's own resource-area client is reached through the credentials: no msrest retries
    # with real sleeps, the injected sleep instead, and its Retry-After is honoured.
    fake.fail_next("GET", r"/_apis/ResourceAreas$", 503)
    fake.delay_next(1.5, pattern=r"/_apis/ResourceAreas$")
    pull = fake.seed_pull("pair/areas")
    assert run(host.get_pull(pull)).number == pull
    assert fake.count("GET", r"/_apis/ResourceAreas$") == 2
    assert clock.sleeps == [1.0, 1.5]
    # The 1.5 s window opened by discovery held before the very next request, in the same call.
    delayed = max(i for i, r in enumerate(fake.requests) if r.path.endswith("ResourceAreas"))
    assert clock.requests_at_sleep[1] == delayed + 1


def test_an_unreachable_server_is_host_unavailable(cache_dir: Path, tmp_path: Path) -> None:
    clock = Clock()
    with running(TOKEN, tmp_path / "gone") as gone:
        url = gone.base_url
        host = AzureDevOpsHost(
            url, PROJECT, REPO, TOKEN, cache_dir=cache_dir, sleep=clock.sleep, clock=clock
        )
        run(host.identity())
    with pytest.raises(HostUnavailable) as down:
        run(host.get_pull(1))
    assert "cannot reach" in str(down.value)


@pytest.mark.parametrize(
    ("type_key", "message", "status", "expected"),
    [
        pytest.param("GitPullRequestNotFoundException", "", 404, NotFound, id="pr-key"),
        pytest.param(None, "TF401232: Work item 9 does not exist", None, NotFound, id="tf-code"),
        pytest.param("GitPullRequestStaleException", "", 409, Conflict, id="stale"),
        pytest.param(None, "TF400733: Request was blocked", None, RateLimited, id="blocked"),
        pytest.param(None, "whatever", 429, RateLimited, id="429"),
        pytest.param(None, "TF401027: You need the Git 'Contribute'", 403, Forbidden, id="perm"),
        pytest.param(None, "", 401, Forbidden, id="401"),
        pytest.param(None, "", 404, NotFound, id="404"),
        pytest.param(None, "", 412, Conflict, id="412"),
        pytest.param(None, "", 502, HostUnavailable, id="5xx"),
        pytest.param("InvalidArgumentValueException", "bad", 400, HostError, id="400"),
    ],
)
def test_sdk_errors_are_classified(
    type_key: str | None, message: str, status: int | None, expected: type[HostError]
) -> None:
    assert classify(type_key, message, status, auth=False, transport=False) is expected


def test_unit_helpers() -> None:
    assert split_tags("a; b ;; c") == ("a", "b", "c")
    assert split_tags(None) == ()


# -- parity: branch-level permission, bots ---------------------------------------------------------


def test_a_deny_on_the_default_branch_wins_over_an_allow_on_the_repository(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    maintainer = fake.human.author
    assert run(host.permission(maintainer.login)) == "admin"
    # `main` locked for the maintainer: Contribute, Administer, Manage permissions denied there.
    fake.set_branch_ace(maintainer, "main", deny=4 | 1 | 8192)
    assert run(host.permission(maintainer.login)) == "triage"  # PR contribute is left
    # The branch token is the one Microsoft documents: hex UTF-16LE segments under refs/heads.
    token = f"repoV2/{PROJECT_ID}/{REPO_ID}/refs/heads/6d00610069006e00"
    asked = [unquote(s.query) for s in fake.requests if "AccessControlLists" in s.path]
    assert sum(f"token={token}" in q for q in asked) == 2


def test_an_empty_repository_has_no_branch_to_override_the_repository(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    fake.default_branch = None
    fake.set_branch_ace(fake.human.author, "main", deny=4 | 1 | 8192)
    assert run(host.permission(fake.human.author.login)) == "admin"
    assert sum("AccessControlLists" in s.path for s in fake.requests) == 1


def test_an_allow_on_the_default_branch_grants_what_the_repository_did_not(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    reader = Author("reader@fabrikam.example", "0d6c5a8e-1f2b-4c3d-9e8f-7a6b5c4d3e2f")
    fake.grant(reader, READ)
    assert run(host.permission(reader.login)) == "read"
    fake.set_branch_ace(reader, "main", allow=4)
    assert run(host.permission(reader.login)) == "write"


@pytest.mark.parametrize(
    ("repo", "branch", "expected"),
    [
        pytest.param((4, 0), (0, 4), 0, id="branch-deny-wins"),
        pytest.param((0, 4), (4, 0), 4, id="branch-allow-overrides-repo-deny"),
        pytest.param((4 | 2, 0), (0, 0), 6, id="no-branch-entry"),
        pytest.param((1, 0), (0, 4), 1, id="deny-only-removes-its-bits"),
    ],
)
def test_branch_bits(repo: tuple[int, int], branch: tuple[int, int], expected: int) -> None:
    assert branch_bits(*repo, *branch) == expected


def test_branch_tokens_encode_each_segment() -> None:
    assert branch_token("p", "r", "refs/heads/master") == (
        "repoV2/p/r/refs/heads/6d0061007300740065007200"
    )
    assert branch_token("p", "r", "release/1") == (
        "repoV2/p/r/refs/heads/720065006c006500610073006500/3100"
    )


def test_comments_by_service_identities_are_from_bots(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    number = fake.seed_card("Bots", "body")
    fake.comment_as(fake.bot.author, Target("card", number), "/pair implement")
    fake.comment_as(fake.human.author, Target("card", number), "/pair implement")
    authors = [c.author for c in run(host.list_comments(Target("card", number)))]
    assert [(a.login, a.is_bot) for a in authors] == [
        (fake.bot.author.login, True),
        (fake.human.author.login, False),
    ]


@pytest.mark.parametrize(
    ("ref", "is_bot"),
    [
        pytest.param({"displayName": "Jamal", "descriptor": "aad.MmI"}, False, id="person"),
        pytest.param({"displayName": "Build", "descriptor": "svc.MmI"}, True, id="svc"),
        pytest.param({"displayName": "App", "descriptor": "aadsp.MmI"}, True, id="aadsp"),
        pytest.param({"displayName": "S2S", "descriptor": "s2s.MmI"}, True, id="s2s"),
        pytest.param({"displayName": "[P]\\Team", "isContainer": True}, True, id="group"),
        pytest.param(
            {"displayName": "Project Collection Build Service (fabrikam)"}, True, id="pcbs"
        ),
    ],
)
def test_author_from_marks_service_identities(ref: dict[str, Any], is_bot: bool) -> None:
    assert author_from({"uniqueName": "x", "id": "1", **ref}).is_bot is is_bot


# -- outside evidence -----------------------------------------------------------------------------


def test_head_checks_read_other_services_statuses_on_the_heads_iterations(
    fake: FakeAzureDevOps, host: AzureDevOpsHost
) -> None:
    pull = fake.seed_pull("pair/evidence")
    head = fake.head_of(pull)
    run(host.set_review_status(pull, head, "success", "converged"))
    fake.post_status(pull, "build", "pending")
    fake.post_status(pull, "build", "failed", description="2 tests failed")  # newer, same name
    fake.post_status(pull, "sonar", "notApplicable", genre="quality")
    fake.post_status(pull, "deploy", "error", genre=None)
    fake.post_status(pull, "scan", "notSet")
    checks = {c.name: (c.state, c.summary, c.required) for c in run(host.head_checks(pull, head))}
    assert checks == {
        "ci/build": ("failure", "2 tests failed", False),
        "quality/sonar": ("skipped", "", False),
        "deploy": ("failure", "", False),
        "ci/scan": ("pending", "", False),
    }
    moved = fake.move_head(pull)
    assert run(host.head_checks(pull, moved)) == []
    fake.post_status(pull, "build", "succeeded")
    assert [(c.name, c.state) for c in run(host.head_checks(pull, moved))] == [
        ("ci/build", "success")
    ]


def test_head_checks_read_build_policies_on_the_prs_current_head(
    fake: FakeAzureDevOps, host: AzureDevOpsHost
) -> None:
    pull = fake.seed_pull("pair/builds")
    head = fake.head_of(pull)
    fake.evaluate_build(pull, "CI build", "rejected")
    fake.evaluate_build(pull, "Nightly", "running", blocking=False)
    fake.evaluate_build(pull, "Old build", "approved", not_current=True)
    fake.evaluate_build(
        pull, "Reviewers", "approved", policy_type="fa4e907d-c16b-4a4c-9dfa-4906e5d171dd"
    )
    builds = [c for c in run(host.head_checks(pull, head)) if c.source == "build"]
    assert [(c.name, c.state, c.required) for c in builds] == [
        ("CI build", "failure", True),
        ("Nightly", "pending", False),
        ("Old build", "pending", True),
    ]
    assert builds[0].url.endswith("/_build/results?buildId=" + builds[0].url.rsplit("=", 1)[1])
    assert "earlier head" in builds[2].summary
    fake.evaluate_build(pull, "CI build", "approved")
    again = {c.name: c.state for c in run(host.head_checks(pull, head)) if c.source == "build"}
    assert again["CI build"] == "success"
    moved = fake.move_head(pull)
    assert [c for c in run(host.head_checks(pull, head)) if c.source == "build"] == [], (
        "the evaluations are the PR's current head's, not an older one's"
    )
    assert {c.name for c in run(host.head_checks(pull, moved))} == {
        "CI build",
        "Nightly",
        "Old build",
    }


def test_merge_methods_are_the_completions_pairbot_makes(host: AzureDevOpsHost) -> None:
    # No branch policy: squash and merge (noFastForward); a rebase completion would rewrite the
    # reviewed commits. With a policy: tests/hosts/test_azure_merge_policy.py.
    assert asyncio.run(host.merge_methods()) == {"squash", "merge"}
