"""Which files travel on the state branch, and when its lock may be reclaimed. No git here.

    is_state_path     a branch-relative path is a run-state file the branch carries (not the
                      lock): a batch's `journal.jsonl` and `state.json`, a card batch's
                      `batch.yaml`, a finished card's lesson, the acks, deliveries,
                      continuation and catch-up files
    state_paths       the run-state files under a directory that a push lays over the branch
    lock_is_stale     whether a `lock.json` is old enough (or unreadable) to be reclaimed
    write_bytes_atomic  a pulled file written whole or not at all

`action.statebranch` reads and writes the branch; this module only names what is on it.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from action.acks import ACKS_FILE
from action.run.catchup import CATCHUP_FILE  # how far the catch-up looked
from app.engine.names import NAME_PATTERN

LOCK_FILE = "lock.json"
DELIVERIES_FILE = ".pair/deliveries.json"
CONTINUATION_FILE = ".pair/continuation.json"  # chained runs today (action.run.continuation)
_STATE_FILES = (ACKS_FILE, DELIVERIES_FILE, CONTINUATION_FILE, CATCHUP_FILE)
_BATCH = NAME_PATTERN.pattern.removeprefix("^").removesuffix("$")
_RUN_FILE = re.compile(rf"^\.pair/batches/(?P<batch>{_BATCH})/run/(?:journal\.jsonl|state\.json)$")
_MANIFEST = re.compile(rf"^\.pair/batches/(?P<batch>{_BATCH})/batch\.yaml$")
_LESSON = re.compile(r"^\.pair/lessons/card-[1-9][0-9]*-[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.md$")


def is_state_path(path: str) -> bool:
    """Whether a branch-relative path is a run-state file this module carries (not the lock)."""
    return (
        path in _STATE_FILES
        or _RUN_FILE.match(path) is not None
        or _MANIFEST.match(path) is not None
        or _LESSON.match(path) is not None
    )


def state_paths(
    from_dir: Path, on_branch: Collection[str], card_batches: Iterable[str]
) -> list[str]:
    """The run-state files under `from_dir` a push lays over the branch, sorted: each batch's
    `journal.jsonl` and `state.json`, each lesson, the `batch.yaml` of every batch in
    `card_batches` or already recorded among the paths `on_branch`, the acks, deliveries,
    continuation and catch-up files."""
    paths: set[str] = set()
    batches_dir = from_dir / ".pair" / "batches"
    for pattern in ("*/run/journal.jsonl", "*/run/state.json"):
        for found in batches_dir.glob(pattern):
            relative = found.relative_to(from_dir).as_posix()
            if _RUN_FILE.match(relative) and found.is_file():
                paths.add(relative)
    for found in (from_dir / ".pair" / "lessons").glob("card-*.md"):
        relative = found.relative_to(from_dir).as_posix()
        if _LESSON.match(relative) and found.is_file():
            paths.add(relative)
    recorded = {m["batch"] for path in on_branch if (m := _MANIFEST.match(path)) is not None}
    for batch in {*card_batches, *recorded}:
        relative = f".pair/batches/{batch}/batch.yaml"
        if not _MANIFEST.match(relative):
            raise ValueError(f"not a batch name: {batch!r}")
        if (from_dir / relative).is_file():
            paths.add(relative)
    paths.update(name for name in _STATE_FILES if (from_dir / name).is_file())
    return sorted(paths)


def lock_is_stale(
    content: Mapping[str, object] | None, now: datetime, stale_after_s: float
) -> bool:
    """Whether a lock may be reclaimed: its `at` is more than `stale_after_s` before `now`.

    A lock whose content cannot be read (`None`) or has no parseable `at` was not written by a
    live pairbot tick that we could wait for, so it counts as stale.
    """
    if content is None:
        return True
    at = _parse_time(content.get("at"))
    if at is None:
        return True
    return (now - at).total_seconds() > stale_after_s


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Replace `path` with `payload` via a temp file in the same directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
