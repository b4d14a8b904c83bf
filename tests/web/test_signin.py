"""Sign-in for the status pages, end to end: the real app under uvicorn on loopback, GitHub's
OAuth and API faked at the HTTP edge (tests/support/fake_github_oauth.py), a real SQLite store
seeded with the jobs of a repository the user can read and of one they cannot."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from app.store.base import InstallationChange, NewJob
from app.store.sqlite import SqliteStore
from app.web.app import create_app
from app.web.sessions import COOKIE
from tests.support.fake_github_oauth import (
    API,
    CLIENT_ID,
    CLIENT_SECRET,
    WEB,
    FakeGitHubOAuth,
    FakeInstallation,
)
from tests.web.conftest import OPERATOR, AppGitHub, Served, app_settings, github_forges, served

READABLE, PRIVATE = "octo/alpha", "octo/secret-plans"


class WallClock:
    """The sessions' clock, moved by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Browser:
    """A browser's cookie handling, by hand: the session cookie is `Secure`, which httpx's
    jar (rightly) never sends over the loopback's plain http."""

    url: str
    cookie: str | None = None
    set_cookies: list[str] = field(default_factory=list)

    def request(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        sent = dict(headers or {})
        if self.cookie is not None:
            sent["Cookie"] = f"{COOKIE}={self.cookie}"
        if method == "POST":
            sent.setdefault("Origin", self.url)
        with httpx.Client(base_url=self.url, timeout=30.0) as client:
            response = client.request(method, path, headers=sent, **kw)
        for line in response.headers.get_list("set-cookie"):
            self.set_cookies.append(line)
            name, _, rest = line.partition("=")
            if name == COOKIE:
                self.cookie = rest.split(";", 1)[0]
        return response

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)


def seed(path: Path) -> None:
    """Finished jobs of two repositories and an installation holding both."""

    def job(repo: str, n: int) -> NewJob:
        return NewJob(
            kind="head-moved",
            source="github",
            repo=repo,
            installation=7,
            target="pull",
            number=n,
            dedupe_key=f"k-{repo}-{n}",
            serial_key=f"github:{repo}#{n}",
            request={"job": {}},
        )

    async def go() -> None:
        store = SqliteStore(path)
        await store.open()
        await store.enqueue_delivery(
            "d-1",
            "installation",
            "created",
            [job(READABLE, 1), job(PRIVATE, 2)],
            installation=InstallationChange(id=7, account="octo", repos=(READABLE, PRIVATE)),
        )
        for claimed in await store.claim(10, time.time() + 1):
            await store.finish(claimed.id, "done", "checked")
        await store.close()

    asyncio.run(go())


@pytest.fixture
def oauth() -> FakeGitHubOAuth:
    fake = FakeGitHubOAuth()
    many = [f"octo/repo-{n:03d}" for n in range(130)]  # two pages of repositories
    fake.user("mona", [FakeInstallation(7, "octo", [READABLE, *many])])
    return fake


@pytest.fixture
def clock() -> WallClock:
    return WallClock()


@contextmanager
def signin_server(
    tmp_path: Path, oauth: FakeGitHubOAuth, clock: WallClock, **options: Any
) -> Iterator[Served]:
    """The App with GitHub sign-in against the fake OAuth, its store seeded; `options` go to
    `create_app` (the status pages' `local` cards, say)."""
    seed(tmp_path / "pairbot.sqlite3")
    from pydantic import SecretStr

    settings = app_settings(
        tmp_path,
        github_client_id=CLIENT_ID,
        github_client_secret=SecretStr(CLIENT_SECRET),
        github_oauth_url=WEB,
        github_api_url=API,
        signin_ttl_s=600.0,
    )
    app = create_app(
        settings,
        github=github_forges(AppGitHub()),
        oauth_transport=oauth.transport,
        wallclock=clock,
        poll_s=0.05,
        **options,
    )
    with served(app) as running:
        yield running


