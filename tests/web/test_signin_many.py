"""A user who can read thousands of repositories signs in and sees their cards: the list is
held by the server (the cookie carries a reference and stays small), read through GitHub's
pages (`per_page=100` and the `Link` header's `rel="next"`), and kept no longer than the
sign-in TTL. The real app under uvicorn on loopback; GitHub's OAuth and API faked at the HTTP
edge (tests/support/fake_github_oauth.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.web.pages.read import Local, LocalCard
from app.web.sessions import COOKIE
from tests.support.fake_github_oauth import (
    FakeGitHubOAuth,
    FakeInstallation,
)
from tests.web.conftest import Served
from tests.web.test_signin import (
    PRIVATE,
    READABLE,
    Browser,
    WallClock,
    session_csrf,
    sign_in,
    signin_server,
)

MANY = 5_000


def card(repo: str, number: int, title: str) -> LocalCard:
    key = f"card-{number}"
    records = (
        {"kind": "cycle", "key": key, "at": "2026-12-01T10:00:00+00:00",
         "data": {"event": "bound", "card": number, "run": "r1"}},
        {"kind": "cycle", "key": key, "at": "2026-12-01T10:00:01+00:00",
         "data": {"event": "snapshot", "card": number, "title": title, "comments": []}},
    )  # fmt: skip
    return LocalCard(repo, key, records, {})


@pytest.fixture
def oauth() -> FakeGitHubOAuth:
    fake = FakeGitHubOAuth()
    names = [f"big-org/repo-{n:05d}" for n in range(MANY - 1)]
    # Two installations, both longer than a page; the readable card's repository is on the last
    # page of the second, so every page has to be read to find it.
    fake.user(
        "mona",
        [
            FakeInstallation(7, "big-org", names[:3_000]),
            FakeInstallation(8, "octo", [*names[3_000:], READABLE]),
        ],
    )
    return fake


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@pytest.fixture
def server(tmp_path: Path, oauth: FakeGitHubOAuth, clock: WallClock) -> Iterator[Served]:
    cards = (card(READABLE, 7, "Readable work"), card(PRIVATE, 3, "Secret plans"))
    with signin_server(tmp_path, oauth, clock, local=lambda: Local(cards=cards)) as running:
        yield running


def test_a_user_who_reads_thousands_of_repositories_signs_in_and_sees_their_cards(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    callback = sign_in(browser, oauth)
    assert (callback.status_code, callback.headers["location"]) == (303, "/")
    [line] = [c for c in callback.headers.get_list("set-cookie") if c.startswith(f"{COOKIE}=")]
    assert len(line) < 1_000  # a reference to the list, not the list
    assert "HttpOnly" in line and "SameSite=Lax" in line and "Secure" in line
    assert "repo-0" not in line
    cards = browser.get("/api/v1/cards").json()["cards"]
    assert [(c["repo"], c["number"]) for c in cards] == [(READABLE, 7)]
    page = browser.get("/")
    assert "#7 Readable work" in page.text and PRIVATE not in page.text
    assert browser.get(f"/cards/{PRIVATE}/3").status_code == 404
    jobs = browser.get("/jobs").text
    assert READABLE in jobs and PRIVATE not in jobs
    pages = [p for _, p in oauth.log if "/repositories" in p]
    assert len(pages) == 30 + 20  # every page of both installations, 100 at a time
    assert oauth.unexpected == []


def test_a_held_list_ends_with_its_sign_out_and_with_its_ttl(
    server: Served, oauth: FakeGitHubOAuth, clock: WallClock
) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    assert browser.get("/").status_code == 200
    service = next(m.kwargs["service"] for m in server.app.user_middleware)
    assert len(service.held) == 1
    kept = browser.cookie
    signed_out = browser.post("/signout", headers={"X-CSRF-Token": session_csrf(server, browser)})
    assert signed_out.status_code == 303 and len(service.held) == 0
    replayed = Browser(server.url, cookie=kept)  # the old cookie, kept by someone
    assert replayed.get("/api/v1/cards").status_code == 401
    sign_in(browser, oauth)
    assert browser.get("/api/v1/cards").status_code == 200
    clock.now += 601
    stale = browser.get("/")
    assert (stale.status_code, stale.headers["location"]) == (303, "/signin?next=%2F&expired=1")
