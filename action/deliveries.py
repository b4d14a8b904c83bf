"""The notifications a CI run already handled, so a re-delivered one does nothing twice.

Azure DevOps retries a service-hook delivery it saw fail, and a person can re-run a pipeline
run; either hands the Azure Pipelines entry a notification it may already have acted on (the
run driver checks `CiPlatform.delivery` here, `action.run.act`). Each handled notification's
`id` is kept in `.pair/deliveries.json`, which travels on the state branch
(`action.statebranch.DELIVERIES_FILE`) like the rest of the run-state, so every fresh agent
sees what the last one handled. The newest `KEEP` ids are kept; a file that is not what this
module writes counts as "nothing seen" (one log line), never as a failed run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Final

from action.statebranch import DELIVERIES_FILE

__all__ = ["KEEP", "remember", "seen"]

KEEP: Final = 500
_VERSION: Final = 1


def _read(root: Path, say: Callable[[str], None]) -> list[str]:
    path = root / DELIVERIES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError):
        say(f"pairbot: {DELIVERIES_FILE} is unreadable; read as no notification handled")
        return []
    ids = data.get("handled") if isinstance(data, dict) else None
    if not isinstance(ids, list) or data.get("version") != _VERSION:
        say(f"pairbot: {DELIVERIES_FILE} is not pairbot's; read as no notification handled")
        return []
    return [i for i in ids if isinstance(i, str)]


def seen(root: Path, notification: str, say: Callable[[str], None] = print) -> bool:
    """Whether the notification `notification` was already handled."""
    return notification in _read(root, say)


def remember(root: Path, notification: str, say: Callable[[str], None] = print) -> None:
    """Record `notification` as handled (the newest `KEEP` are kept)."""
    ids = [i for i in _read(root, say) if i != notification] + [notification]
    path = root / DELIVERIES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"version": _VERSION, "handled": ids[-KEEP:]}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
