"""The `pair-state` lock's defaults, in a module light enough to read before any lock is taken.

`action.context` (the GitHub Action's settings, read at start-up) and `action.azure.settings`
name the defaults; `action.statebranch`, which loads asyncio and the git plumbing, applies them.
"""

from __future__ import annotations

from typing import Final

# After how long a lock left by a dead run is reclaimed (a step rarely runs longer).
DEFAULT_STALE_AFTER_S: Final = 30 * 60.0
