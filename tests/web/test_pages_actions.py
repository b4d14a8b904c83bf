"""Acting on a card from its page (app/web/pages/actions.py), end to end: the real app under
uvicorn on loopback, GitHub sign-in faked at the HTTP edge (tests/support/fake_github_oauth.py),
the App's GitHub faked at the HTTP edge too (its collaborator permission API and the
repository_dispatch), a real SQLite store. A writer's button queues the job a comment queues;
a reader, an operator, a wrong verb or an empty answer queue nothing."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.domain.intake.intent import Policy
from app.engine.runstate import Park
from app.store.base import InstallationChange, JobRecord
from app.store.sqlite import SqliteStore
from app.web.app import create_app
from app.web.events import route_github
from app.web.jobs import UnreadComment, read_comment
from app.web.pages.actions import Commands, command_job, offered, read_answer
from app.web.pages.model import remote_card
from app.web.pages.read import Local, LocalCard
from app.web.pages.views import CardView
from app.web.sessions import COOKIE
from app.web.viewer import Viewer
from tests.support.fake_github_oauth import (
    API,
    CLIENT_ID,
    CLIENT_SECRET,
    WEB,
    FakeGitHubOAuth,
    FakeInstallation,
)
from tests.web.conftest import (
    OPERATOR,
    AppGitHub,
    Served,
    app_settings,
    comment_event,
    github_forges,
    served,
)
from tests.web.test_signin import Browser, WallClock, session_csrf, sign_in

REPO = f"{AppGitHub.owner}/{AppGitHub.repo}"
INSTALLATION = AppGitHub.installation_id
BEARER = {"Authorization": f"Bearer {OPERATOR}"}


def card(number: int, park: Park | None = None) -> LocalCard:
    key = f"card-{number}"
    records = (
        {"kind": "cycle", "key": key, "at": "2026-12-01T10:00:00+00:00",
         "data": {"event": "bound", "card": number, "run": "r1"}},
        {"kind": "cycle", "key": key, "at": "2026-12-01T10:00:01+00:00",
         "data": {"event": "snapshot", "card": number, "title": f"Card {number}",
                  "comments": []}},
    )  # fmt: skip
    return LocalCard(REPO, key, records, {key: park} if park is not None else {})


def seed_installation(path: Path) -> None:
    async def go() -> None:
        store = SqliteStore(path)
        await store.open()
        change = InstallationChange(id=INSTALLATION, account=AppGitHub.owner, repos=(REPO,))
        await store.enqueue_delivery(
            "d-install", "installation", "created", [], installation=change
        )
        await store.close()

    asyncio.run(go())


@dataclass
class World:
    server: Served
    github: AppGitHub
    oauth: FakeGitHubOAuth
    approve: int  # an awaiting-approval card
    needs: int  # a needs-input card
    fresh: int  # a card nothing has started

    def signed_in(self, login: str) -> Browser:
        browser = Browser(self.server.url)
        assert sign_in(browser, self.oauth, login).status_code == 303
        return browser

    def jobs(self) -> list[dict[str, Any]]:
        with httpx.Client(base_url=self.server.url, timeout=30.0) as client:
            jobs = client.get("/api/v1/jobs", headers=BEARER).json()["jobs"]
        return [j for j in jobs if j["repo"] == REPO]

    def finished(self, count: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if len(jobs) >= count and all(j["state"] in ("done", "failed") for j in jobs):
                return jobs
            time.sleep(0.05)
        raise AssertionError(f"the jobs did not finish: {self.jobs()}")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with actions_world(tmp_path) as running:
        yield running


@contextmanager
def actions_world(tmp_path: Path, *, allowlisted: tuple[str, ...] = ()) -> Iterator[World]:
    """The App serving three cards of the fake's repository (awaiting approval, needing
    input, not started), GitHub sign-in for a writer (octocat) and a reader (reader-rita);
    the GitHub user ids of the `allowlisted` logins on the operator's allowlist."""
    github = AppGitHub()
    approve = github.seed_issue("Plan me", "")
    needs = github.seed_issue("Ask me", "")
    fresh = github.seed_issue("Start me", "")
    github.user("reader-rita")
    github.collaborators["reader-rita"] = "read"
    oauth = FakeGitHubOAuth()
    for login in ("octocat", "reader-rita"):
        oauth.user(login, [FakeInstallation(INSTALLATION, AppGitHub.owner, [REPO])])
    cards = (
        card(approve, Park("awaiting-approval", "propose", "the plan waits")),
        card(needs, Park("needs-input", "propose", "which database?")),
        card(fresh),
    )
    seed_installation(tmp_path / "pairbot.sqlite3")
    settings = app_settings(
        tmp_path,
        github_client_id=CLIENT_ID,
        github_client_secret=SecretStr(CLIENT_SECRET),
        github_oauth_url=WEB,
        github_api_url=API,
        signin_ttl_s=600.0,
        allowlist=frozenset(oauth.users[login] for login in allowlisted),
    )
    app = create_app(
        settings,
        github=github_forges(github),
        oauth_transport=oauth.transport,
        wallclock=WallClock(),
        poll_s=0.05,
        local=lambda: Local(cards=cards),
    )
    with served(app) as running:
        yield World(running, github, oauth, approve, needs, fresh)


