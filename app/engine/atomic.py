"""Whole-file JSON run-state (`state.json`) that is never seen half-written.

A write goes to a temp file in the same directory, is fsynced, then `os.replace`d over the
target and the directory is fsynced, so after a crash the file holds either the old or the new
document. A temp file orphaned by a crash is never read (readers open the exact path).

`mkstemp` creates its file 0600 whatever the umask, so the mode is set before the rename: a
replaced file keeps its own, a new one gets the umask's mode and is always readable by others —
the isolated agent (another OS user) reads the manifests and configs written here, and nothing
written through this module is a secret.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from app.errors import StateCorruptError

__all__ = ["new_file_mode", "read_json", "write_bytes_atomic", "write_json_atomic"]

T = TypeVar("T")


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace `path` with `data` as JSON, atomically and durably."""
    # Serialise before touching the disk so a TypeError leaves no temp file behind.
    write_bytes_atomic(path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode())


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Replace `path` with `payload`, atomically and durably."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the target: os.replace is only atomic within one filesystem.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            _keep_mode(handle.fileno(), path)
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        # BaseException too: a KeyboardInterrupt mid-write must not leave litter either.
        tmp.unlink(missing_ok=True)
        raise
    # The rename lives in the directory; without this a power cut can still bring the old file back.
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _keep_mode(fd: int, path: Path) -> None:
    """Give the temp file the target's permissions, or a new file's (`new_file_mode`)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = new_file_mode()
    os.fchmod(fd, mode)


def new_file_mode() -> int:
    """0666 less the process umask, plus read for group and others (see the module docstring)."""
    return (0o666 & ~_umask()) | 0o044


def _umask() -> int:
    # Read, not set-and-restore: os.umask is process-wide, and another thread may create files
    # meanwhile. Linux reports it in /proc/self/status; elsewhere assume the common 022.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def read_json(path: Path, default: T) -> Any | T:
    """The JSON document at `path`, or `default` when the file does not exist.

    Raises `StateCorruptError` naming the file and the parse problem when it does not parse.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return default
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        problem = f"not UTF-8 ({err.reason} at byte {err.start + 1})"
    except json.JSONDecodeError as err:
        problem = f"{err.msg} at line {err.lineno} column {err.colno}"
    except RecursionError:
        problem = "JSON nested too deeply"
    raise StateCorruptError(
        f"run-state file {path} does not parse: {problem}; "
        "an operator has to repair or remove it by hand"
    )
