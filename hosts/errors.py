"""The host error tree: every adapter translates its library's errors into these.

    HostError                   base; the message never carries a token
    ├── NotFound                the card, pull, comment or branch does not exist
    ├── Conflict                the world moved: a head SHA that is not the reviewed one, a
    │                           pull that cannot merge, a branch that was pushed meanwhile
    ├── Forbidden               the credential may not do this (401/403 without a rate limit)
    ├── RateLimited             a primary or secondary limit; `retry_after` seconds (or None)
    ├── Unsupported             the host cannot do `capability` (never a silent no-op)
    ├── HostUnsupported         the binding names a host with no adapter
    └── HostUnavailable         transport failure or 5xx after bounded retries

`hosts/` never imports `app/`; the engine maps these into step outcomes.
"""

from __future__ import annotations


class HostError(Exception):
    """Base of every host failure; `str()` is safe to show and to log."""


class NotFound(HostError):
    """The addressed object does not exist (or is invisible to this credential)."""


class Conflict(HostError):
    """The object is not in the state the caller pinned (e.g. the PR head moved)."""


class Forbidden(HostError):
    """The credential is not allowed to do this."""


class RateLimited(HostError):
    """A rate limit is in force; `retry_after` is the wait in seconds when the host says."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unsupported(HostError):
    """The host has no way to do `capability`."""

    def __init__(self, capability: str, detail: str = "") -> None:
        super().__init__(f"unsupported: {capability}" + (f" ({detail})" if detail else ""))
        self.capability = capability


class HostUnsupported(HostError):
    """`host-unsupported`: the configured host has no adapter (never falls back to GitHub)."""

    def __init__(self, declared: str, available: tuple[str, ...]) -> None:
        super().__init__(
            f"host-unsupported: {declared!r} has no adapter; available: {', '.join(available)}"
        )
        self.declared = declared
        self.available = available


class HostUnavailable(HostError):
    """The host could not be reached, or kept failing, after bounded retries."""
