"""The sign-in layer's pure decisions (app/domain/intake/access.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.intake.access import (
    Session,
    bearer_token,
    csrf_ok,
    decide,
    is_api,
    is_loopback,
    is_public,
    origin_ok,
    safe_next,
    session_alive,
    state_fresh,
)
from app.web.signin import viewer_for
from app.web.viewer import Viewer

NOW = 1_800_000_000.0
TOKEN = "operator-token-of-at-least-24-chars"  # noqa: S105 - a test fixture
MARK = "m" * 32


@pytest.mark.parametrize(
    ("path", "public"),
    [
        pytest.param("/webhooks/github", True, id="webhook"),
        pytest.param("/webhooks/azure-devops", True, id="ado-webhook"),
        pytest.param("/healthz", True, id="health"),
        pytest.param("/signin", True, id="signin"),
        pytest.param("/signout", True, id="signout"),
        pytest.param("/oauth/callback", True, id="callback"),
        pytest.param("/static/pairbot.css", True, id="static"),
        pytest.param("/", False, id="overview"),
        pytest.param("/api/cards", False, id="api"),
        pytest.param("/healthz/more", False, id="under-health"),
        pytest.param("/webhooks", False, id="webhooks-bare"),
        pytest.param("/signin/../api", False, id="dotted"),
        pytest.param("/new/page", False, id="a-later-route"),
    ],
)
def test_only_the_allow_list_is_public(path: str, public: bool) -> None:
    assert is_public(path) is public


def test_the_api_is_recognised_by_its_prefix() -> None:
    assert is_api("/api") and is_api("/api/cards")
    assert not is_api("/apiary") and not is_api("/")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("203.0.113.5", False),
        ("localhost", False),  # a name is not an address: the client field is always one
        ("", False),
        (None, False),
    ],
)
def test_loopback_is_an_address_check(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_bearer_header_is_read_and_another_scheme_is_a_wrong_token() -> None:
    assert bearer_token(None) is None
    assert bearer_token("Bearer abc ") == "abc"
    assert bearer_token("bearer abc") == "abc"
    assert bearer_token("Basic abc") == ""
    assert bearer_token("Bearer") == ""


def _decide(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "dev": False,
        "client_host": "203.0.113.5",
        "bearer": None,
        "operator_token": TOKEN,
        "operator_mark": MARK,
        "session": None,
        "now": NOW,
        "ttl_s": 900.0,
    }
    values.update(overrides)
    return decide(**values)


GITHUB = Session(
    csrf="c", since=NOW - 100, kind="github", login="mona", repos=("Octo/A",), repos_at=NOW - 60
)


@pytest.mark.parametrize(
    ("overrides", "viewer", "reason", "bearer"),
    [
        pytest.param({}, Viewer.nobody(), "anonymous", False, id="nobody"),
        pytest.param(
            {"dev": True, "client_host": "127.0.0.1"},
            Viewer.everyone("operator", operator=True),
            "ok",
            False,
            id="dev-loopback",
        ),
        pytest.param(
            {"dev": True, "bearer": TOKEN, "session": GITHUB},
            Viewer.nobody(),
            "remote-dev",
            False,
            id="dev-remote-even-with-credentials",
        ),
        pytest.param(
            {"bearer": TOKEN},
            Viewer.everyone("operator", operator=True),
            "ok",
            True,
            id="bearer",
        ),
        pytest.param(
            {"bearer": "guess", "session": GITHUB},
            Viewer.nobody(),
            "bad-token",
            False,
            id="wrong-bearer-beats-session",
        ),
        pytest.param(
            {"bearer": TOKEN, "operator_token": None},
            Viewer.nobody(),
            "bad-token",
            False,
            id="bearer-without-operator-token",
        ),
        pytest.param(
            {"session": GITHUB},
            Viewer.reader_of("mona", ["octo/a"]),
            "ok",
            False,
            id="github-user",
        ),
        pytest.param(
            {"session": GITHUB, "now": NOW + 900},
            Viewer.nobody(),
            "expired",
            False,
            id="github-list-too-old",
        ),
        pytest.param(
            {"session": GITHUB, "now": NOW - 120},
            Viewer.nobody(),
            "expired",
            False,
            id="github-list-from-the-future",
        ),
        pytest.param(
            {"session": Session(csrf="c", since=NOW, kind="operator", mark=MARK)},
            Viewer.everyone("operator", operator=True),
            "ok",
            False,
            id="operator-session",
        ),
        pytest.param(
            {"session": Session(csrf="c", since=NOW, kind="operator", mark="old" * 8)},
            Viewer.nobody(),
            "expired",
            False,
            id="operator-token-changed",
        ),
        pytest.param(
            {
                "session": Session(csrf="c", since=NOW, kind="operator", mark=MARK),
                "operator_mark": None,
            },
            Viewer.nobody(),
            "expired",
            False,
            id="operator-token-removed",
        ),
        pytest.param(
            {"session": Session(csrf="c", since=NOW)},
            Viewer.nobody(),
            "anonymous",
            False,
            id="anonymous-session",
        ),
    ],
)
def test_the_viewer_of_a_request(
    overrides: dict[str, Any], viewer: Viewer, reason: str, bearer: bool
) -> None:
    decision = _decide(**overrides)
    assert (viewer_for(decision), decision.reason, decision.bearer) == (viewer, reason, bearer)
    assert decision.signed_in is viewer.signed_in


def test_a_session_round_trips_and_anything_else_reads_as_none() -> None:
    started = replace(GITHUB, state="s", state_at=NOW, next="/api/cards")
    operator = Session(csrf="c", since=NOW, kind="operator", mark=MARK)
    with_id = replace(GITHUB, user_id=583231)
    for session in (GITHUB, with_id, started, operator, Session(csrf="c", since=NOW)):
        assert Session.from_dict(session.to_dict()) == session
    # A cookie from before sessions kept the id reads with id 0: the pages ask to sign in again.
    assert "i" not in GITHUB.to_dict() and with_id.to_dict()["i"] == 583231
    assert Session.from_dict(replace(started, next="//evil").to_dict()) == replace(
        started, next="/"
    )
    for bad in (
        None,
        [],
        {"c": "", "s": 1, "k": "anonymous"},
        {"c": "x", "s": "1", "k": "anonymous"},
        {"c": "x", "s": 1, "k": "admin"},
        {"c": "x", "s": 1, "k": "github", "l": "", "r": [], "ra": 1},
        {"c": "x", "s": 1, "k": "github", "l": "m", "r": [1], "ra": 1},
        {"c": "x", "s": 1, "k": "github", "l": "m", "r": "a", "ra": 1},
        {"c": "x", "s": 1, "k": "github", "l": "m", "r": [], "ra": 1, "i": "7"},
        {"c": "x", "s": 1, "k": "github", "l": "m", "r": [], "ra": 1, "i": -7},
        {"c": "x", "s": 1, "k": "github", "l": "m", "r": [], "ra": 1, "i": True},
        {"c": "x", "s": 1, "k": "operator", "m": ""},
    ):
        assert Session.from_dict(bad) is None


def test_a_session_lives_for_its_max_age_only() -> None:
    session = Session(csrf="c", since=NOW)
    assert session_alive(session, NOW + 10, 60)
    assert not session_alive(session, NOW + 61, 60)
    assert not session_alive(session, NOW - 1, 60)


def test_csrf_tokens_compare_exactly() -> None:
    assert csrf_ok("abc", "abc")
    assert not csrf_ok("abc", "abd") and not csrf_ok("abc", "") and not csrf_ok("abc", None)


@pytest.mark.parametrize(
    ("origin", "referer", "ok"),
    [
        ("https://pairbot.example", None, True),
        ("http://pairbot.example", None, True),  # TLS ended at a proxy: the host decides
        ("https://PAIRBOT.example", None, True),
        ("https://evil.example", "https://pairbot.example/", False),
        ("null", None, False),
        ("", None, False),
        (None, "https://pairbot.example/page", True),
        (None, "https://evil.example/page", False),
        (None, None, False),
        ("not a url", None, False),
    ],
)
def test_an_unsafe_request_must_come_from_this_site(
    origin: str | None, referer: str | None, ok: bool
) -> None:
    assert origin_ok(origin, referer, ["pairbot.example"]) is ok


@pytest.mark.parametrize(
    ("target", "safe"),
    [
        ("/", "/"),
        ("/cards/octo/a/1?tab=steps", "/cards/octo/a/1?tab=steps"),
        (None, "/"),
        ("", "/"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("/a\\b", "/"),
        ("/a\r\nSet-Cookie: x", "/"),
        ("/" + "a" * 2000, "/"),
    ],
)
def test_after_sign_in_a_browser_only_goes_to_a_path_of_this_site(
    target: str | None, safe: str
) -> None:
    assert safe_next(target) == safe


@given(st.text(max_size=60))
def test_safe_next_never_leaves_the_site(target: str) -> None:
    result = safe_next(target)
    assert result.startswith("/") and not result.startswith(("//", "/\\"))


def test_an_oauth_state_is_this_sessions_and_fresh() -> None:
    session = Session(csrf="c", since=NOW, state="st", state_at=NOW)
    assert state_fresh(session, "st", NOW + 10, 600)
    assert not state_fresh(session, "other", NOW + 10, 600)
    assert not state_fresh(session, None, NOW + 10, 600)
    assert not state_fresh(session, "st", NOW + 601, 600)
    assert not state_fresh(replace(session, state=""), "", NOW, 600)
