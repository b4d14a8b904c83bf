"""The status pages re-read only the run-state that changed: a card's journal, its parks and the
project config are derived once per version (their stamps), a changed file is read again at
once (never a stale page), and only a running step's live log is read. Counts of what was
derived prove it; nothing here measures time (benchmarks/pages_read.py does)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.engine.jsonl import append_record
from app.engine.livelog import LiveLog, read_tail
from app.engine.runstate import RunLocus
from app.web.app import create_app
from app.web.pages.cache import Memo, stamp
from app.web.pages.read import LocalReader, card_views, cohort_of_local, read_local
from app.web.viewer import Viewer
from tests.web.conftest import AppGitHub, app_settings, github_forges, served
from tests.web.test_pages import CARD_BATCH, journal


def card_batch(root: Path, number: int, records: list[dict[str, Any]]) -> RunLocus:
    directory = root / ".pair" / "batches" / f"card-{number}"
    directory.mkdir(parents=True)
    (directory / "batch.yaml").write_text(CARD_BATCH.format(n=number))
    locus = RunLocus.for_batch(root, f"card-{number}")
    locus.directory.mkdir(parents=True)
    key = f"card-{number}"
    for record in records:
        append_record(locus.journal, {**record, "key": key} if record.get("key") else record)
    return locus


def project(tmp_path: Path) -> Path:
    from app.cli.demo import prepare

    root = tmp_path / "root"
    prepare(root)
    return root


def test_an_unchanged_journal_is_derived_once_and_a_changed_one_at_once(tmp_path: Path) -> None:
    root = project(tmp_path)
    seven = card_batch(root, 7, journal())
    card_batch(root, 8, journal())
    reader = LocalReader(root, None)
    first = card_views(reader(), [], "octo/widget")
    derived = reader.memo.misses
    assert derived == 3  # the config, and each card's journal with its parks
    again = card_views(reader(), [], "octo/widget")
    assert reader.memo.misses == derived and again == first
    # A step starts on card 7: the next read shows it, and derives card 7 alone again.
    append_record(
        seven.journal,
        {"kind": "step-started", "key": "card-7", "at": "2026-12-01T10:30:00+00:00",
         "transition": "verify", "session": "s9"},
    )  # fmt: skip
    log = LiveLog(seven.directory, "s9")
    log.line("checking the <login> form")
    log.close()
    views = {v.number: v for v in card_views(reader(), [], "octo/widget")}
    assert reader.memo.misses == derived + 1
    running = views[7].running
    assert running is not None and running.session == "s9"
    assert running.live_output == ("checking the <login> form",)
    assert views[8].running is None and views[8] == {v.number: v for v in first}[8]
    # Rewritten in place, to the same size and with its old mtime, it still reads as changed.
    before = stamp(seven.journal)
    assert before is not None
    text = seven.journal.read_bytes()
    seven.journal.write_bytes(text.replace(b"<b>login</b>", b"<b>LOGIN</b>"))
    os.utime(seven.journal, ns=(before[2], before[2]))
    assert stamp(seven.journal) != before
    views = {v.number: v for v in card_views(reader(), [], "octo/widget")}
    assert views[7].title == "Add <b>LOGIN</b>" and views[8].title == "Add <b>login</b>"


def test_a_park_and_a_config_change_are_seen_at_once(tmp_path: Path) -> None:
    root = project(tmp_path)
    locus = card_batch(root, 7, journal())
    reader = LocalReader(root, None)
    (view,) = card_views(reader(), [], "o/r")
    assert view.status == "in-progress" and view.max_fix_rounds == 2  # the demo's config
    locus.state.write_text(
        '{"parks": {"card-7": {"state": "needs-input", "transition": "apply",'
        ' "reason": "which database?"}}}'
    )
    (parked,) = card_views(reader(), [], "o/r")
    assert (parked.status, parked.why) == ("needs-input", "which database?")
    config = root / ".pair" / "config.yaml"
    config.write_text(config.read_text().replace("maxFixRounds: 2", "maxFixRounds: 5"))
    (five,) = card_views(reader(), [], "o/r")
    assert five.max_fix_rounds == 5
    (batch,) = [b for b in reader().batches if b.name == "card-7"]
    assert batch.status == "needs-input" and batch.card == 7


def test_the_cached_reader_shows_what_the_uncached_one_shows(tmp_path: Path) -> None:
    root = project(tmp_path)
    card_batch(root, 7, journal(running=True))
    broken = card_batch(root, 9, [])
    broken.journal.write_text('{"kind": "cycle"}\nnot json\n')
    reader = LocalReader(root, None)
    for _ in range(2):  # cold, then from the memo
        cached, plain = reader(), read_local(root, None)
        assert card_views(cached, [], "o/r") == card_views(plain, [], "o/r")
        assert cached.batches == plain.batches
        viewer = Viewer.everyone()
        assert cohort_of_local(cached, viewer, "o/r") == cohort_of_local(plain, viewer, "o/r")
    errors = [b for b in reader().batches if b.error]
    assert [b.name for b in errors] == ["card-9"] and "line 2" in errors[0].error


def test_a_page_request_after_a_journal_grows_shows_the_new_step(tmp_path: Path) -> None:
    root = project(tmp_path)
    locus = card_batch(root, 7, journal())
    app = create_app(
        app_settings(tmp_path),
        github=github_forges(AppGitHub()),
        poll_s=0.05,
        local=LocalReader(root, None),
        root_repo="octo/widget",
    )
    with served(app) as running:
        before = running.page("/api/v1/cards/octo/widget/7").json()["card"]
        append_record(
            locus.journal,
            {"kind": "step-started", "key": "card-7", "at": "2026-12-01T10:30:00+00:00",
             "transition": "publish", "session": "s9"},
        )  # fmt: skip
        after = running.page("/api/v1/cards/octo/widget/7").json()["card"]
        fragment = running.page("/cards/octo/widget/7/fragment").text
    assert before["running"] is False and after["running"] is True
    assert len(after["steps"]) == len(before["steps"]) + 1
    assert 'data-transition="publish"' in fragment


def test_the_memo_keeps_the_most_recently_used_and_zero_keeps_nothing() -> None:
    memo = Memo(2)
    calls: list[str] = []

    def make(name: str) -> Any:
        return lambda: calls.append(name) or name

    for name in ("a", "b", "a", "c", "b", "a"):
        memo.get(name, make(name))
    assert calls == ["a", "b", "c", "b", "a"] and len(memo) == 2
    none = Memo(0)
    none.get("a", make("a"))
    none.get("a", make("a"))
    assert calls[-2:] == ["a", "a"] and len(none) == 0


def test_only_the_named_sessions_live_logs_are_read(tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    for session in ("s1", "s2"):  # a run keeps one log; a batch run elsewhere may leave two
        (tmp_path / "live" / f"{session}.log").write_text(f"{session} says hi\n")
    assert set(read_tail(tmp_path)) == {"s1", "s2"}
    assert read_tail(tmp_path, sessions={"s2", "gone", "../s1"}) == {"s2": ("s2 says hi",)}


def test_the_benchmark_runs_and_its_journals_read_as_cards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import pages_read

    journals = pages_read.build(tmp_path, 2, 60)
    views = card_views(read_local(tmp_path, None), [], "o/r")
    assert sorted(v.number for v in views) == [1, 2]
    assert all(len(v.steps) > 5 and v.comments for v in views)
    assert all(len(j.read_text().splitlines()) >= 60 for j in journals)
    assert pages_read.main(["--cards", "2", "--records", "40", "--runs", "1"]) == 0
    assert "uncached/cached" in capsys.readouterr().out
