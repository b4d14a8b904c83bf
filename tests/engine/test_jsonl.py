"""The journal file: round trip, torn tails, corruption, indices and concurrent appenders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.engine.jsonl import append_record, append_records, count_records, read_records
from app.errors import JournalCorruptError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "records",
    [
        pytest.param([{"a": 1}], id="one"),
        pytest.param([{"kind": "progress", "n": i} for i in range(50)], id="many"),
        pytest.param([{}], id="empty-object"),
        pytest.param([{"msg": "héllo ✓ 日本", "nl": "a\nb", "sep": "x\u2028y"}], id="unicode"),
        pytest.param([{"nested": {"list": [1, 2.5, None, True], "s": 'q"uote'}}], id="nested"),
    ],
)
def test_round_trip(tmp_path: Path, records: list[dict[str, Any]]) -> None:
    path = tmp_path / "run" / "journal.jsonl"

    for record in records:
        append_record(path, record)

    assert read_records(path) == records
    assert count_records(path) == len(records)
    # One object per line, nothing else.
    assert path.read_bytes().count(b"\n") == len(records)


def test_missing_file_is_an_empty_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"

    assert read_records(path) == []
    assert count_records(path) == 0
    assert not path.exists()


def test_indices_are_zero_based_positions(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"

    assert append_record(path, {"n": 0}) == 0
    assert append_record(path, {"n": 1}) == 1
    assert append_records(path, [{"n": 2}, {"n": 3}, {"n": 4}]) == [2, 3, 4]
    assert append_records(path, []) == []
    assert count_records(path) == 5
    assert [r["n"] for r in read_records(path)] == [0, 1, 2, 3, 4]


def test_batch_is_one_write_of_compact_lines(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"

    append_records(path, [{"a": 1, "b": "ü"}, {"c": [1, 2]}])

    assert path.read_bytes() == '{"a":1,"b":"ü"}\n{"c":[1,2]}\n'.encode()


def test_unserialisable_record_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    append_record(path, {"ok": True})
    before = path.read_bytes()

    with pytest.raises(TypeError):
        append_records(path, [{"fine": 1}, {"bad": object()}])

    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "torn",
    [
        pytest.param(b'{"kind":"prog', id="half-object"),
        pytest.param(b"{", id="one-byte"),
        pytest.param('{"msg":"日'.encode()[:-1], id="cut-mid-utf8"),
        pytest.param(b"garbage without newline", id="garbage"),
    ],
)
def test_torn_tail_is_dropped_then_truncated(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "journal.jsonl"
    append_records(path, [{"n": 0}, {"n": 1}])
    with path.open("ab") as handle:
        handle.write(torn)

    assert read_records(path) == [{"n": 0}, {"n": 1}]
    assert count_records(path) == 2

    assert append_record(path, {"n": 2}) == 2

    assert path.read_bytes() == b'{"n":0}\n{"n":1}\n{"n":2}\n'
    assert read_records(path) == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_torn_only_line_is_an_empty_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"n":')

    assert read_records(path) == []
    assert count_records(path) == 0
    assert append_record(path, {"n": 0}) == 0
    assert path.read_bytes() == b'{"n":0}\n'


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        pytest.param(b'{"n":0}\nnot json\n{"n":2}\n', 2, "Expecting value", id="garbage-middle"),
        pytest.param(b'{"n":0}\n{"n":1}\n{"n":\n', 3, "Expecting value", id="garbage-last"),
        pytest.param(b'{"n":0}\n\n{"n":2}\n', 2, "blank line", id="blank-middle"),
        pytest.param(b"\n", 1, "blank line", id="blank-only"),
        pytest.param(b'{"n":0}\n[1,2]\n', 2, "got an array", id="array"),
        pytest.param(b'"text"\n{"n":1}\n', 1, "got a string", id="string"),
        pytest.param(b'{"n":0}\n42\n{"n":2}\ntorn', 2, "got a number", id="number-then-torn"),
        pytest.param(b"null\n", 1, "got null", id="null"),
        pytest.param(b'{"n":0}\n{"s":"\xff"}\n', 2, "not UTF-8", id="bad-utf8"),
        pytest.param(b'{"a":1}{"b":2}\n', 1, "Extra data", id="two-objects-one-line"),
    ],
)
def test_complete_bad_line_is_corruption(
    tmp_path: Path, content: bytes, line: int, problem: str
) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(content)

    with pytest.raises(JournalCorruptError) as caught:
        read_records(path)

    message = str(caught.value)
    assert str(path) in message
    assert f"line {line} " in message
    assert problem in message
    assert caught.value.exit_code == 1


def test_corruption_is_not_repaired_by_append(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"n":0}\noops\n')

    assert append_record(path, {"n": 2}) == 2

    assert path.read_bytes() == b'{"n":0}\noops\n{"n":2}\n'
    with pytest.raises(JournalCorruptError, match="line 2 "):
        read_records(path)


def test_reading_100k_lines_returns_every_record(tmp_path: Path) -> None:
    # Speed is measured by benchmarks/engine_scale.py; tests never assert a wall-clock time.
    path = tmp_path / "journal.jsonl"
    line = json.dumps({"kind": "progress", "change": "c", "message": "x" * 160}) + "\n"
    path.write_text(line * 100_000)

    records = read_records(path)

    assert len(records) == 100_000
    assert records[-1]["message"] == "x" * 160


_WRITER = """
import json, sys
from pathlib import Path
from app.engine.jsonl import append_record
path, writer, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
indices = [append_record(path, {"writer": writer, "i": i, "pad": "p" * 150}) for i in range(count)]
print(json.dumps(indices))
"""


def test_concurrent_appends_from_processes_all_land(tmp_path: Path) -> None:
    path = tmp_path / "run" / "journal.jsonl"
    writers, per_writer = 4, 200
    procs: list[subprocess.Popen[str]] = []
    try:
        for writer in range(writers):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _WRITER, str(path), str(writer), str(per_writer)],
                    cwd=REPO,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()

    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    indices = [i for out, _ in outputs for i in json.loads(out)]
    assert sorted(indices) == list(range(writers * per_writer))

    records = read_records(path)
    assert count_records(path) == len(records) == writers * per_writer
    for writer in range(writers):
        # Each writer appends in order, so its records appear in order.
        assert [r["i"] for r in records if r["writer"] == writer] == list(range(per_writer))
    # Every returned index points at the record that writer appended.
    for writer, (out, _) in enumerate(outputs):
        for i, index in enumerate(json.loads(out)):
            assert records[index]["writer"] == writer
            assert records[index]["i"] == i