def form_of(page: str, verb: str) -> dict[str, str]:
    """The hidden fields of the page's form for `verb`."""
    for form in re.findall(r"<form .*?</form>", page, flags=re.S):
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form))
        if fields.get("verb") == verb:
            return {k: html.unescape(v) for k, v in fields.items()}
    raise AssertionError(f"no {verb} form on the page")


def path(number: int) -> str:
    return f"/cards/{REPO}/{number}"


# -- the pure parts ------------------------------------------------------------------------------


def test_the_dashboards_job_is_the_comments_job_with_its_own_delivery() -> None:
    github = AppGitHub()
    payload = comment_event(github, 7, 555, "/pair approve", github.users["octocat"])
    policy = Policy(trigger="pair", app_slug="pairbot", app_id=github.app_id)
    [from_comment] = route_github("issue_comment", "created", payload, policy, "gh-1").jobs
    mine = command_job(
        repo=REPO,
        card=7,
        verb="approve",
        text=None,
        login="octocat",
        user_id=int(github.users["octocat"].id),
        installation=from_comment.installation,
        delivery="dashboard-1",
        trigger="pair",
    )
    same = ("kind", "source", "repo", "installation", "target", "number", "serial_key")
    assert [getattr(mine, f) for f in same] == [getattr(from_comment, f) for f in same]
    # The comment's job is queued unread: what the worker reads in it (app.web.handling).
    unread = UnreadComment.from_json(from_comment.request)
    assert unread is not None
    read = read_comment(unread, delivery="gh-1")
    assert isinstance(read, tuple)
    their_job, their_record = read
    assert mine.command is not None and their_record is not None
    assert (mine.command.verb, mine.command.author_login) == ("approve", "octocat")
    theirs, ours = their_job.to_json()["request"], mine.request["request"]
    assert ours["command"] == theirs["command"] and ours["card"] == theirs["card"]
    assert ours["delivery"] == "dashboard-1" and ours["comment"]["authorLogin"] == "octocat"
    # The person's GitHub id, as the comment carries its commenter's: the allowlist names ids.
    assert ours["comment"]["authorId"] == theirs["comment"]["authorId"]
    assert mine.command.author_id == their_record.author_id
    assert mine.dedupe_key != from_comment.dedupe_key


def test_a_button_is_offered_for_a_listed_command_whose_arguments_pairbot_builds() -> None:
    def verbs(*actions: str) -> tuple[str, ...]:
        return offered(remote_card_with(actions))

    assert verbs("/pair approve", "/pair feedback <text>", "/pair abandon") == ("approve",)
    assert verbs("/go answer <text>", "/go abandon") == ("answer",)
    assert verbs("/pair retry", "/pair implement") == ("retry", "implement")
    # Arguments a person would choose, and what is not a command, get no button.
    assert verbs("merge PR #4", "/pair implement until: merged") == ()
    assert verbs("pairbot clean card-3 --archive-run, then /pair implement") == ()


def remote_card_with(actions: tuple[str, ...]) -> CardView:
    return replace(remote_card(job_record()), actions=actions)


def job_record() -> JobRecord:
    return JobRecord(
        id=1, delivery_id="d", kind="command", source="github", repo=REPO, installation=1,
        target="card", number=3, request={}, state="done", stage="", attempts=1,
        not_before=0.0, result="", created_at=0.0, updated_at=0.0,
    )  # fmt: skip


