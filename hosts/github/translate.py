"""githubkit and httpx failures as `hosts.errors`: the GitHub adapter's error boundary.

    RequestFailed 401                 BadCredentials (a Forbidden the host may recover from
                                      once, by minting a new installation token)
    RequestFailed 403/429 + limit     RateLimited(retry_after), and the window is closed
                                      (`retry-after`; a spent quota until `x-ratelimit-reset`;
                                      a secondary limit or any 429: at least a minute)
    RequestFailed 403 / 404, 410 /    Forbidden / NotFound / Conflict / HostUnavailable
      405, 409, 422 / 5xx
    timeouts, transport errors        HostUnavailable
    GraphQLFailed                     NotFound / Forbidden / HostError by the errors' types

Every message is scrubbed of the host's secrets, and the githubkit exception is never chained
(its request object carries the Authorization header).
https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
from githubkit.exception import (
    GraphQLFailed,
    RateLimitExceeded,
    RequestError,
    RequestFailed,
    RequestTimeout,
)

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


class Translator:
    """The `hosts.calls.Translate` of the GitHub adapter (it also closes the rate window)."""

    def __init__(self, window: RateWindow, secrets: Secrets, clock: Callable[[], float]) -> None:
        self._window = window
        self._secrets = secrets
        self._clock = clock

    def _fail(self, kind: type[HostError], message: str) -> HostError:
        return kind(self._secrets.scrub(message))

    def __call__(self, op: str, exc: Exception) -> HostError | None:
        """The `hosts.errors` form of a githubkit/httpx failure (None: not ours, re-raise)."""
        if isinstance(exc, HostError):
            return exc
        if isinstance(exc, TimeoutError):
            return self._fail(HostUnavailable, f"{op}: GitHub did not answer in time")
        if isinstance(exc, RequestFailed):
            return self._status(op, exc)
        if isinstance(exc, RequestTimeout):
            return self._fail(HostUnavailable, f"{op}: GitHub timed out ({type(exc.exc).__name__})")
        if isinstance(exc, RequestError):
            inner = exc.exc
            if isinstance(inner, HostError):
                return inner
            if isinstance(inner, httpx.TimeoutException):
                return self._fail(HostUnavailable, f"{op}: GitHub timed out")
            if isinstance(inner, httpx.TransportError):
                return self._fail(
                    HostUnavailable,
                    f"{op}: could not reach GitHub ({type(inner).__name__}: {inner})",
                )
            return None
        if isinstance(exc, GraphQLFailed):
            errors = exc.response.errors or []
            kinds = {error.type for error in errors}
            text = "; ".join(error.message for error in errors)[:300]
            kind: type[HostError] = (
                NotFound
                if "NOT_FOUND" in kinds
                else Forbidden
                if "FORBIDDEN" in kinds
                else HostError
            )
            return self._fail(kind, f"{op}: GitHub GraphQL refused: {text}")
        return None

    def _status(self, op: str, exc: RequestFailed) -> HostError:
        response = exc.response.raw_response
        status = response.status_code
        message = self._message(response)
        said = f"{op}: GitHub answered {status}" + (f": {message}" if message else "")
        if status in (403, 429) or isinstance(exc, RateLimitExceeded):
            wait = self._rate_limit_wait(status, response.headers, message)
            if wait is None and isinstance(exc, RateLimitExceeded):
                wait = (exc.retry_after.total_seconds(), "GraphQL rate limit")
            if wait is not None:
                seconds, why = wait
                self._window.block_for(seconds, why)
                return RateLimited(
                    self._secrets.scrub(f"{said} ({why}; retry after {seconds:.0f}s)"),
                    retry_after=seconds,
                )
        if status == 401:
            bearer = response.request.headers.get("authorization", "").partition(" ")[2]
            return BadCredentials(self._secrets.scrub(said), bearer)
        if status == 403:
            return self._fail(Forbidden, said)
        if status in (404, 410):
            return self._fail(NotFound, said)
        if status in (405, 409, 422):
            return self._fail(Conflict, said)
        if status >= 500:
            return self._fail(HostUnavailable, said)
        return self._fail(HostError, said)

    def _message(self, response: httpx.Response) -> str:
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
        return self._secrets.scrub("; ".join(part for part in parts if part))[:300]

    def _rate_limit_wait(
        self, status: int, headers: httpx.Headers, message: str
    ) -> tuple[float, str] | None:
        """How long a 403/429 asks to wait, or None when it is not a rate limit.

        In GitHub's documented order: `retry-after`; a spent quota until `x-ratelimit-reset`;
        otherwise a secondary limit, or any 429, waits at least a minute.
        https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately
        """
        now = self._clock()
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
