"""The metrics observer: keeps a run's books (`metrics.json`, `metrics.md`) current as it goes.

Seed 004's host-side observer. While a step of a batch runs, it tails ONLY that batch's
journal: every `interval` seconds (5 by default) it looks at the file, and when the journal
changed since it last looked (an observed boundary: a step started, an agent reported, an
outcome, a publication) it derives the books again (`app.cycle.books`) and writes the ones that
differ, each atomically. It writes them once when it starts and once more when the step ends,
after the step's last record, so the books a step leaves always reconcile with its journal.

    async with observing(locus, batch):
        ...  # the step

The books are an aid: an observer that cannot read the journal (a corrupt line) or write a
book logs it once and lets the step go on; nothing the step decides reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from app.cycle.books import books_of, write_books
from app.engine import jsonl
from app.engine.runstate import RunLocus
from app.errors import OperatorError

log = logging.getLogger(__name__)

INTERVAL_S = 5.0  # seed 004's default observation interval


@dataclass
class MetricsObserver:
    """Observes one batch's journal and writes its books when a figure may have changed."""

    locus: RunLocus
    batch: str
    seen: tuple[int, int] | None = None  # the journal's (size, mtime_ns) when last observed
    writes: int = 0  # books written (a test and the log can tell it worked)
    failed: bool = field(default=False, repr=False)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.locus.journal.stat()
        except FileNotFoundError:
            return None
        return stat.st_size, stat.st_mtime_ns

    def observe(self) -> list[str]:
        """One boundary check: when the journal changed, the books written (else [])."""
        stamp = self._stamp()
        if stamp is not None and stamp == self.seen:
            return []
        try:
            records = jsonl.read_records(self.locus.journal)
            written = write_books(self.locus, books_of(self.batch, records))
        except (OperatorError, OSError, ValueError) as err:
            if not self.failed:  # said once per step, not every interval
                log.warning("%s: its metrics were not updated: %s", self.batch, err)
            self.failed = True
            return []
        self.seen = stamp
        self.writes += len(written)
        return written

    async def watch(self, stop: asyncio.Event, interval: float) -> None:
        """Observe every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
            if not stop.is_set():
                await asyncio.to_thread(self.observe)


@contextlib.asynccontextmanager
async def observing(
    locus: RunLocus, batch: str, interval: float | None = None
) -> AsyncIterator[MetricsObserver]:
    """Keep `batch`'s books current for the duration of the block (see the module doc)."""
    observer = MetricsObserver(locus, batch)
    await asyncio.to_thread(observer.observe)
    stop = asyncio.Event()
    task = asyncio.create_task(observer.watch(stop, INTERVAL_S if interval is None else interval))
    try:
        yield observer
    finally:
        stop.set()
        await task
        # The reconciling observation: the step's last records are in the books.
        await asyncio.to_thread(observer.observe)
