"""The batch journal file: append-only JSON Lines, one JSON object per line, crash-tolerant.

A crash (or a reader racing a writer) can leave the last line torn: bytes without the final
newline. Readers drop that tail silently and the next appender truncates it first, so every
record still lands on its own line. A *complete* line that does not parse is not a crash
artefact, so it raises `JournalCorruptError` (operator-facing) instead of being skipped.

Appenders serialise on an exclusive `flock` of the journal itself, because agents run
`pairbot batch report` while the engine appends; readers take no lock and rely on the torn-tail
rule instead.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.errors import JournalCorruptError

__all__ = ["append_record", "append_records", "count_records", "read_records"]

_CHUNK = 1 << 20


def read_records(path: Path, start: int = 0) -> list[dict[str, Any]]:
    """Every complete record from index `start` on, in order; a missing file is empty.

    Lines before `start` are skipped without parsing (a step reads only its session's delta).

    Raises `JournalCorruptError` naming the file, the 1-based line and the problem when a
    newline-terminated line is blank or is not a JSON object.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    # The last segment is b"" when the file ends with a newline, else a torn write: drop it.
    del lines[-1]
    records: list[dict[str, Any]] = []
    loads = json.loads
    for number, line in enumerate(lines[start:], start=start + 1):
        # Fast path first; the reason for a failure is only worked out when there is one.
        try:
            # Decode explicitly: json.loads(bytes) guesses UTF-16/32 from NUL bytes; we write UTF-8.
            value = loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            raise JournalCorruptError(
                f"journal {path} line {number} is corrupt: {_line_problem(line)}; "
                "an operator has to repair or remove that line by hand"
            )
        records.append(value)
    return records


def _line_problem(line: bytes) -> str:
    """Why a complete journal line is not a JSON object, in a few words."""
    if not line.strip():
        return "blank line"
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as err:
        return f"not UTF-8 ({err.reason} at byte {err.start + 1})"
    except json.JSONDecodeError as err:
        return f"{err.msg} at column {err.colno}"
    except RecursionError:
        return "JSON nested too deeply"
    return f"expected a JSON object, got {_json_type(value)}"


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number"}
    return names.get(type(value), "a number" if isinstance(value, float) else "null")


def count_records(path: Path) -> int:
    """How many complete (newline-terminated) lines the journal holds; nothing is parsed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        count, _ = _scan(fd)
    finally:
        os.close(fd)
    return count


def append_record(path: Path, record: Mapping[str, Any]) -> int:
    """Append one record durably; returns its 0-based index in the journal."""
    return append_records(path, [record])[0]


def append_records(path: Path, records: Sequence[Mapping[str, Any]]) -> list[int]:
    """Append records durably, all in one write; returns their 0-based indices.

    An empty sequence touches nothing and returns []. A record that cannot be serialised raises
    before the file is opened, so nothing is written.
    """
    if not records:
        return []
    # Serialise first: a TypeError must not leave the journal half-written.
    payload = "".join(
        json.dumps(dict(record), separators=(",", ":"), ensure_ascii=False) + "\n"
        for record in records
    ).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    # O_RDWR rather than O_WRONLY: the torn-tail scan has to read what is there.
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        count, complete_end = _scan(fd)
        if os.fstat(fd).st_size != complete_end:
            # A writer died mid-line; cut its tail so our first record starts on a fresh line.
            os.ftruncate(fd, complete_end)
        written = os.write(fd, payload)
        if written != len(payload):
            # A short write on a regular file means the disk is full: undo the fragment rather
            # than leave a torn tail that the next appender would have to clean up.
            os.ftruncate(fd, complete_end)
            raise OSError(f"short write to journal {path}: {written} of {len(payload)} bytes")
        os.fsync(fd)
    finally:
        # Closing releases the flock.
        os.close(fd)
    if not existed:
        _fsync_dir(path.parent)
    return list(range(count, count + len(records)))


def _scan(fd: int) -> tuple[int, int]:
    """(complete lines, byte offset just past the last newline), read in chunks with pread."""
    count = 0
    complete_end = 0
    offset = 0
    while chunk := os.pread(fd, _CHUNK, offset):
        count += chunk.count(b"\n")
        last = chunk.rfind(b"\n")
        if last >= 0:
            complete_end = offset + last + 1
        offset += len(chunk)
    return count, complete_end


def _fsync_dir(directory: Path) -> None:
    """Make a newly created directory entry durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