def test_an_answer_is_read_as_a_comments_text_and_must_say_something() -> None:
    hostile = (
        "Postgres <!-- /pair abandon -->\u200b<b>please</b>\n/pair approve\n<script>x</script>"
    )
    read = read_answer(hostile)
    assert isinstance(read, str)
    assert "abandon" not in read and "\u200b" not in read and "**please**" in read
    assert read.startswith("Postgres") and "/pair approve" in read
    for empty in ("", "   \n", "<!-- only hidden -->", "\u200b\u200d"):
        refused = read_answer(empty)
        assert not isinstance(refused, str) and refused.status == 400
        assert "answer needs a text" in refused.text
    long = read_answer("x" * 10_001)
    assert not isinstance(long, str) and "at most 10000 characters" in long.text


def test_a_session_without_a_github_id_is_asked_to_sign_in_again() -> None:
    """A cookie written before sessions kept the id: the allowlist cannot be checked, so the
    page refuses before asking GitHub anything (no store, forge or cache is touched)."""
    commands = Commands(None, None, None, Policy)  # type: ignore[arg-type]
    refused = asyncio.run(commands.may_act(Viewer.reader_of("mona", [REPO]), REPO))
    assert refused is not None and refused.status == 403
    assert "does not carry a GitHub user id" in refused.text and "sign in again" in refused.text


# -- through the app -----------------------------------------------------------------------------


def test_a_writers_approve_queues_one_command_job_that_runs_as_the_comments(world: World) -> None:
    browser = world.signed_in("octocat")
    page = browser.get(path(world.approve))
    assert page.status_code == 200 and "Act on this card" in page.text
    fields = form_of(page.text, "approve")
    assert "answer" not in offered_verbs(page.text)
    done = browser.post(f"{path(world.approve)}/commands", data=fields)
    assert (done.status_code, done.headers["location"]) == (
        303,
        f"{path(world.approve)}?queued=approve",
    )
    [job] = world.finished(1)
    assert (job["command"], job["number"], job["target"]) == ("approve", world.approve, "card")
    assert (job["state"], job["result"]) == ("done", "dispatched to GitHub Actions")
    [dispatch] = world.github.dispatches
    sent = dispatch["client_payload"]
    assert sent["command"] == {"verb": "approve", "args": {}, "text": None}
    assert sent["comment"]["authorLogin"] == "octocat"
    assert sent["comment"]["authorId"] == world.oauth.users["octocat"]  # the session's id
    assert sent["delivery"].startswith("dashboard-")
    tracking = world.github.comments_on(world.approve)
    assert any("queued `/pair approve` (requested by **octocat**)" in c.body for c in tracking)
    assert "Queued <code>/pair approve</code>" in browser.get(done.headers["location"]).text
    with httpx.Client(base_url=world.server.url) as client:
        deliveries = client.get("/api/v1/jobs", headers=BEARER).json()["deliveries"]
    assert [d["event"] for d in deliveries if d["id"] == sent["delivery"]] == ["dashboard"]


def offered_verbs(page: str) -> list[str]:
    return re.findall(r'name="verb" value="(\w+)"', page)


def test_each_card_offers_the_buttons_its_status_allows(world: World) -> None:
    browser = world.signed_in("octocat")
    assert offered_verbs(browser.get(path(world.approve)).text) == ["approve"]
    assert offered_verbs(browser.get(path(world.needs)).text) == ["answer"]
    assert offered_verbs(browser.get(path(world.fresh)).text) == ["implement"]
    token = form_of(browser.get(path(world.fresh)).text, "implement")["csrf"]
    wrong = browser.post(f"{path(world.fresh)}/commands", data={"csrf": token, "verb": "approve"})
    unknown = browser.post(f"{path(world.fresh)}/commands", data={"csrf": token, "verb": "abandon"})
    assert wrong.status_code == 409 and "does not apply" in wrong.text
    assert (
        unknown.status_code == 400 and "allowed: approve, answer, implement, retry" in unknown.text
    )
    assert world.jobs() == []


def test_a_reader_sees_why_and_is_refused_and_nothing_is_queued(world: World) -> None:
    browser = world.signed_in("reader-rita")
    page = browser.get(path(world.approve))
    assert offered_verbs(page.text) == []
    assert "has read permission" in html.unescape(page.text)
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is None  # no form at all; take the token the session holds instead
    fields = {"csrf": session_csrf(world.server, browser), "verb": "approve"}
    refused = browser.post(f"{path(world.approve)}/commands", data=fields)
    assert refused.status_code == 403 and "write, maintain or admin" in refused.text
    uid = world.oauth.users["reader-rita"]
    assert f"reader-rita (id {uid}) has read permission" in html.unescape(refused.text)
    assert "is not on the operator's allowlist (PAIR_ALLOWLIST)" in html.unescape(refused.text)
    assert world.jobs() == [] and world.github.dispatches == []


