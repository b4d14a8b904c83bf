"""The `pair-state` lock's two knobs, read the same way by both CI entries, in a module light
enough to read before any lock is taken.

    PAIR_STATE_LOCK_WAIT_S     how long a command (never a tick) waits for a running step
    PAIR_STATE_STALE_AFTER_S   after how long a lock left by a dead run is reclaimed

`action.run.settings` reads them for `action.context` (the GitHub Action) and
`action.azure.settings` (Azure Pipelines); `action.statebranch`, which loads asyncio and the git
plumbing, applies them. The readers take the variable's raw value and are pure.
"""

from __future__ import annotations

import math
from typing import Final

from app.errors import UserError

__all__ = [
    "DEFAULT_LOCK_WAIT_S",
    "DEFAULT_STALE_AFTER_S",
    "ENV_LOCK_WAIT_S",
    "ENV_STALE_AFTER_S",
    "MAX_LOCK_WAIT_S",
    "lock_wait_s",
    "stale_after_s",
]

ENV_LOCK_WAIT_S: Final = "PAIR_STATE_LOCK_WAIT_S"
ENV_STALE_AFTER_S: Final = "PAIR_STATE_STALE_AFTER_S"
DEFAULT_LOCK_WAIT_S: Final = 15 * 60.0
MAX_LOCK_WAIT_S: Final = 6 * 3600.0  # a job's own limit is 6 hours
# After how long a lock left by a dead run is reclaimed (a step rarely runs longer).
DEFAULT_STALE_AFTER_S: Final = 30 * 60.0


def _seconds(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        return math.nan
    return seconds if math.isfinite(seconds) else math.nan


def lock_wait_s(raw: str | None) -> float:
    """PAIR_STATE_LOCK_WAIT_S (None: not given): 0 to 6 hours. `UserError` otherwise. Pure."""
    if raw is None:
        return DEFAULT_LOCK_WAIT_S
    seconds = _seconds(raw)
    if not 0 <= seconds <= MAX_LOCK_WAIT_S:
        raise UserError(
            f"{ENV_LOCK_WAIT_S}={raw!r} is not allowed; allowed: a number of seconds from 0 to "
            f"{MAX_LOCK_WAIT_S:.0f} (default {DEFAULT_LOCK_WAIT_S:.0f})"
        )
    return seconds


def stale_after_s(raw: str | None) -> float:
    """PAIR_STATE_STALE_AFTER_S (None: not given): a finite number of seconds above 0. Pure."""
    if raw is None:
        return DEFAULT_STALE_AFTER_S
    seconds = _seconds(raw)
    if not seconds > 0:
        raise UserError(
            f"{ENV_STALE_AFTER_S}={raw!r} is not allowed; allowed: a number of seconds above 0 "
            f"(default {DEFAULT_STALE_AFTER_S:.0f}); a value below the longest step lets two "
            "runs overlap"
        )
    return seconds