@pytest.fixture
def server(tmp_path: Path, oauth: FakeGitHubOAuth, clock: WallClock) -> Iterator[Served]:
    with signin_server(tmp_path, oauth, clock) as running:
        yield running


def authorize_link(page: str) -> dict[str, str]:
    match = re.search(r'href="([^"]*/login/oauth/authorize[^"]*)"', page)
    assert match, page
    url = urlsplit(html.unescape(match.group(1)))
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{WEB}/login/oauth/authorize"
    return {k: v[0] for k, v in parse_qs(url.query).items()}


def sign_in(browser: Browser, oauth: FakeGitHubOAuth, login: str = "mona") -> httpx.Response:
    """The whole round trip: the page, GitHub's authorize (faked: it sends the browser back
    with a code and the state), the callback."""
    page = browser.get("/signin?next=/")
    params = authorize_link(page.text)
    assert params["client_id"] == CLIENT_ID
    return browser.get(
        "/oauth/callback", params={"code": oauth.code_for(login), "state": params["state"]}
    )


def csrf_of(page: str) -> str:
    match = re.search(r'name=csrf value="([^"]+)"', page)
    assert match, page
    return html.unescape(match.group(1))


# -- nobody signed in -----------------------------------------------------------------------------


def test_a_visitor_who_is_not_signed_in_gets_the_sign_in_page_and_no_card_data(
    server: Served,
) -> None:
    browser = Browser(server.url)
    home = browser.get("/")
    assert home.status_code == 303
    assert home.headers["location"] == "/signin?next=%2F"
    page = browser.get(home.headers["location"])
    api = browser.get("/api/v1/cards")
    elsewhere = browser.get("/a/route/added/later?x=1")
    assert page.status_code == 200
    assert "Sign in with GitHub" in page.text and "Operator token" in page.text
    for response in (home, page, api, elsewhere):
        for repo in (READABLE, PRIVATE, "octo"):
            assert repo not in response.text
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert (api.status_code, api.json()["error"]) == (401, "Sign in to see pairbot's status pages.")
    assert elsewhere.status_code == 303
    assert elsewhere.headers["location"] == "/signin?next=%2Fa%2Froute%2Fadded%2Flater%3Fx%3D1"
    posted = browser.post("/a/route/added/later", headers={"X-CSRF-Token": csrf_of(page.text)})
    assert posted.status_code == 401 and PRIVATE not in posted.text


def test_the_session_cookie_is_signed_http_only_same_site_lax_and_secure(server: Served) -> None:
    browser = Browser(server.url)
    browser.get("/signin")
    [line] = [c for c in browser.set_cookies if c.startswith(f"{COOKIE}=")]
    attributes = {part.strip().split("=")[0] for part in line.split(";")[1:]}
    assert {"Path", "Max-Age", "HttpOnly", "SameSite", "Secure"} <= attributes
    assert "SameSite=Lax" in line and "Max-Age=43200" in line


def test_webhooks_and_health_pass_the_sign_in_layer_untouched(server: Served) -> None:
    health = server.get("/healthz")
    webhook = server.post("/webhooks/github", b"{}", {"Content-Type": "application/json"})
    assert health.status_code == 200 and "set-cookie" not in health.headers
    assert webhook.status_code == 401  # the edge's own verdict (no signature), not sign-in's
    assert "set-cookie" not in webhook.headers
    assert "content-security-policy" not in webhook.headers


# -- GitHub sign-in ------------------------------------------------------------------------------


