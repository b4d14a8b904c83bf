"""The write pacer: one mutation at a time, spaced, acknowledgements ahead of bulk writes.

GitHub's secondary rate limits ask a client making many POST, PATCH, PUT or DELETE requests
to wait at least a second between them
(https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#pause-between-mutative-requests).
`Pacer` keeps that rule for every write of one adapter's session and orders who goes next:

    ack     an acknowledgement (👀, a like): waits only for the acknowledgements queued before
            it and for the one write already sent, never behind a queued bulk write
    bulk    everything else (tracking, review, synthesis comments, labels, statuses, merges)

The spacing is the same for both lanes: a turn is granted `spacing_s` after the last write
ended, to the oldest waiting acknowledgement, else to the oldest waiting bulk write. The turn
is decided when the gap has elapsed, not when it began, so an acknowledgement queued while a
bulk write waits out the gap still goes first.

A bulk write that has to wait tells whoever runs it (`waiting_for_turn`, a context variable
the App's worker sets per job): the worker then counts that job as parked and claims the next,
so the next command's acknowledgement is queued at once instead of behind a busy slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Literal

Lane = Literal["ack", "bulk"]
LANES: tuple[Lane, ...] = ("ack", "bulk")

# Called with True when a bulk write starts waiting for its turn, False when it has it.
waiting_for_turn: ContextVar[Callable[[bool], None] | None] = ContextVar(
    "pairbot_waiting_for_turn", default=None
)


class Pacer:
    """Turns for writes, one at a time, `spacing_s` apart, the ack lane first.

    One instance belongs to one event loop (its futures do). `clock` and `sleep` are the
    adapter's (tests inject a fake clock whose sleep advances it).
    """

    def __init__(
        self,
        spacing_s: float,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self._spacing_s = spacing_s
        self._clock = clock
        self._sleep = sleep
        self._waiting: dict[Lane, deque[asyncio.Future[None]]] = {lane: deque() for lane in LANES}
        self._busy = False  # a turn is granted and not yet over, or a grant is being timed
        self._last = float("-inf")
        self._timer: asyncio.Task[None] | None = None  # held: the loop keeps tasks weakly
        self.granted: list[Lane] = []  # the lanes in the order their turns came (tests)

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    @contextlib.asynccontextmanager
    async def turn(self, lane: Lane = "bulk") -> AsyncIterator[None]:
        """Hold the one write turn; the write is sent inside the `async with`."""
        if lane not in self._waiting:
            raise ValueError(f"no write lane {lane!r}: the lanes are {', '.join(LANES)}")
        if self._busy or self.waiting:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[lane].append(future)
            parked = waiting_for_turn.get() if lane == "bulk" else None
            if parked is not None:
                parked(True)
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._end(wrote=False)  # granted as it was cancelled: pass it on
                else:
                    self._waiting[lane].remove(future)
                raise
            finally:
                if parked is not None:
                    parked(False)
        else:
            self._busy = True
            gap = self._last + self._spacing_s - self._clock()
            if gap > 0:
                await self._sleep(gap)
        self.granted.append(lane)
        try:
            yield
        finally:
            self._end(wrote=True)

    def _end(self, *, wrote: bool) -> None:
        if wrote:
            self._last = self._clock()
        if not self.waiting:
            self._busy = False
            return
        # Still busy: the next turn is decided once the gap has elapsed, so an ack that
        # arrives meanwhile is not passed by a bulk write that was queued first.
        if self._spacing_s > 0:
            self._timer = asyncio.get_running_loop().create_task(self._grant_later())
        else:
            self._grant()

    async def _grant_later(self) -> None:
        gap = self._last + self._spacing_s - self._clock()
        if gap > 0:
            await self._sleep(gap)
        self._grant()

    def _grant(self) -> None:
        for lane in LANES:
            queue = self._waiting[lane]
            while queue:
                future = queue.popleft()
                if not future.done():
                    future.set_result(None)
                    return
        self._busy = False
