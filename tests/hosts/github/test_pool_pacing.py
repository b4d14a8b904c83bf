"""The write pacer of an installation's session: acknowledgements go ahead of bulk writes,
every write keeps the spacing. A fake clock whose sleep advances it: nothing waits for real."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from hosts.pacer import Pacer
from tests.support.fake_github import FakeClock


async def _ordered(spacing_s: float) -> tuple[list[str], list[float]]:
    clock = FakeClock()
    pacer = Pacer(spacing_s, clock=clock, sleep=clock.sleep)
    sent: list[str] = []
    at: list[float] = []
    release = asyncio.Event()

    async def write(name: str, lane: str, hold: bool = False) -> None:
        async with pacer.turn(lane):  # type: ignore[arg-type]  # the lanes, as strings
            sent.append(name)
            at.append(clock())
            if hold:
                await release.wait()

    synthesis = asyncio.create_task(write("synthesis", "bulk", hold=True))
    await asyncio.sleep(0)  # the synthesis comment is being sent
    assert sent == ["synthesis"]
    tracking = asyncio.create_task(write("tracking", "bulk"))
    await asyncio.sleep(0)
    eyes_1 = asyncio.create_task(write("👀 1", "ack"))
    await asyncio.sleep(0)
    eyes_2 = asyncio.create_task(write("👀 2", "ack"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(synthesis, tracking, eyes_1, eyes_2)
    return sent, at


@pytest.mark.parametrize("spacing_s", [0.0, 1.0])
def test_an_ack_queued_after_a_bulk_write_is_sent_first(spacing_s: float) -> None:
    sent, at = asyncio.run(asyncio.wait_for(_ordered(spacing_s), 30))
    # The write already sent finishes; then the acks in their order; then the bulk write.
    assert sent == ["synthesis", "👀 1", "👀 2", "tracking"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(at)]
    assert all(gap >= spacing_s for gap in gaps)  # the same spacing for both lanes


def test_a_lane_that_does_not_exist_is_refused() -> None:
    async def bad() -> None:
        clock = FakeClock()
        async with Pacer(1.0, clock=clock, sleep=clock.sleep).turn("urgent"):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError, match="no write lane 'urgent': the lanes are ack, bulk"):
        asyncio.run(bad())


def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    async def run() -> list[str]:
        clock = FakeClock()
        pacer = Pacer(1.0, clock=clock, sleep=clock.sleep)
        sent: list[str] = []
        release = asyncio.Event()

        async def write(name: str, hold: bool = False) -> None:
            async with pacer.turn("bulk"):
                sent.append(name)
                if hold:
                    await release.wait()

        first = asyncio.create_task(write("first", hold=True))
        await asyncio.sleep(0)
        assert sent == ["first"]
        gone = asyncio.create_task(write("gone"))
        last = asyncio.create_task(write("last"))
        await asyncio.sleep(0)
        gone.cancel()
        release.set()
        await asyncio.gather(first, last)
        assert gone.cancelled()
        return sent

    assert asyncio.run(asyncio.wait_for(run(), 30)) == ["first", "last"]
