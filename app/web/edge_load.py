"""How busy the webhook edge is, told to the worker so that its jobs yield to the answers.

    EdgeLoad(tell)      `begin()` / `end()` around each delivery the edge answers, from its
                        body read to its answer; `tell(True)` when `BUSY_AT` deliveries are in
                        flight, `tell(False)` when none is

A delivery waits on its answer (GitHub gives up on it after 10 seconds, and a burst of them is
answered one after another); a job waits on nothing but the queue. On a machine without a core
to spare, every job the worker runs while deliveries queue up at the edge takes CPU their
answers need — in its own process as much as on the edge's loop (benchmarks/command_path.py:
at saturation the edge ran at 60% of a core beside the worker, the load and the API's answers).
So while the edge is busy the worker runs one job at a time (`Worker.yield_to_edge`), and its
full concurrency again once no delivery is in flight. One job keeps running throughout: a
flood of deliveries slows the queue, it never stops it.

Busy starts at `BUSY_AT` deliveries in flight (one or two overlap at any ordinary rate: ten
commands a second never reach it) and ends at none, so a burst is one busy spell, not a
message per delivery. A delivery counts from the moment its body is read (app.web.app): a
client still sending one costs the edge nothing, and clients that send their bodies slowly
must not be able to hold the worker to one job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

BUSY_AT: Final = 4


class EdgeLoad:
    """The deliveries in flight at the edge, and whether it is busy (see the module docstring).
    Called on the edge's event loop only."""

    __slots__ = ("_busy_at", "_tell", "busy", "in_flight")

    def __init__(self, tell: Callable[[bool], None], busy_at: int = BUSY_AT) -> None:
        if busy_at < 1:
            raise ValueError("busy_at is a count of deliveries in flight, at least 1")
        self._tell = tell
        self._busy_at = busy_at
        self.in_flight = 0
        self.busy = False

    def begin(self) -> None:
        """A delivery arrived (its answer is not sent yet)."""
        self.in_flight += 1
        if not self.busy and self.in_flight >= self._busy_at:
            self.busy = True
            self._tell(True)

    def end(self) -> None:
        """A delivery was answered, or its client left."""
        self.in_flight -= 1
        if self.busy and self.in_flight <= 0:
            self.busy = False
            self._tell(False)
