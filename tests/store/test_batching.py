"""`Batcher` (app/store/batching.py): group commit for a store's small writes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.store.batching import Batcher


class Recorder:
    """A flush that records its batches and can be held open or made to fail."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()
        self.fail_on: int | None = None

    async def flush(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        await self.release.wait()
        if self.fail_on in items:
            raise ValueError(f"refused {self.fail_on}")
        return [item * 10 for item in items]


def test_a_lone_write_goes_at_once_and_later_ones_share_the_next_flush() -> None:
    async def body() -> tuple[list[list[int]], list[int]]:
        recorder = Recorder()
        batcher: Batcher[int, int] = Batcher(recorder.flush)
        first = asyncio.ensure_future(batcher.submit(1))
        await asyncio.sleep(0)
        rest = [asyncio.ensure_future(batcher.submit(n)) for n in (2, 3, 4)]
        await asyncio.sleep(0)
        recorder.release.set()
        results = [await first] + [await r for r in rest]
        return recorder.batches, results

    batches, results = asyncio.run(asyncio.wait_for(body(), 10))
    assert batches == [[1], [2, 3, 4]]
    assert results == [10, 20, 30, 40]


def test_conflicting_items_and_those_after_them_wait_for_the_next_batch() -> None:
    async def body() -> list[list[int]]:
        recorder = Recorder()
        recorder.release.set()
        batcher: Batcher[int, int] = Batcher(
            recorder.flush, limit=3, conflicts=lambda a, b: a % 10 == b % 10
        )
        await asyncio.gather(*(batcher.submit(n) for n in (1, 2, 11, 3, 4, 5, 6)))
        return recorder.batches

    # All submitted before the first flush starts: 11 conflicts with 1, so it and everything
    # after it wait for the next batch; the limit splits the rest.
    assert asyncio.run(asyncio.wait_for(body(), 10)) == [[1, 2], [11, 3, 4], [5, 6]]


def test_a_failed_flush_fails_each_of_its_writes_and_the_next_batch_still_goes() -> None:
    async def body() -> tuple[list[object], int]:
        recorder = Recorder()
        batcher: Batcher[int, int] = Batcher(recorder.flush)
        recorder.fail_on = 2
        first = asyncio.ensure_future(batcher.submit(1))
        await asyncio.sleep(0)
        failing = [asyncio.ensure_future(batcher.submit(n)) for n in (2, 3)]
        await asyncio.sleep(0)
        recorder.release.set()
        outcomes = await asyncio.gather(first, *failing, return_exceptions=True)
        later = await batcher.submit(4)
        await batcher.close()
        return [o if isinstance(o, int) else type(o).__name__ for o in outcomes], later

    assert asyncio.run(asyncio.wait_for(body(), 10)) == ([10, "ValueError", "ValueError"], 40)


def test_a_batch_needs_room() -> None:
    async def flush(items: Sequence[int]) -> list[int]:
        return list(items)

    with pytest.raises(ValueError, match="at least one item"):
        Batcher(flush, limit=0)
