"""A GitHub REST response that failed, as a `hosts.errors` error: one reading for every client.

The adapter (githubkit, through `hosts.github.translate`) and the App's own REST calls
(`app.web.forge`: `repository_dispatch`, installation tokens) read a failed response the same
way, so a refusal means the same to both. Only httpx is imported here: the App's dev and Azure
DevOps forges load this module without githubkit.

    401                               BadCredentials (a Forbidden the caller may recover from
                                      once, by minting a new installation token)
    403/429 + a rate limit            RateLimited(retry_after), and the window is closed
                                      (`retry-after`; a spent quota until `x-ratelimit-reset`;
                                      a secondary limit or any 429: at least a minute)
    403 / 404, 410 / 405, 409, 422    Forbidden / NotFound / Conflict
    5xx / anything else               HostUnavailable / HostError

Every message is scrubbed of the caller's secrets.
https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from hosts.calls import RateWindow, retry_after_seconds
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
    RateLimited,
)
from hosts.github.payloads import text as _text
from hosts.secrets import Secrets


class BadCredentials(Forbidden):
    """A 401: the credential was refused. Internal — it leaves the host as `Forbidden`."""

    def __init__(self, message: str, bearer: str) -> None:
        super().__init__(message)
        self.bearer = bearer  # the refused token, to drop exactly it; never shown


def response_error(
    op: str,
    response: httpx.Response,
    *,
    window: RateWindow,
    secrets: Secrets,
    now: float,
    fallback_wait: float | None = None,
) -> HostError:
    """The error a failed `response` means; a rate limit also closes `window`.

    `fallback_wait`: what the client itself knows of a rate limit when the headers say nothing
    (githubkit's GraphQL `RateLimitExceeded`).
    """
    status = response.status_code
    message = error_message(response, secrets)
    said = f"{op}: GitHub answered {status}" + (f": {message}" if message else "")
    if status in (403, 429) or fallback_wait is not None:
        wait = rate_limit_wait(status, response.headers, message, now)
        if wait is None and fallback_wait is not None:
            wait = (fallback_wait, "GraphQL rate limit")
        if wait is not None:
            seconds, why = wait
            window.block_for(seconds, why)
            return RateLimited(
                secrets.scrub(f"{said} ({why}; retry after {seconds:.0f}s)"), retry_after=seconds
            )
    if status == 401:
        bearer = response.request.headers.get("authorization", "").partition(" ")[2]
        return BadCredentials(secrets.scrub(said), bearer)
    kind: type[HostError] = HostError
    if status == 403:
        kind = Forbidden
    elif status in (404, 410):
        kind = NotFound
    elif status in (405, 409, 422):
        kind = Conflict
    elif status >= 500:
        kind = HostUnavailable
    return kind(secrets.scrub(said))


def error_message(response: httpx.Response, secrets: Secrets) -> str:
    """GitHub's `message` and each of its `errors[].message`, scrubbed, at most 300 characters."""
    try:
        data = response.json()
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    parts = [_text(data.get("message"))]
    for error in data.get("errors") or ():
        if isinstance(error, dict) and error.get("message"):
            parts.append(_text(error.get("message")))
    return secrets.scrub("; ".join(part for part in parts if part))[:300]


def rate_limit_wait(
    status: int, headers: Mapping[str, str], message: str, now: float
) -> tuple[float, str] | None:
    """How long a 403/429 asks to wait, and why; None when it is not a rate limit. Pure.

    In GitHub's documented order: `retry-after`; a spent quota until `x-ratelimit-reset`;
    otherwise a secondary limit, or any 429, waits at least a minute.
    """
    if "retry-after" in headers:
        seconds = retry_after_seconds(headers["retry-after"], now)
        if seconds is not None:
            return seconds, "secondary rate limit"
    if headers.get("x-ratelimit-remaining") == "0":
        try:
            reset = float(headers.get("x-ratelimit-reset", ""))
        except ValueError:
            return 60.0, "primary rate limit"
        return max(0.0, reset - now), "primary rate limit"
    lowered = message.lower()
    if "secondary rate limit" in lowered or "abuse" in lowered or status == 429:
        return 60.0, "secondary rate limit"
    return None
