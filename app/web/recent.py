"""The webhook edge's memory of recent deliveries, and its one structured log line per delivery.

`RecentDeliveries` is a bounded least-recently-used set of (source, delivery id): a GitHub
redelivery whose X-GitHub-Delivery is in it is answered "duplicate" before its body is even
read (an Azure DevOps one, whose id is in the body, before the store is asked). Only
deliveries whose signature verified are remembered, so a forged header can only earn that
answer, never an effect. It only saves work. The store's delivery record stays
the authority for deliveries that queue jobs (another replica, or this one after a restart,
does not share this memory), and a delivery that queues nothing needs no authority: routed
again, it queues nothing again. An id is remembered only once the delivery was answered 2xx,
so a delivery refused for a full store (503) is processed when GitHub redelivers it.

`Line` renders one delivery's outcome as `key=value` pairs (logfmt: a value with a space, a
quote, an `=` or a control character is a JSON string), formatted only when the record is
emitted.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Final

_PLAIN: Final = re.compile(r"[A-Za-z0-9_.:/#@+,\[\]-]+")  # written as it is; else a JSON string


class RecentDeliveries:
    """At most `capacity` keys, the least recently seen dropped first (0: remembers none)."""

    __slots__ = ("_keys", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be 0 or more, not {capacity}")
        self.capacity = capacity
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def seen(self, source: str, delivery: str) -> bool:
        """Whether the delivery is remembered (a hit makes it the most recent)."""
        key = (source, delivery)
        if key not in self._keys:
            return False
        self._keys.move_to_end(key)
        return True

    def remember(self, source: str, delivery: str) -> None:
        if self.capacity == 0:
            return
        self._keys[(source, delivery)] = None
        self._keys.move_to_end((source, delivery))
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)


def _value(value: object) -> str:
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    return json.dumps(text)


class Line:
    """`delivery source=… event=… id=… outcome=… [key=value…]`, built when a handler formats it."""

    __slots__ = ("_fields",)

    def __init__(self, **fields: object) -> None:
        self._fields = fields

    def __str__(self) -> str:
        return " ".join(
            f"{key}={_value(value)}" for key, value in self._fields.items() if value is not None
        )
