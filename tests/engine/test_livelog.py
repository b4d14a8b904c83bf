"""The bounded live log of a running step: appends lines, stops at its bound, never raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.livelog import LIMIT_BYTES, REDACTED, TRUNCATED, LiveLog, live_dir, read_tail
from app.proc import credential_values


def test_lines_are_appended_as_they_come_and_read_back_by_session(tmp_path: Path) -> None:
    log = LiveLog(tmp_path, "s1")
    log.line("first\n")
    # Line-buffered: a reader sees the line before the log closes.
    assert (live_dir(tmp_path) / "s1.log").read_text() == "first\n"
    log.line("second ünïcode")
    log.close()
    log.line("after close")  # ignored
    assert read_tail(tmp_path) == {"s1": ("first", "second ünïcode")}


def test_the_log_stops_at_its_bound_with_one_truncation_line(tmp_path: Path) -> None:
    log = LiveLog(tmp_path, "s1", limit=100)
    for n in range(50):
        log.line(f"line {n:02d}")
    data = log.path.read_bytes()
    assert len(data) <= 100
    lines = data.decode().splitlines()
    assert lines[-1] == TRUNCATED and lines.count(TRUNCATED) == 1
    assert lines[:-1] == [f"line {n:02d}" for n in range(len(lines) - 1)]


def test_the_default_bound_is_256_kib_and_a_tail_is_the_last_lines(tmp_path: Path) -> None:
    log = LiveLog(tmp_path, "s1")
    for n in range(40_000):
        log.line(f"line {n}")
    log.close()
    assert LIMIT_BYTES == 256 * 1024 and log.path.stat().st_size <= LIMIT_BYTES
    tail = read_tail(tmp_path, lines=3)["s1"]
    assert tail[-1] == TRUNCATED and len(tail) == 3


def test_a_new_session_replaces_the_run_directorys_earlier_log(tmp_path: Path) -> None:
    first = LiveLog(tmp_path, "s1")
    first.line("one")
    first.close()
    second = LiveLog(tmp_path, "s2")
    second.open()
    second.close()
    assert read_tail(tmp_path) == {"s2": ()}


def test_an_unwritable_run_directory_stops_the_log_not_the_step(tmp_path: Path) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("a file where the run directory should be")
    log = LiveLog(blocker, "s1")
    log.line("lost")  # no error
    log.close()
    assert read_tail(blocker) == {}
    assert read_tail(tmp_path / "missing") == {}
    (live_dir(tmp_path) / "odd.log").mkdir(parents=True)  # unreadable as a log: skipped
    log = LiveLog(tmp_path, "s2")
    log.line("kept")
    log.open()  # already open: nothing changes
    log.line("still kept")
    log.close()
    assert read_tail(tmp_path) == {"s2": ("kept", "still kept")}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_stops_the_log_not_the_step(tmp_path: Path) -> None:
    live_dir(tmp_path).mkdir()
    (live_dir(tmp_path) / "s1.log").symlink_to("/dev/full")  # every write fails: ENOSPC
    log = LiveLog(tmp_path, "s1")
    log.line("lost")
    log.line("ignored")
    log.close()


def test_a_bound_too_small_for_the_truncation_line_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must exceed"):
        LiveLog(tmp_path, "s1", limit=10)


def test_credential_values_are_hidden_in_every_line(tmp_path: Path) -> None:
    key = "sk-ant-0123456789"
    env = {"ANTHROPIC_API_KEY": key, "GITHUB_TOKEN": "ghs_abcdefgh", "HOME": "/home/runner/x"}
    hide = credential_values(env)
    assert set(hide) == {key, "ghs_abcdefgh"}  # HOME is no credential
    log = LiveLog(tmp_path, "s1", hide=hide)
    log.line(f"$ env | grep KEY\nANTHROPIC_API_KEY={key} and ghs_abcdefgh in /home/runner/x")
    log.close()
    assert read_tail(tmp_path)["s1"] == (
        "$ env | grep KEY",
        f"ANTHROPIC_API_KEY={REDACTED} and {REDACTED} in /home/runner/x",
    )


def test_short_or_empty_values_are_not_credentials_to_scrub() -> None:
    assert credential_values({"API_KEY": "", "MY_PAT": "short", "INPUT_MODE": "implement"}) == ()
