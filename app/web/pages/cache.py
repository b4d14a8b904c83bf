"""What the status pages derived from run-state files, kept while those files are unchanged.

    stamp(path) -> Stamp      who the file is now: (inode, size, mtime_ns, ctime_ns), or None
    Memo(capacity)            a bounded, thread-safe map from a key to what was derived

A page request stats each journal and state file (cheap) and re-parses only those whose stamp
changed, so its cost follows what changed, not the length of every card's history. A journal
only grows (its size moves with every append) and `state.json` is replaced by a rename (its
inode moves), so an unchanged stamp means unchanged content; the ctime covers anything that
rewrites a file in place. Keys carry the stamps: an entry for an old stamp is never hit
again, and the least recently used entries go once there are `capacity` of them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar, cast

Stamp = tuple[int, int, int, int] | None
T = TypeVar("T")


def stamp(path: Path) -> Stamp:
    """The file's identity and version; None when it does not exist (or cannot be read)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class Memo:
    """Derived values by key, the `capacity` most recently used (0 keeps nothing: every
    `get` derives afresh — the uncached reader). The pages read in worker threads, so every
    access takes a lock; deriving happens outside it (two threads may both derive a value
    once, which is harmless)."""

    def __init__(self, capacity: int = 8192) -> None:
        self._capacity = capacity
        self._values: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, derive: Callable[[], T]) -> T:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                self.hits += 1
                return cast(T, self._values[key])
            self.misses += 1
        value = derive()
        if self._capacity > 0:
            with self._lock:
                self._values[key] = value
                while len(self._values) > self._capacity:
                    self._values.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._values)
