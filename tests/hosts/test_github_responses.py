"""`hosts.github.responses`: one reading of a failed GitHub response, for the adapter and the App.

Built from real response shapes: GitHub's error body is `{"message", "documentation_url"}`,
with `errors[]` on a 422; rate limits are announced by `retry-after` or a spent
`x-ratelimit-remaining` with `x-ratelimit-reset`.
"""

from __future__ import annotations

import httpx
import pytest

from hosts.calls import RateWindow
from hosts.errors import Conflict, Forbidden, HostError, HostUnavailable, NotFound, RateLimited
from hosts.github.responses import BadCredentials, rate_limit_wait, response_error
from hosts.secrets import Secrets

NOW = 1_700_000_000.0
TOKEN = "ghs_" + "a" * 36  # shaped like an installation token; never a real one


def _response(status: int, body: object, headers: dict[str, str] | None = None) -> httpx.Response:
    request = httpx.Request(
        "POST",
        "https://api.github.com/repos/o/r/dispatches",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    return httpx.Response(status, json=body, headers=headers or {}, request=request)


def _error(response: httpx.Response, window: RateWindow | None = None) -> HostError:
    return response_error(
        "dispatch",
        response,
        window=window or RateWindow(lambda: NOW),
        secrets=Secrets(TOKEN),
        now=NOW,
    )


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        pytest.param(401, BadCredentials, id="401-bad-credentials"),
        pytest.param(403, Forbidden, id="403-forbidden"),
        pytest.param(404, NotFound, id="404"),
        pytest.param(410, NotFound, id="410-gone"),
        pytest.param(409, Conflict, id="409"),
        pytest.param(422, Conflict, id="422"),
        pytest.param(502, HostUnavailable, id="502"),
        pytest.param(418, HostError, id="other"),
    ],
)
def test_each_status_has_one_meaning(status: int, kind: type[HostError]) -> None:
    error = _error(_response(status, {"message": "Not Found", "documentation_url": "https://x"}))
    assert type(error) is kind
    assert str(error).startswith(f"dispatch: GitHub answered {status}: Not Found")


def test_a_401_names_the_refused_token_only_inside() -> None:
    error = _error(_response(401, {"message": f"Bad credentials {TOKEN}"}))
    assert isinstance(error, BadCredentials) and error.bearer == TOKEN
    assert TOKEN not in str(error)


def test_a_422_reads_every_error_message() -> None:
    body = {"message": "Validation Failed", "errors": [{"message": "event_type is too long"}]}
    assert "Validation Failed; event_type is too long" in str(_error(_response(422, body)))


@pytest.mark.parametrize(
    ("status", "headers", "message", "wait"),
    [
        pytest.param(
            429, {"retry-after": "7"}, "", (7.0, "secondary rate limit"), id="retry-after"
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 90)},
            "API rate limit exceeded",
            (90.0, "primary rate limit"),
            id="spent-quota",
        ),
        pytest.param(
            403,
            {},
            "You have exceeded a secondary rate limit",
            (60.0, "secondary rate limit"),
            id="secondary-without-headers",
        ),
        pytest.param(429, {}, "", (60.0, "secondary rate limit"), id="any-429"),
        pytest.param(403, {}, "Resource not accessible by integration", None, id="plain-403"),
    ],
)
def test_rate_limits_in_githubs_documented_order(
    status: int, headers: dict[str, str], message: str, wait: tuple[float, str] | None
) -> None:
    assert rate_limit_wait(status, headers, message, NOW) == wait


def test_a_rate_limit_closes_the_window_it_is_given() -> None:
    window = RateWindow(lambda: NOW)
    error = _error(_response(429, {"message": "slow down"}, {"retry-after": "30"}), window)
    assert isinstance(error, RateLimited) and error.retry_after == 30.0
    assert window.remaining() == 30.0
