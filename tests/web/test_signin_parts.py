"""The sign-in layer's parts: the session cookie, the settings, `--dev`, routes added later,
and GitHub answers sign-in cannot use. The middleware runs around a small Starlette app that
echoes what a page would read (`viewer_of`, the CSRF token), over httpx's ASGI transport with
the client address set in the ASGI scope."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.domain.intake.access import Session, decide
from app.errors import ConfigError
from app.web.sessions import (
    COOKIE,
    MAX_AGE_S,
    HeldRepos,
    SessionCodec,
    TooLarge,
    operator_mark,
    session_key,
    set_cookie,
)
from app.web.settings import AppSettings
from app.web.signin import CSRF_KEY, SignIn, SignInService, _read_body, _replay, signin_html
from app.web.viewer import viewer_of
from tests.support.fake_github_oauth import (
    API,
    CLIENT_ID,
    CLIENT_SECRET,
    WEB,
    FakeGitHubOAuth,
    FakeInstallation,
)
from tests.web.conftest import OPERATOR, app_settings

NOW = 1_800_000_000.0


async def _echo(request: Request) -> Response:
    viewer = viewer_of(request)
    return JSONResponse(
        {
            "login": viewer.login,
            "everyone": viewer.repos is None,
            "repos": sorted(viewer.repos or ()),
            "csrf": request.scope.get(CSRF_KEY),
        }
    )


def guarded(settings: AppSettings, transport: httpx.AsyncBaseTransport | None = None) -> Any:
    service = SignInService(settings, transport=transport, clock=lambda: NOW)
    routes = [
        Route("/", _echo),
        Route("/later/page", _echo, methods=["GET", "POST"]),
        Route("/healthz", _echo),
        *service.routes(),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SignIn, service=service)]), service


def call(
    app: Any,
    method: str,
    path: str,
    *,
    client: str = "203.0.113.5",
    scheme: str = "https",
    **kw: Any,
) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(client, 40000))
        async with httpx.AsyncClient(
            transport=transport, base_url=f"{scheme}://pairbot.example"
        ) as http:
            return await http.request(method, path, **kw)

    return asyncio.run(go())


def cookie_of(response: httpx.Response) -> str:
    [line] = [c for c in response.headers.get_list("set-cookie") if c.startswith(COOKIE)]
    return line


# -- --dev ------


def test_dev_is_open_to_loopback_as_the_operator(tmp_path: Path) -> None:
    app, _ = guarded(app_settings(tmp_path, forge="local"))
    for client in ("127.0.0.1", "::1"):
        seen = call(app, "GET", "/", client=client, scheme="http")
        assert seen.status_code == 200
        assert seen.json()["everyone"] is True and seen.json()["login"] == "operator"
    plain = call(app, "GET", "/", client="127.0.0.1", scheme="http")
    assert "Secure" not in cookie_of(plain)  # a browser would drop it on plain http
    assert "Secure" in cookie_of(call(app, "GET", "/", client="127.0.0.1"))


def test_dev_from_another_address_is_nobody_even_with_the_operator_token(
    tmp_path: Path,
) -> None:
    app, _ = guarded(app_settings(tmp_path, forge="local"))
    headers = {"Authorization": f"Bearer {OPERATOR}"}
    away = call(app, "GET", "/", client="192.0.2.10", headers=headers)
    mapped = call(app, "GET", "/", client="::ffff:192.0.2.10")
    assert away.status_code == 303 and mapped.status_code == 303
    page = call(app, "GET", "/signin", client="192.0.2.10")
    assert page.status_code == 200 and "only to this machine" in page.text
    assert "Operator token" not in page.text and "Sign in with GitHub" not in page.text
    posted = call(
        app,
        "POST",
        "/signin",
        client="192.0.2.10",
        data={"token": OPERATOR, "csrf": "x"},
        headers={"Origin": "https://pairbot.example"},
    )
    assert posted.status_code == 403


# -- the guard ------


def test_a_route_added_later_is_guarded_without_being_listed(tmp_path: Path) -> None:
    app, _ = guarded(app_settings(tmp_path))
    assert call(app, "GET", "/later/page").status_code == 303
    assert call(app, "POST", "/later/page").status_code == 403  # no CSRF token
    bearer = {"Authorization": f"Bearer {OPERATOR}"}
    seen = call(app, "POST", "/later/page", headers=bearer)  # a bearer needs no CSRF token
    assert seen.status_code == 200 and seen.json()["everyone"] is True
    assert call(app, "GET", "/healthz").json()["login"] is None  # public, and nobody


def test_pages_find_the_sessions_csrf_token_in_the_scope(tmp_path: Path) -> None:
    app, service = guarded(app_settings(tmp_path))
    response = call(app, "GET", "/later/page", headers={"Authorization": f"Bearer {OPERATOR}"})
    value = cookie_of(response).split(";")[0].split("=", 1)[1]
    session = service.codec.load(value)
    assert session is not None and response.json()["csrf"] == session.csrf


def test_a_websocket_is_refused(tmp_path: Path) -> None:
    app, _ = guarded(app_settings(tmp_path))
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/", "headers": [], "client": ("127.0.0.1", 1)}
    asyncio.run(app(scope, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_nothing_configured_says_what_to_set(tmp_path: Path) -> None:
    app, _ = guarded(app_settings(tmp_path, operator_token=None))
    page = call(app, "GET", "/signin")
    assert "PAIR_GITHUB_CLIENT_ID" in page.text and "PAIR_OPERATOR_TOKEN" in page.text
    # No form on the page: post with the session's token, read from the cookie.
    value = cookie_of(page).split(";")[0].split("=", 1)[1]
    session = SignInService(app_settings(tmp_path)).codec.load(value)
    assert session is not None
    off = call(
        app,
        "POST",
        "/signin",
        data={"token": "x", "csrf": session.csrf},
        headers={"Origin": "https://pairbot.example", "Cookie": f"{COOKIE}={value}"},
    )
    callback = call(app, "GET", "/oauth/callback?code=x&state=y")
    assert off.status_code == 404 and "PAIR_OPERATOR_TOKEN is not set" in off.text
    assert callback.status_code == 404


def test_the_sign_in_page_escapes_what_it_shows() -> None:
    page = signin_html(
        "<b>", github='https://x/?a=1&b="2"', operator=True, csrf='"><x', target="/a?b=<c>"
    )
    assert "<b>" not in page and "&lt;b&gt;" in page
    assert 'href="https://x/?a=1&amp;b=&quot;2&quot;"' in page
    assert 'value="&quot;&gt;&lt;x"' in page
    assert "<c>" not in page


# -- GitHub answers sign-in cannot use ------


def _github(tmp_path: Path, fake: FakeGitHubOAuth, **overrides: Any) -> Any:
    settings = app_settings(
        tmp_path,
        github_client_id=CLIENT_ID,
        github_client_secret=SecretStr(CLIENT_SECRET),
        github_oauth_url=WEB,
        github_api_url=API,
        **overrides,
    )
    return guarded(settings, fake.transport)


def _round_trip(app: Any, fake: FakeGitHubOAuth, login: str = "mona") -> httpx.Response:
    page = call(app, "GET", "/signin?next=/later/page")
    cookie = cookie_of(page).split(";")[0]
    state = page.text.split("state=")[1].split("&")[0].split('"')[0]
    return call(
        app,
        "GET",
        f"/oauth/callback?code={fake.code_for(login)}&state={state}",
        headers={"Cookie": cookie},
    )


def test_a_round_trip_over_asgi_names_the_callback_url_when_the_public_url_is_set(
    tmp_path: Path,
) -> None:
    fake = FakeGitHubOAuth()
    fake.user("mona", [FakeInstallation(3, "octo", ["octo/a"]), FakeInstallation(4, "x", [])])
    app, service = _github(tmp_path, fake, public_url="https://pairbot.example/")
    page = call(app, "GET", "/signin")
    assert "redirect_uri=https%3A%2F%2Fpairbot.example%2Foauth%2Fcallback" in page.text
    done = _round_trip(app, fake)
    assert (done.status_code, done.headers["location"]) == (303, "/later/page")
    session = service.codec.load(cookie_of(done).split(";")[0].split("=", 1)[1])
    assert session is not None and (session.login, session.repos) == ("mona", ("octo/a",))
    assert session.user_id == fake.users["mona"]  # what the operator's allowlist names
    assert fake.unexpected == []


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        pytest.param(
            lambda f: f.fail.__setitem__("/user", 500), "GitHub answered 500", id="user-500"
        ),
        pytest.param(
            lambda f: setattr(f, "handle", lambda r: httpx.Response(200, text="<html>")),
            "is not JSON",
            id="not-json",
        ),
        pytest.param(
            lambda f: setattr(f, "handle", _raises),
            "could not be reached (ConnectError)",
            id="unreachable",
        ),
        pytest.param(
            lambda f: setattr(f, "_user_json", lambda login: {"id": 1}),
            "has no login",
            id="no-login",
        ),
        pytest.param(
            lambda f: setattr(f, "_user_json", lambda login: {"login": login, "id": "7"}),
            "has no numeric id",
            id="no-id",
        ),
        pytest.param(
            lambda f: setattr(f, "_paged", lambda *a: httpx.Response(200, json={"x": []})),
            "has no installations list",
            id="no-list",
        ),
    ],
)
def test_a_github_answer_sign_in_cannot_use_is_a_502_page(
    tmp_path: Path, broken: Any, message: str
) -> None:
    fake = FakeGitHubOAuth()
    fake.user("mona", [FakeInstallation(3, "octo", ["octo/a"])])
    broken(fake)
    app, _ = _github(tmp_path, fake)
    done = _round_trip(app, fake)
    assert done.status_code == 502 and message in done.text
    assert not [c for c in done.headers.get_list("set-cookie") if '"k":"github"' in c]


def _raises(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


def test_installations_without_an_id_and_repositories_without_a_name_are_skipped(
    tmp_path: Path,
) -> None:
    fake = FakeGitHubOAuth()
    fake.user("mona", [FakeInstallation(3, "octo", ["octo/a"])])
    plain = fake._installation_json
    fake._installation_json = lambda i: {**plain(i), "id": "3"}  # type: ignore[method-assign]
    app, service = _github(tmp_path, fake)
    done = _round_trip(app, fake)
    session = service.codec.load(cookie_of(done).split(";")[0].split("=", 1)[1])
    assert session is not None and session.repos == ()


def test_too_many_repositories_for_a_cookie_are_held_by_the_server(tmp_path: Path) -> None:
    fake = FakeGitHubOAuth()
    import random

    rng = random.Random(7)
    names = [f"o{rng.randrange(10**9)}/r{rng.randrange(10**9)}" for _ in range(400)]
    fake.user("mona", [FakeInstallation(3, "octo", names)])
    app, service = _github(tmp_path, fake)
    done = _round_trip(app, fake)
    assert (done.status_code, done.headers["location"]) == (303, "/later/page")
    cookie = cookie_of(done).split(";")[0]
    assert len(cookie) < 400
    session = service.codec.load(cookie.split("=", 1)[1])
    assert session is not None and session.repos == () and session.repos_ref
    seen = call(app, "GET", "/later/page", headers={"Cookie": cookie}).json()
    assert seen["login"] == "mona" and seen["repos"] == sorted(n.lower() for n in names)
    # Another server (a restart, a replica) does not hold the list: sign in again.
    other, _ = _github(tmp_path, fake)
    again = call(other, "GET", "/later/page", headers={"Cookie": cookie})
    assert again.headers["location"] == "/signin?next=%2Flater%2Fpage&expired=1"


def test_a_held_list_is_its_users_until_it_expires_and_the_oldest_go_past_the_bound() -> None:
    held = HeldRepos(max_names=300)
    first = held.put("mona", ["o/a"] * 100, until=NOW + 10, now=NOW)
    assert held.get(first, "mona", NOW) == ("o/a",) * 100
    assert held.get(first, "mallory", NOW) is None  # a reference is good for its user only
    assert held.get("made-up", "mona", NOW) is None
    second = held.put("ada", ["o/b"] * 150, until=NOW + 20, now=NOW)
    third = held.put("bob", ["o/c"] * 100, until=NOW + 20, now=NOW)  # 350 names: first goes
    assert held.get(first, "mona", NOW) is None and len(held) == 2
    assert held.get(second, "ada", NOW + 21) is None and len(held) == 1  # expired
    held.put("eve", ["o/d"], until=NOW + 40, now=NOW + 30)  # expired lists go on the next put
    assert held.get(third, "bob", NOW) is None and len(held) == 1
    held.drop("made-up")


def test_a_session_with_a_held_list_round_trips_and_needs_the_list() -> None:
    codec = SessionCodec(b"k")
    session = Session(
        csrf="c", since=NOW, kind="github", login="m", repos_at=NOW, repos_ref="ref-1"
    )
    assert codec.load(codec.dump(session)) == session
    assert "ref-1" in str(session.to_dict()) and "r" not in session.to_dict()
    both = {**session.to_dict(), "r": ["o/a"]}
    neither = {k: v for k, v in session.to_dict().items() if k != "rr"}
    assert Session.from_dict(both) is None and Session.from_dict(neither) is None
    args: dict[str, Any] = {
        "dev": False,
        "client_host": "203.0.113.5",
        "bearer": None,
        "operator_token": None,
        "operator_mark": None,
        "session": session,
        "now": NOW,
        "ttl_s": 60.0,
    }
    assert decide(**args).reason == "expired"  # the server holds no list for it
    reader = decide(**args, held_repos=("o/a",))
    assert (reader.who, reader.repos) == ("reader", ("o/a",))
    assert decide(**{**args, "now": NOW + 61}, held_repos=("o/a",)).reason == "expired"


# -- the session cookie ------


def test_the_cookie_is_signed_and_a_tampered_or_foreign_one_reads_as_none() -> None:
    key = session_key(None, b"webhook secret")
    codec = SessionCodec(key)
    session = Session(csrf="c", since=NOW, kind="github", login="m", repos=("o/a",), repos_at=NOW)
    value = codec.dump(session)
    assert codec.load(value) == session
    assert codec.load(value[:-1] + ("A" if value[-1] != "A" else "B")) is None
    assert SessionCodec(session_key("another session secret", b"x")).load(value) is None
    assert codec.load(None) is None and codec.load("") is None
    assert codec.load(SessionCodec(key)._serializer.dumps({"k": "admin"})) is None


def test_the_key_is_the_session_secret_or_derived_from_the_webhook_secret() -> None:
    derived = session_key(None, b"webhook secret")
    assert derived != b"webhook secret" and len(derived) == 32
    assert session_key(None, b"another") != derived
    assert session_key("s" * 32, b"webhook secret") == b"s" * 32


def test_an_operator_session_carries_a_fingerprint_not_the_token() -> None:
    mark = operator_mark(b"key", OPERATOR)
    assert mark is not None and OPERATOR not in mark and len(mark) == 32
    assert operator_mark(b"key", "another token") != mark
    assert operator_mark(b"key", None) is None


def test_a_session_too_large_for_a_cookie_is_refused() -> None:
    codec = SessionCodec(b"k")
    import secrets

    repos = tuple(f"{secrets.token_hex(8)}/{secrets.token_hex(8)}" for _ in range(300))
    with pytest.raises(TooLarge):
        codec.dump(Session(csrf="c", since=NOW, kind="github", login="m", repos=repos))


def test_the_cookie_attributes() -> None:
    assert set_cookie("v", secure=True) == (
        b"pairbot_session=v; Path=/; Max-Age=43200; HttpOnly; SameSite=Lax; Secure"
    )
    assert b"Secure" not in set_cookie("v", secure=False, max_age_s=60)


# -- settings ------

BASE = {"PAIR_WEBHOOK_SECRET": "w"}


def test_the_sign_in_settings_are_read_once_from_the_environment(tmp_path: Path) -> None:
    settings = AppSettings.from_env(
        {
            **BASE,
            "PAIR_GITHUB_CLIENT_ID": CLIENT_ID,
            "PAIR_GITHUB_CLIENT_SECRET": CLIENT_SECRET,
            "PAIR_GITHUB_OAUTH_URL": "https://ghe.example/",
            "PAIR_OPERATOR_TOKEN": OPERATOR,
            "PAIR_SESSION_SECRET": "s" * 40,
            "PAIR_SIGNIN_TTL_S": "120",
        },
        root=tmp_path,
    )
    assert settings.github_signin and settings.github_client_id == CLIENT_ID
    assert settings.github_oauth_url == "https://ghe.example"
    assert settings.operator_token is not None
    assert settings.operator_token.get_secret_value() == OPERATOR
    assert settings.signin_ttl_s == 120.0
    assert OPERATOR not in repr(settings) and CLIENT_SECRET not in repr(settings)
    defaults = AppSettings.from_env(BASE, root=tmp_path)
    assert not defaults.github_signin and defaults.github_oauth_url == "https://github.com"
    assert defaults.operator_token is None and defaults.session_secret is None


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PAIR_GITHUB_CLIENT_ID": CLIENT_ID}, "PAIR_GITHUB_CLIENT_SECRET"),
        ({"PAIR_GITHUB_CLIENT_SECRET": CLIENT_SECRET}, "PAIR_GITHUB_CLIENT_ID"),
        ({"PAIR_OPERATOR_TOKEN": "tiny-secret"}, "PAIR_OPERATOR_TOKEN is too short (11 char"),
        ({"PAIR_SESSION_SECRET": "s" * 31}, "PAIR_SESSION_SECRET is too short"),
        ({"PAIR_GITHUB_OAUTH_URL": "github.com"}, "PAIR_GITHUB_OAUTH_URL='github.com'"),
        ({"PAIR_SIGNIN_TTL_S": "5"}, "PAIR_SIGNIN_TTL_S='5' is not allowed"),
    ],
)
def test_a_bad_sign_in_setting_names_itself(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        AppSettings.from_env({**BASE, **env}, root=tmp_path)
    assert named in str(caught.value)
    assert "tiny-secret" not in str(caught.value)  # a secret's value is never shown


# -- edges of the guard ------------------------------------------------------------------------


def test_a_session_past_its_lifetime_is_a_fresh_one(tmp_path: Path) -> None:
    app, service = guarded(app_settings(tmp_path))
    old = Session(csrf="c", since=NOW - MAX_AGE_S - 1, kind="operator", mark=service.mark)
    cookie = {"Cookie": f"{COOKIE}={service.codec.dump(old)}"}
    assert call(app, "GET", "/", headers=cookie).status_code == 303
    young = replace(old, since=NOW - 60)
    assert call(
        app, "GET", "/", headers={"Cookie": f"{COOKIE}={service.codec.dump(young)}"}
    ).is_success


def test_the_public_url_is_a_same_site_origin_and_api_refusals_are_json(tmp_path: Path) -> None:
    app, service = guarded(app_settings(tmp_path, public_url="https://status.example.com"))
    session = Session(csrf="tok", since=NOW, kind="operator", mark=service.mark)
    headers = {
        "Cookie": f"{COOKIE}={service.codec.dump(session)}",
        "X-CSRF-Token": "tok",
        "Origin": "https://status.example.com",
        "Host": "10.0.0.5:8000",  # behind a proxy that does not pass the public host on
    }
    assert call(app, "POST", "/later/page", headers=headers).status_code == 200
    refused = call(app, "POST", "/api/retry", headers={**headers, "X-CSRF-Token": "no"})
    assert refused.status_code == 403
    assert refused.json() == {"error": "the CSRF token is wrong (reload the page and try again)"}


def test_the_sign_in_routes_need_the_middleware(tmp_path: Path) -> None:
    service = SignInService(app_settings(tmp_path))
    bare = Starlette(routes=service.routes())
    with pytest.raises(RuntimeError, match="SignIn middleware"):
        call(bare, "POST", "/signout")


def test_the_form_reader_stops_at_a_disconnect_and_the_replay_hands_on() -> None:
    messages = iter(
        [
            {"type": "http.request", "body": b"a=1", "more_body": True},
            {"type": "http.disconnect"},
            {"type": "http.disconnect"},
        ]
    )

    async def receive() -> Any:
        return next(messages)

    async def go() -> tuple[Any, ...]:
        body = await _read_body(receive, 100)
        replay = _replay(body or b"", receive)
        return body, await replay(), await replay()

    body, first, second = asyncio.run(go())
    assert body == b"a=1"
    assert first == {"type": "http.request", "body": b"a=1", "more_body": False}
    assert second == {"type": "http.disconnect"}
