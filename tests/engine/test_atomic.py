"""Atomic run-state files: round trip, crash leftovers, corruption and clean-up on failure."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from app.engine.atomic import read_json, write_bytes_atomic, write_json_atomic
from app.errors import StateCorruptError

_MISSING = object()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"parked": {"c1": {"state": "blocked"}}}, id="object"),
        pytest.param([1, "two", None, True, 2.5], id="array"),
        pytest.param({"msg": "héllo ✓ 日本\n"}, id="unicode"),
        pytest.param({}, id="empty"),
        pytest.param(None, id="null"),
    ],
)
def test_round_trip(tmp_path: Path, data: Any) -> None:
    path = tmp_path / "run" / "state.json"

    write_json_atomic(path, data)

    assert read_json(path, _MISSING) == data
    assert json.loads(path.read_text(encoding="utf-8")) == data
    assert _leftovers(path) == []


def test_overwrite_replaces_whole_document(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"long": "x" * 10_000})

    write_json_atomic(path, {"short": 1})

    assert read_json(path, None) == {"short": 1}
    assert _leftovers(path) == []


def test_missing_file_gives_default(tmp_path: Path) -> None:
    assert read_json(tmp_path / "state.json", _MISSING) is _MISSING


def test_temp_file_left_by_a_crash_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"generation": 1})
    # What a crash between mkstemp and os.replace leaves: a half-written temp file beside it.
    orphan = tmp_path / ".state.json.k2j4x9_q.tmp"
    orphan.write_text('{"generation": 2, "trunc')

    assert read_json(path, None) == {"generation": 1}

    write_json_atomic(path, {"generation": 3})

    assert read_json(path, None) == {"generation": 3}
    assert orphan.exists()  # not ours to delete; it is harmless


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b'{"parked": ', "Expecting value", id="truncated"),
        pytest.param(b"", "Expecting value", id="empty"),
        pytest.param(b"{}\n{}", "Extra data", id="two-documents"),
        pytest.param(b'{"a": "\xff"}', "not UTF-8", id="bad-utf8"),
    ],
)
def test_corrupt_file_raises_state_corrupt(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)

    with pytest.raises(StateCorruptError) as caught:
        read_json(path, None)

    assert str(path) in str(caught.value)
    assert problem in str(caught.value)


def test_unserialisable_data_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"keep": True})

    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": object()})

    assert read_json(path, None) == {"keep": True}
    assert _leftovers(path) == []


def test_failed_replace_removes_temp_file(tmp_path: Path) -> None:
    # A directory where the file should be makes os.replace fail after the temp file is written.
    path = tmp_path / "state.json"
    (path / "occupied").mkdir(parents=True)

    with pytest.raises(OSError):  # IsADirectoryError on Linux; the errno varies by platform
        write_json_atomic(path, {"a": 1})

    assert _leftovers(path) == []


def test_existing_permissions_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"a": 1})
    path.chmod(0o640)

    write_json_atomic(path, {"a": 2})

    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def _leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp"))


def test_a_new_file_is_readable_by_other_users_whatever_mkstemp_made(tmp_path: Path) -> None:
    # The isolated agent (another OS user) must read the manifests written through here.
    target = tmp_path / "batch.yaml"
    old = os.umask(0o077)
    try:
        write_bytes_atomic(target, b"phases: []\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_new_file_follows_the_umask_otherwise(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    old = os.umask(0o002)
    try:
        write_json_atomic(target, {})
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o664


def test_a_replaced_file_keeps_its_own_mode(tmp_path: Path) -> None:
    target = tmp_path / "private.json"
    target.write_text("{}")
    target.chmod(0o600)
    write_json_atomic(target, {"a": 1})
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