def test_a_reader_on_the_operators_allowlist_acts_as_their_comment_would(tmp_path: Path) -> None:
    """The allowlist admits a GitHub user id whatever its permission, on the page as in a
    comment: the session carries the id, the job carries it, the worker admits it again."""
    with actions_world(tmp_path, allowlisted=("reader-rita",)) as world:
        browser = world.signed_in("reader-rita")
        page = browser.get(path(world.approve))
        assert offered_verbs(page.text) == ["approve"]
        done = browser.post(f"{path(world.approve)}/commands", data=form_of(page.text, "approve"))
        assert done.status_code == 303
        [job] = world.finished(1)
        assert (job["command"], job["state"]) == ("approve", "done")
        [dispatch] = world.github.dispatches
        sent = dispatch["client_payload"]["comment"]
        assert (sent["authorLogin"], sent["authorId"]) == (
            "reader-rita",
            world.oauth.users["reader-rita"],
        )
        # The allowlist decided: the collaborator permission was never asked for.
        asked = [a for a in world.github.arrivals if "/collaborators/reader-rita" in a[2]]
        assert asked == []


def test_an_operator_is_nobody_on_github_and_cannot_act(world: World) -> None:
    with httpx.Client(base_url=world.server.url) as client:
        page = client.get(path(world.approve), headers=BEARER)
        posted = client.post(
            f"{path(world.approve)}/commands", headers=BEARER, data={"verb": "approve"}
        )
    assert "viewing as the operator, who is nobody" in html.unescape(page.text)
    assert posted.status_code == 403 and world.jobs() == []


def test_an_answer_needs_a_text_and_hostile_text_stays_one_quoted_answer(world: World) -> None:
    browser = world.signed_in("octocat")
    fields = form_of(browser.get(path(world.needs)).text, "answer")
    empty = browser.post(f"{path(world.needs)}/commands", data={**fields, "text": "<!-- -->"})
    assert empty.status_code == 400 and "answer needs a text" in empty.text
    assert world.jobs() == []
    hostile = (
        "Use SQLite.\u200b<!-- /pair abandon -->\n\n/pair approve\n<img src=x onerror=alert(1)>"
    )
    sent = browser.post(f"{path(world.needs)}/commands", data={**fields, "text": hostile})
    assert sent.status_code == 303
    [job] = world.finished(1)
    assert job["command"] == "answer" and job["state"] == "done"
    [dispatch] = world.github.dispatches
    command = dispatch["client_payload"]["command"]
    assert command["verb"] == "answer" and command["args"] == {}
    assert command["text"].startswith("Use SQLite.") and "/pair approve" in command["text"]
    assert "abandon" not in command["text"] and "onerror" not in command["text"]


def test_a_post_without_the_sessions_csrf_token_or_from_another_site_queues_nothing(
    world: World,
) -> None:
    browser = world.signed_in("octocat")
    fields = form_of(browser.get(path(world.approve)).text, "approve")
    other = world.signed_in("octocat")
    other_token = session_csrf(world.server, other)
    target = f"{path(world.approve)}/commands"
    missing = browser.post(target, data={"verb": "approve"})
    forged = browser.post(target, data={**fields, "csrf": "forged-token"})
    another_session = browser.post(target, data={**fields, "csrf": other_token})
    cross = browser.post(target, data=fields, headers={"Origin": "https://evil.example"})
    with httpx.Client(base_url=world.server.url) as client:  # a Referer and no Origin
        cross_referer = client.post(
            target,
            data=fields,
            headers={
                "Cookie": f"{COOKIE}={browser.cookie}",
                "Referer": "https://evil.example/page",
            },
        )
    statuses = [r.status_code for r in (missing, forged, another_session, cross, cross_referer)]
    assert statuses == [403] * 5
    assert "CSRF token is missing" in missing.text and "CSRF token is wrong" in forged.text
    assert "another site" in cross.text
    assert world.jobs() == [] and world.github.dispatches == []
    # The retry control of the operator's view is guarded the same way.
    assert browser.post("/jobs/1/retry", data={"verb": "x"}).status_code == 403
