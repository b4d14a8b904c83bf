"""githubkit and httpx failures as `hosts.errors`: the GitHub adapter's error boundary.

    RequestFailed                     by its HTTP status, as `hosts.github.responses` says
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

from hosts.calls import RateWindow
from hosts.errors import Forbidden, HostError, HostUnavailable, NotFound
from hosts.github.responses import BadCredentials, response_error
from hosts.secrets import Secrets

__all__ = ["BadCredentials", "Translator"]


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
        fallback = exc.retry_after.total_seconds() if isinstance(exc, RateLimitExceeded) else None
        return response_error(
            op,
            exc.response.raw_response,
            window=self._window,
            secrets=self._secrets,
            now=self._clock(),
            fallback_wait=fallback,
        )
