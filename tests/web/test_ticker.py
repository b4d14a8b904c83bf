"""Worker mode's own ticks (app.web.ticker): cards advance between commands, one step a tick.

The Ticker's schedule is driven by what its tick answers, never by a wall clock: a tick that
ran a step is followed at once, an idle one waits for the interval or a wake. The production
tick runs the real card cycle on a real git checkout with the `local` host and the scripted
agent (tests/cycle/harness.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.hosting import HostSettings
from app.store.base import NewJob
from app.store.sqlite import SqliteStore
from app.web.settings import AppSettings
from app.web.ticker import Ticker, _acting_as, checkout_tick
from hosts.errors import HostUnavailable
from tests.support.card_project import CardProject
from tests.support.git import git
from tests.web.conftest import (
    AppGitHub,
    RecordingExecutor,
    app_settings,
    comment_event,
    github_forges,
    served,
)

NEVER = 3600.0  # an interval no test waits out: only a step run or a wake() ticks again


class ScriptedTick:
    """A tick answering `answers` in turn (then False), signalling each call."""

    def __init__(self, answers: list[bool | Exception]) -> None:
        self.answers: Iterator[bool | Exception] = iter(answers)
        self.calls = 0
        self.called = asyncio.Event()

    async def __call__(self) -> bool:
        self.calls += 1
        self.called.set()
        answer = next(self.answers, False)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def settle(tick: ScriptedTick, calls: int) -> None:
    while tick.calls < calls:
        tick.called.clear()
        await asyncio.wait_for(tick.called.wait(), 10)
    for _ in range(20):  # give a wrongly scheduled extra tick every chance to show itself
        await asyncio.sleep(0)


def test_steps_chain_at_once_and_an_idle_tick_waits_for_a_wake() -> None:
    async def go() -> list[int]:
        tick = ScriptedTick([True, True, False, True, False])
        ticker = Ticker(tick, interval_s=NEVER)
        await ticker.start()
        seen = []
        await settle(tick, 3)  # two steps, then idle: no fourth tick without a wake
        seen.append(tick.calls)
        ticker.wake()  # a job finished
        await settle(tick, 5)
        seen.append(tick.calls)
        await ticker.stop()
        return seen

    assert asyncio.run(go()) == [3, 5]


def test_a_chain_is_bounded_and_a_failing_tick_is_logged_and_survived(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go() -> int:
        tick = ScriptedTick([True] * 10 + [RuntimeError("the host is down"), True])
        ticker = Ticker(tick, interval_s=NEVER, chain=4)
        await ticker.start()
        await settle(tick, 4)  # four in a row, then the interval
        first = tick.calls
        for _ in range(3):  # each wake is one more bounded chain
            ticker.wake()
            await settle(tick, tick.calls + 1)
        await ticker.stop()
        return first

    assert asyncio.run(go()) == 4
    caplog.clear()

    async def failing() -> int:
        tick = ScriptedTick([RuntimeError("the host is down"), True, False])
        ticker = Ticker(tick, interval_s=NEVER)
        await ticker.start()
        await settle(tick, 1)
        ticker.wake()
        await settle(tick, 3)
        await ticker.stop()
        return tick.calls

    assert asyncio.run(failing()) == 3
    assert "a scheduled tick failed" in caplog.text and "the host is down" in caplog.text
    caplog.clear()

    async def unavailable() -> int:
        tick = ScriptedTick([HostUnavailable("read #7: GitHub answered 502"), False])
        ticker = Ticker(tick, interval_s=NEVER)
        await ticker.start()
        await settle(tick, 1)
        ticker.wake()
        await settle(tick, 2)
        await ticker.stop()
        return tick.calls

    assert asyncio.run(unavailable()) == 2
    # A host's failure is expected: one line with its remedy, no traceback.
    [failed] = [r for r in caplog.records if "a scheduled tick failed" in r.getMessage()]
    assert failed.exc_info is None
    assert "the host is unavailable: read #7: GitHub answered 502; run again later" in (
        failed.getMessage()
    )


@pytest.mark.parametrize(("interval", "chain"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_a_ticker_refuses_a_schedule_that_makes_no_sense(interval: float, chain: int) -> None:
    with pytest.raises(ValueError, match="ticker"):
        Ticker(ScriptedTick([]), interval_s=interval, chain=chain)


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 60.0), ("0", 0.0), ("1", 1.0), ("300", 300.0)]
)
def test_pair_tick_s_is_off_or_a_number_of_seconds(
    tmp_path: Path, value: str | None, expected: float
) -> None:
    env = {"PAIR_TICK_S": value} if value is not None else {}
    assert AppSettings.from_env(env, root=tmp_path).tick_s == expected


@pytest.mark.parametrize("value", ["soon", "-5", "0.5", "nan", "inf", "100000"])
def test_a_bad_pair_tick_s_names_what_is_allowed(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"PAIR_TICK_S.*allowed: 0 .* from 1 to 86400"):
        AppSettings.from_env({"PAIR_TICK_S": value}, root=tmp_path)


def test_the_production_tick_advances_a_card_one_step_a_tick_until_it_waits(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")  # what the comment's job runs: the first step
    tick = checkout_tick(
        project.root,
        {},
        lambda _path: project.env().deps,
        hosts=HostSettings(local_forge=str(project.forge.root)),
        checkouts=None,
        installation_of=_no_installation,
    )

    async def until_idle() -> list[bool]:
        ran = []
        for _ in range(20):
            ran.append(await tick())
            if not ran[-1]:
                return ran
        raise AssertionError("the card never came to rest")

    ran = asyncio.run(until_idle())
    assert ran[-1] is False and all(ran[:-1]) and len(ran) > 2
    assert project.labels(project.card) == ["pr-state:ready-for-merge"]
    assert project.pull() is not None
    project.assert_invariants()
    assert asyncio.run(tick()) is False  # at rest: a tick runs nothing


def test_a_checkout_acts_as_its_repository_and_its_last_installation(tmp_path: Path) -> None:
    path = tmp_path / "octo" / "svc"
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "remote", "add", "origin", "https://github.com/Octo/Svc.git")
    asked: list[str] = []

    async def installation_of(repo: str) -> int | None:
        asked.append(repo)
        return 42

    hosts = HostSettings(local_forge="keep")
    acting = asyncio.run(_acting_as(path, {}, hosts, installation_of))
    assert acting.github_repository == "Octo/Svc"
    assert acting.github_installation_id == 42
    assert acting.local_forge == "keep" and asked == ["Octo/Svc"]


def test_the_store_knows_the_installation_a_repositorys_newest_job_came_from(
    tmp_path: Path,
) -> None:
    def job(repo: str, installation: int | None, key: str) -> NewJob:
        return NewJob(
            kind="head-moved",
            source="github",
            repo=repo,
            installation=installation,
            target="pull",
            number=1,
            dedupe_key=key,
            serial_key=f"github:{repo}#1",
            request={"job": {}},
        )

    async def go() -> list[int | None]:
        store = SqliteStore(tmp_path / "store.sqlite3")
        await store.open()
        for n, (repo, installation) in enumerate(
            [("octo/svc", 7), ("octo/svc", 8), ("octo/other", 9), ("octo/svc", None)]
        ):
            await store.enqueue_delivery(f"d{n}", "e", None, [job(repo, installation, f"k{n}")])
        found = [
            await store.last_installation(repo) for repo in ("octo/svc", "OCTO/SVC", "octo/none")
        ]
        await store.close()
        return found

    assert asyncio.run(go()) == [8, 8, None]


def test_a_finished_job_wakes_the_workers_ticker(fake: AppGitHub, tmp_path: Path) -> None:
    card = fake.seed_issue("Card", "")
    comment = fake.add_comment(card, "/pair implement", "octocat")
    ticks: list[int] = []

    async def tick() -> bool:
        ticks.append(len(ticks))
        return False

    from app.web.app import create_app

    executor = RecordingExecutor()
    app = create_app(
        app_settings(tmp_path, execution="worker", tick_s=NEVER),
        github=github_forges(fake),
        executor=executor,
        poll_s=0.05,
        tick=tick,
    )
    payload = comment_event(fake, card, comment, "/pair implement", fake.users["octocat"])
    with served(app) as running:
        _wait_for(lambda: len(ticks) == 1)  # the first tick, at start; then only a wake
        assert running.deliver("issue_comment", payload).status_code == 202
        running.wait_idle()
        _wait_for(lambda: len(ticks) == 2)  # the job's end woke it: the interval never comes
    assert [c[0].verb for c in executor.calls] == ["implement"]


def _wait_for(condition: Callable[[], bool], within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


async def _no_installation(_repo: str) -> int | None:
    return None
