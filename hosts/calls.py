"""The one call discipline every remote adapter follows: rate window, bounded retries, scrubbing.

An adapter describes one request as `(op, fn)` — a name for messages and a zero-argument
coroutine function — and hands it to `Calls.read` or `Calls.write`. What happens around it is
the same for GitHub and Azure DevOps, so it lives here once:

    RateWindow      the end of the rate-limit window the host last announced (`retry-after`,
                    seconds or an HTTP date; a spent quota until `x-ratelimit-reset`). No call
                    starts inside it: a short window is waited out with the injected `sleep`,
                    one longer than `max_wait_s` raises `RateLimited(retry_after)` at once.
    Calls.read      retried a bounded number of times (`read_attempts`) on `HostUnavailable`
                    and on a `RateLimited` short enough to wait; backoff doubles from
                    `backoff_s` (capped) unless a window already says how long to wait.
    Calls.write     one at a time, spaced `write_spacing_s` apart (`hosts.pacer.Pacer`: an
                    acknowledgement's lane ahead of bulk writes), and never retried
                    automatically: a create that failed after the host stored it is
                    reconciled by the adapter, by reading, never re-posted blindly.
    Calls.settle    that reconciliation, until it is settled: after a write whose outcome is
                    unknown (a timeout, a 5xx after sending) the adapter's `find` reads again,
                    with the read backoff, until it sees the write or `settle_reads` reads in
                    a row say it is absent. A host's listing can lag its writes, so one read
                    that misses a stored comment is not proof it was not stored.

Every message is scrubbed of the adapter's `hosts.secrets.Secrets` before it leaves.

The adapter supplies `translate(op, exc) -> HostError | None`, its library's exceptions mapped
into `hosts.errors` (None: not a host failure, re-raised untouched), and optionally
`recover(error, again=...)`, which may ask for one immediate repeat (GitHub re-mints a refused
installation token once). Rate-limit rules come from the hosts' own pages:
https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api and
https://learn.microsoft.com/azure/devops/integrate/concepts/rate-limits
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping
from email.utils import parsedate_to_datetime
from typing import TypeVar

from hosts.errors import HostError, HostUnavailable, RateLimited
from hosts.pacer import Lane, Pacer
from hosts.secrets import Secrets

log = logging.getLogger(__name__)

T = TypeVar("T")

# Maps a library exception to the host error it means; None: not ours, re-raise it.
Translate = Callable[[str, Exception], HostError | None]
# After a failure: None asks for one immediate repeat; an error is what to raise or retry.
Recover = Callable[[HostError, bool], HostError | None]


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A `Retry-After` value (delta-seconds or an HTTP date) as seconds from `now`. Pure.

    None when the header is absent or unreadable; never negative.
    (https://www.rfc-editor.org/rfc/rfc9110#field.retry-after)
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - now)
    except (TypeError, ValueError):
        return None


class RateWindow:
    """The end of the rate-limit window the host last announced, on the adapter's clock.

    `retry_after_on` names the statuses whose `retry-after` opens a window (GitHub: a 403 or
    429 refusal); None means every response, a 200 included (Azure DevOps delays before it
    blocks). `wall` reads HTTP dates; it differs from `clock` when `clock` is monotonic.
    """

    __slots__ = ("_clock", "_lock", "_retry_after_on", "_until", "_wall", "reason")

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        wall: Callable[[], float] | None = None,
        retry_after_on: Collection[int] | None = (403, 429),
    ) -> None:
        self._clock = clock
        self._wall = wall or clock
        self._retry_after_on = retry_after_on
        self._until = 0.0
        self._lock = threading.Lock()
        self.reason = ""

    def remaining(self) -> float:
        """Seconds until a request may be sent again (0 when the window is closed)."""
        return max(0.0, self._until - self._clock())

    def block_for(self, seconds: float, reason: str) -> None:
        """No request for `seconds` from now (a window only ever grows)."""
        with self._lock:
            until = self._clock() + max(0.0, seconds)
            if until > self._until:
                self._until = until
                self.reason = reason

    def observe(self, status: int, headers: Mapping[str, str]) -> float | None:
        """Learn a window from any response; the `retry-after` it carried, in seconds."""
        delay = None
        if self._retry_after_on is None or status in self._retry_after_on:
            delay = retry_after_seconds(headers.get("retry-after"), self._wall())
            if delay is not None:
                self.block_for(delay, f"retry-after on a {status}")
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            try:
                reset = float(headers["x-ratelimit-reset"])
            except ValueError:
                return delay
            resource = headers.get("x-ratelimit-resource", "core")
            self.block_for(reset - self._wall(), f"the {resource} rate limit is spent")
        return delay

    def __repr__(self) -> str:
        return f"RateWindow(remaining={self.remaining():.1f}s)"


class Calls:
    """Reads and writes of one adapter instance under the shared discipline.

    One instance belongs to one event loop (its write lock does).
    """

    def __init__(
        self,
        *,
        host: str,
        translate: Translate,
        window: RateWindow,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        secrets: Secrets,
        max_wait_s: float = 60.0,
        read_attempts: int = 3,
        write_spacing_s: float = 0.0,
        backoff_s: float = 0.5,
        backoff_cap_s: float = 8.0,
        timeout_s: float | None = None,
        recover: Recover | None = None,
        settle_reads: int = 4,
    ) -> None:
        self.host = host
        self.window = window
        self.secrets = secrets
        self.translate = translate
        self._recover = recover
        self._clock = clock
        self._sleep = sleep
        self.max_wait_s = max_wait_s
        self._read_attempts = max(1, read_attempts)
        self._backoff_s = backoff_s
        self._backoff_cap_s = backoff_cap_s
        self._timeout_s = timeout_s
        self._settle_reads = max(1, settle_reads)
        self.pacer = Pacer(write_spacing_s, clock=clock, sleep=sleep)

    def fail(self, kind: type[HostError], message: str) -> HostError:
        """A `kind` error whose message is scrubbed of every known secret."""
        return kind(self.secrets.scrub(message))

    def window_wait(self, op: str) -> float:
        """Seconds left in the open window (0: none); `RateLimited` when too long to wait."""
        wait = self.window.remaining()
        if wait > self.max_wait_s:
            raise RateLimited(
                f"{op}: {self.host} rate limit ({self.window.reason}): {wait:.0f}s left, more "
                f"than the {self.max_wait_s:.0f}s pairbot waits; try again later",
                retry_after=wait,
            )
        return wait

    async def await_window(self, op: str) -> None:
        """Wait out a short known rate-limit window; refuse to wait a long one."""
        while (wait := self.window_wait(op)) > 0:
            log.warning(
                "%s: waiting %.1fs for %s's rate limit (%s)",
                op,
                wait,
                self.host,
                self.window.reason,
            )
            await self._sleep(wait)

    async def read(self, op: str, fn: Callable[[], Awaitable[T]]) -> T:
        """A read: retried a bounded number of times on transient failures."""
        return await self._call(op, fn, write=False)

    async def write(self, op: str, fn: Callable[[], Awaitable[T]], *, lane: Lane = "bulk") -> T:
        """A mutation: one at a time, spaced, never retried automatically; `lane="ack"` for an
        acknowledgement (👀, a like), which goes ahead of queued bulk writes."""
        async with self.pacer.turn(lane):
            return await self._call(op, fn, write=True)

    async def settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        """What an unknown-outcome write left behind: `find()` until it is not None, at most
        `settle_reads` times with backoff between; None when every read says it is absent.

        Each `find` is the adapter's own reads (so each is retried as `read` retries); only
        after this says absent may the adapter decide the write did not happen.
        """
        for attempt in range(1, self._settle_reads + 1):
            found = await find()
            if found is not None:
                return found
            if attempt < self._settle_reads:
                log.info(
                    "%s: not visible yet; reading again (%d/%d)", op, attempt, self._settle_reads
                )
                await self._sleep(min(self._backoff_cap_s, self._backoff_s * 2 ** (attempt - 1)))
        return None

    def retryable(self, error: HostError) -> bool:
        """Transient: a transport failure or a rate limit short enough to wait out."""
        if isinstance(error, RateLimited):
            return error.retry_after is None or error.retry_after <= self.max_wait_s
        return isinstance(error, HostUnavailable)

    async def _once(self, fn: Callable[[], Awaitable[T]]) -> T:
        if self._timeout_s is None:
            return await fn()
        async with asyncio.timeout(self._timeout_s):
            return await fn()

    async def _call(self, op: str, fn: Callable[[], Awaitable[T]], *, write: bool) -> T:
        recovered = False
        attempt = 0
        while True:
            attempt += 1
            await self.await_window(op)
            try:
                return await self._once(fn)
            except Exception as exc:
                error = self.translate(op, exc)
                if error is None:
                    raise
            if self._recover is not None:
                outcome = self._recover(error, recovered)
                if outcome is None and not recovered:
                    recovered = True
                    attempt -= 1  # a repeat after recovery is not a retry
                    continue
                error = outcome or error
            if write or not self.retryable(error) or attempt >= self._read_attempts:
                raise error from None
            log.info("%s: %s; retrying (%d/%d)", op, error, attempt, self._read_attempts)
            if self.window.remaining() <= 0:  # no window to honour: back off
                await self._sleep(min(self._backoff_cap_s, self._backoff_s * 2 ** (attempt - 1)))