def test_the_oauth_round_trip_signs_in_and_shows_only_readable_repositories(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    callback = sign_in(browser, oauth)
    assert (callback.status_code, callback.headers["location"]) == (303, "/")
    page = browser.get("/jobs")  # their jobs: the pages filter by viewer
    assert page.status_code == 200
    assert READABLE in page.text
    assert PRIVATE not in page.text
    assert "secret-plans" not in page.text
    assert oauth.unexpected == []
    paths = [path for _, path in oauth.log]
    assert paths[:3] == [
        "/login/oauth/access_token",
        "/user",
        "/user/installations?per_page=100",
    ]
    assert "/user/installations/7/repositories?per_page=100" in paths
    assert "/user/installations/7/repositories?per_page=100&page=2" in paths  # Link followed
    assert all("ghu_" not in c for c in browser.set_cookies)  # the token is never stored
    assert oauth.tokens and not any(t in (browser.cookie or "") for t in oauth.tokens)


def test_a_callback_whose_state_is_not_this_browsers_is_refused(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    authorize_link(browser.get("/signin").text)
    forged = browser.get("/oauth/callback", params={"code": oauth.code_for("mona"), "state": "x"})
    other = Browser(server.url)  # a state from another browser's sign-in
    state = authorize_link(other.get("/signin").text)["state"]
    stolen = browser.get("/oauth/callback", params={"code": oauth.code_for("mona"), "state": state})
    assert forged.status_code == 400 and stolen.status_code == 400
    assert "did not start in this browser" in forged.text
    assert not any(path.startswith("/login/oauth") for _, path in oauth.log)
    assert browser.get("/").status_code == 303


def test_a_state_is_good_for_one_callback_and_for_ten_minutes(
    server: Served, oauth: FakeGitHubOAuth, clock: WallClock
) -> None:
    browser = Browser(server.url)
    state = authorize_link(browser.get("/signin").text)["state"]
    clock.now += 601
    late = browser.get("/oauth/callback", params={"code": oauth.code_for("mona"), "state": state})
    assert late.status_code == 400
    first = Browser(server.url)
    assert sign_in(first, oauth).status_code == 303
    assert first.get("/").status_code == 200


def test_a_cancelled_or_failed_github_sign_in_says_so_and_signs_nobody_in(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    state = authorize_link(browser.get("/signin").text)["state"]
    cancelled = browser.get("/oauth/callback", params={"error": "access_denied", "state": state})
    state = authorize_link(browser.get("/signin").text)["state"]
    bad_code = browser.get("/oauth/callback", params={"code": "made-up", "state": state})
    state = authorize_link(browser.get("/signin").text)["state"]
    no_code = browser.get("/oauth/callback", params={"state": state})
    oauth.fail["/user/installations"] = 502
    state = authorize_link(browser.get("/signin").text)["state"]
    down = browser.get("/oauth/callback", params={"code": oauth.code_for("mona"), "state": state})
    assert (cancelled.status_code, bad_code.status_code, no_code.status_code) == (400, 502, 400)
    assert "cancelled" in cancelled.text
    assert "bad_verification_code" in bad_code.text
    assert down.status_code == 502 and "GitHub answered 502" in down.text
    assert browser.get("/").status_code == 303


def test_a_tampered_cookie_is_signed_out(server: Served, oauth: FakeGitHubOAuth) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    assert browser.get("/").status_code == 200
    assert browser.cookie is not None
    payload, _, signature = browser.cookie.rpartition(".")
    browser.cookie = payload + "." + ("A" if signature[0] != "A" else "B") + signature[1:]
    tampered = browser.get("/")
    assert tampered.status_code == 303 and PRIVATE not in tampered.text
    assert browser.cookie is not None and browser.cookie.count(".") >= 1  # a fresh session


def test_the_repository_list_is_read_again_after_its_ttl(
    server: Served, oauth: FakeGitHubOAuth, clock: WallClock
) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    clock.now += 601
    stale = browser.get("/")
    assert (stale.status_code, stale.headers["location"]) == (303, "/signin?next=%2F&expired=1")
    assert "expired" in browser.get(stale.headers["location"]).text
    oauth.access["mona"] = [FakeInstallation(7, "octo", [PRIVATE])]  # access changed on GitHub
    sign_in(browser, oauth)
    page = browser.get("/jobs")
    assert PRIVATE in page.text and READABLE not in page.text


def test_a_signed_in_visitor_on_the_sign_in_page_goes_where_they_were_going(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    again = browser.get("/signin?next=/api/v1/cards")
    offsite = browser.get("/signin?next=//evil.example/")
    assert again.headers["location"] == "/api/v1/cards"
    assert offsite.headers["location"] == "/"


# -- operator token -------------------------------------------------------------------------------


def test_the_operator_token_as_a_bearer_sees_every_repository(server: Served) -> None:
    page = server.page("/jobs")
    wrong = server.get("/api/v1/cards", {"Authorization": "Bearer not-the-token"})
    basic = server.get("/", {"Authorization": "Basic b3BlcmF0b3I6eA=="})
    assert page.status_code == 200
    assert READABLE in page.text and PRIVATE in page.text
    assert wrong.status_code == 401
    assert wrong.json() == {"error": "The bearer token is not pairbot's operator token."}
    assert wrong.headers["www-authenticate"] == 'Bearer realm="pairbot"'
    assert basic.status_code == 303


def test_the_operator_signs_in_with_the_form(server: Served) -> None:
    browser = Browser(server.url)
    page = browser.get("/signin?next=/")
    token = csrf_of(page.text)
    wrong = browser.post("/signin?next=/", data={"csrf": token, "token": "guess"})
    right = browser.post("/signin?next=/", data={"csrf": token, "token": OPERATOR})
    assert wrong.status_code == 401 and "not the operator token" in wrong.text
    assert (right.status_code, right.headers["location"]) == (303, "/")
    home = browser.get("/")
    jobs = browser.get("/jobs")
    assert home.status_code == 200
    assert READABLE in jobs.text and PRIVATE in jobs.text


# -- CSRF -----------------------------------------------------------------------------------------


def session_csrf(server: Served, browser: Browser) -> str:
    """The CSRF token of the browser's session, as the pages put it in their forms (the
    cookie is signed, not encrypted: the server's own codec reads it)."""
    service = next(m.kwargs["service"] for m in server.app.user_middleware)
    session = service.codec.load(browser.cookie)
    assert session is not None
    return str(session.csrf)


def test_an_unsafe_request_without_the_right_csrf_token_is_refused(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    missing = browser.post("/signout")
    wrong = browser.post("/signout", data={"csrf": "wrong"})
    wrong_header = browser.post("/signout", headers={"X-CSRF-Token": "wrong"})
    assert (missing.status_code, wrong.status_code, wrong_header.status_code) == (403, 403, 403)
    assert "CSRF token is missing" in missing.text and "CSRF token is wrong" in wrong.text
    assert browser.get("/").status_code == 200  # still signed in


def test_the_right_csrf_token_from_another_site_is_refused(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    token = session_csrf(server, browser)
    cross = browser.post(
        "/signout", headers={"X-CSRF-Token": token, "Origin": "https://evil.example"}
    )
    null = browser.post("/signout", headers={"X-CSRF-Token": token, "Origin": "null"})
    assert (cross.status_code, null.status_code) == (403, 403)
    assert "another site" in cross.text
    assert browser.get("/").status_code == 200


def test_sign_out_with_the_token_in_a_header_or_the_form_field(
    server: Served, oauth: FakeGitHubOAuth
) -> None:
    browser = Browser(server.url)
    sign_in(browser, oauth)
    out = browser.post("/signout", headers={"X-CSRF-Token": session_csrf(server, browser)})
    assert (out.status_code, out.headers["location"]) == (303, "/signin")
    assert browser.get("/").status_code == 303
    sign_in(browser, oauth)
    out = browser.post("/signout", data={"csrf": session_csrf(server, browser)})
    assert out.status_code == 303
    assert browser.get("/").status_code == 303


def test_a_csrf_form_body_past_its_limit_is_refused(server: Served) -> None:
    browser = Browser(server.url)
    browser.get("/signin")
    big = browser.post("/signout", data={"csrf": "x", "pad": "y" * (65 * 1024)})
    assert big.status_code == 413
