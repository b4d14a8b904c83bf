"""The shared call discipline (`hosts.calls`): rate windows, bounded read retries, writes never
retried, scrubbing. Adapter-independent: one githubkit call over respx shows it end to end."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from hosts.calls import Calls, RateWindow, retry_after_seconds
from hosts.errors import HostError, HostUnavailable, RateLimited
from hosts.github import GitHubCredentials, GitHubHost, GitHubOptions
from hosts.models import Target
from hosts.secrets import Secret, Secrets

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """A clock whose sleeps move it and are recorded."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Boom(Exception):
    """A library failure the test translates."""

    def __init__(self, error: HostError) -> None:
        super().__init__(str(error))
        self.error = error


def translate(op: str, exc: Exception) -> HostError | None:
    return exc.error if isinstance(exc, Boom) else None


def make_calls(clock: Clock, **options: Any) -> Calls:
    return Calls(
        host="Test",
        translate=translate,
        window=RateWindow(clock),
        clock=clock,
        sleep=clock.sleep,
        secrets=Secrets("s3cr3t-token"),
        **options,
    )


def failing(times: int, error: HostError, calls: list[int]) -> Callable[[], Awaitable[str]]:
    async def fn() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise Boom(error)
        return "ok"

    return fn


# -- Retry-After ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "now", "expected"),
    [
        pytest.param("2.5", 0.0, 2.5, id="seconds"),
        pytest.param(" 30 ", 0.0, 30.0, id="padded"),
        pytest.param("-3", 0.0, 0.0, id="negative-is-now"),
        pytest.param("Wed, 21 Oct 2015 07:28:30 GMT", 1445412480.0, 30.0, id="http-date"),
        pytest.param("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490.0, 0.0, id="http-date-past"),
        pytest.param("soon", 0.0, None, id="unreadable"),
        pytest.param("", 0.0, None, id="empty"),
        pytest.param(None, 0.0, None, id="absent"),
    ],
)
def test_retry_after_seconds(value: str | None, now: float, expected: float | None) -> None:
    assert retry_after_seconds(value, now) == expected


