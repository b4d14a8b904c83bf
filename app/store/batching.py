"""Group commit for a store's small writes: the writes that arrive while one statement is on
its way to the database go together in the next one.

    batcher = Batcher(flush)          flush(items) -> one result per item, in order
    result = await batcher.submit(item)

The first write after a quiet spell is sent at once, alone: nothing waits for company, so a
lone write costs what it did before. While that statement is out, later writes queue; when it
returns, all of them go in one statement (up to `limit`). Under load a replica thus sends one
statement per round trip instead of one per write. A flush that raises fails every write of
its batch with that error (the caller's `flush` may retry items one by one first).

`conflicts(a, b)`: two items that must not share a statement (the same job twice); the later
waits for the next batch, keeping their order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Batcher(Generic[Item, Result]):
    """Batches `submit`ted items into calls of `flush`, one call in flight at a time."""

    def __init__(
        self,
        flush: Callable[[Sequence[Item]], Awaitable[Sequence[Result]]],
        *,
        limit: int = 64,
        conflicts: Callable[[Item, Item], bool] | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError("a batch needs room for at least one item")
        self._flush = flush
        self._limit = limit
        self._conflicts = conflicts
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._drain(), name="pairbot-store-batch")
        # Shielded: a caller cancelled mid-flush does not cancel the others' statement.
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Wait for the writes already submitted."""
        if self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def _drain(self) -> None:
        while self._pending:
            batch = self._take()
            try:
                results = await self._flush([item for item, _ in batch])
            except BaseException as error:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                if not isinstance(error, Exception):
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def _take(self) -> list[tuple[Item, asyncio.Future[Result]]]:
        batch: list[tuple[Item, asyncio.Future[Result]]] = []
        rest: list[tuple[Item, asyncio.Future[Result]]] = []
        for entry in self._pending:
            if len(batch) >= self._limit or (
                self._conflicts is not None
                and (rest or any(self._conflicts(entry[0], taken) for taken, _ in batch))
            ):
                rest.append(entry)  # and everything after it, to keep the order
            else:
                batch.append(entry)
        self._pending = rest
        return batch