def test_a_window_opens_on_retry_after_and_on_a_spent_quota() -> None:
    clock = Clock(1000.0)
    window = RateWindow(clock)
    assert window.observe(200, {"retry-after": "30"}) is None  # GitHub: refusals only
    assert window.remaining() == 0
    assert window.observe(429, {"retry-after": "30"}) == 30.0
    assert window.remaining() == 30.0
    window.observe(200, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1100"})
    assert window.remaining() == 100.0
    assert "spent" in window.reason
    window.observe(403, {"retry-after": "5"})
    assert window.remaining() == 100.0, "a window only ever grows"


def test_a_window_can_listen_to_every_response() -> None:
    clock = Clock(0.0)
    window = RateWindow(clock, wall=lambda: 1445412480.0, retry_after_on=None)
    window.observe(200, {"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"})
    assert window.remaining() == 10.0


# -- retries --------------------------------------------------------------------------------------


def test_reads_are_retried_a_bounded_number_of_times_with_backoff() -> None:
    clock = Clock()
    calls = make_calls(clock, read_attempts=3, backoff_s=0.5)
    sent: list[int] = []
    with pytest.raises(HostUnavailable):
        asyncio.run(calls.read("read x", failing(9, HostUnavailable("502"), sent)))
    assert len(sent) == 3
    assert clock.sleeps == [0.5, 1.0]
    sent.clear()
    clock.sleeps.clear()
    assert asyncio.run(calls.read("read x", failing(1, HostUnavailable("502"), sent))) == "ok"
    assert len(sent) == 2


def test_a_write_is_never_retried() -> None:
    clock = Clock()
    calls = make_calls(clock, read_attempts=5)
    sent: list[int] = []
    with pytest.raises(HostUnavailable):
        asyncio.run(calls.write("create x", failing(1, HostUnavailable("502"), sent)))
    assert len(sent) == 1
    with pytest.raises(RateLimited):
        asyncio.run(calls.write("create x", failing(5, RateLimited("slow down", 1.0), sent)))
    assert len(sent) == 2


def test_a_short_rate_limit_on_a_read_is_waited_out_a_long_one_raised() -> None:
    clock = Clock()
    calls = make_calls(clock, max_wait_s=60)

    def limited(seconds: float) -> HostError:
        calls.window.block_for(seconds, "test limit")
        return RateLimited("limited", seconds)

    sent: list[int] = []

    async def once_short() -> str:
        sent.append(1)
        if len(sent) == 1:
            raise Boom(limited(3))
        return "ok"

    assert asyncio.run(calls.read("read x", once_short)) == "ok"
    assert clock.sleeps == [3.0]

    async def long() -> str:
        raise Boom(limited(600))

    with pytest.raises(RateLimited) as raised:
        asyncio.run(calls.read("read x", long))
    assert raised.value.retry_after == 600
    # Inside the window nothing is sent at all.
    with pytest.raises(RateLimited, match="rate limit"):
        asyncio.run(calls.read("read x", once_short))
    assert len(sent) == 2


def test_writes_go_one_at_a_time_spaced() -> None:
    clock = Clock()
    calls = make_calls(clock, write_spacing_s=1.0)

    async def two() -> None:
        async def write() -> str:
            return "ok"

        await asyncio.gather(calls.write("a", write), calls.write("b", write))

    asyncio.run(two())
    assert clock.sleeps == [1.0]


def test_recover_repeats_once() -> None:
    clock = Clock()
    seen: list[bool] = []

    def recover(error: HostError, again: bool) -> HostError | None:
        seen.append(again)
        return None if not again else error

    calls = make_calls(clock, recover=recover, read_attempts=1)
    sent: list[int] = []
    with pytest.raises(HostError):
        asyncio.run(calls.write("w", failing(9, HostError("401"), sent)))
    assert len(sent) == 2
    assert seen == [False, True]


def test_errors_are_scrubbed_and_secrets_never_print() -> None:
    calls = make_calls(Clock())
    error = calls.fail(HostUnavailable, "git said https://x:s3cr3t-token@host and s3cr3t-token")
    assert "s3cr3t-token" not in str(error)
    secrets = Secrets()
    secrets.add("minted-token-1")
    assert secrets.scrub("Bearer minted-token-1") == "Bearer ***"
    assert "hunter22" not in repr(Secret("hunter22")) + str(Secret("hunter22"))


# -- one githubkit call over respx ----------------------------------------------------------------


def test_github_honours_retry_after_on_a_single_call() -> None:
    clock = Clock()
    with respx.mock(base_url="https://api.github.com", assert_all_called=True) as api:
        route = api.get("/repos/o/r/issues/7").mock(
            side_effect=[
                httpx.Response(429, headers={"retry-after": "2"}, json={"message": "slow"}),
                httpx.Response(200, json={"number": 7, "title": "t", "body": "b"}),
            ]
        )
        host = GitHubHost(
            "o/r",
            GitHubCredentials.token("ghp_abcdefgh"),
            options=GitHubOptions(write_spacing_s=0),
            transport=httpx.AsyncHTTPTransport(),
            clock=clock,
            sleep=clock.sleep,
        )
        card = asyncio.run(host.get_card(7))
    assert card.title == "t"
    assert route.call_count == 2
    assert clock.sleeps == [2.0]


def test_github_never_retries_a_refused_write() -> None:
    clock = Clock()
    with respx.mock(base_url="https://api.github.com") as api:
        route = api.post("/repos/o/r/issues/7/reactions").mock(
            return_value=httpx.Response(502, json={"message": "ghp_abcdefgh is bad"})
        )
        host = GitHubHost(
            "o/r",
            GitHubCredentials.token("ghp_abcdefgh"),
            transport=httpx.AsyncHTTPTransport(),
            clock=clock,
            sleep=clock.sleep,
        )
        with pytest.raises(HostUnavailable) as raised:
            asyncio.run(host.react(Target("card", 7), None, "+1"))
    assert route.call_count == 1
    assert "ghp_abcdefgh" not in str(raised.value)


def test_no_adapter_loads_another_adapters_library() -> None:
    script = (
        "import sys\n"
        "import hosts, hosts.calls, hosts.git, hosts.local, hosts.azure_devops\n"
        "from hosts.github import GitHubCredentials, GitHubOptions\n"
        "GitHubCredentials.token('t0ken-value')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('githubkit', 'azure', 'msrest')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
