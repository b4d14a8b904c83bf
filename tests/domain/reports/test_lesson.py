"""distill, render/parse, mentioned_paths and select_lessons: the bookkeeper's pure parts."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.reports.lesson import (
    MAX_ITEMS,
    Lesson,
    distill,
    mentioned_paths,
    parse_lesson,
    render_lesson,
    select_lessons,
)


def verify(
    at: str, findings: list[dict[str, Any]], scope: list[Any] | None = None
) -> dict[str, Any]:
    report: dict[str, Any] = {"findings": findings}
    if scope is not None:
        report["scopeChanges"] = scope
    return {
        "kind": "outcome",
        "key": "card-7",
        "at": at,
        "transition": "verify",
        "state": "advanced",
        "findings": report,
    }


FINDING = {"id": "r1-1", "kind": "defect", "summary": "off by one at the end"}
JOURNAL: list[dict[str, Any]] = [
    {"kind": "step-started", "key": "card-7", "at": "2026-11-30T09:00:00+00:00"},
    {
        "kind": "outcome",
        "key": "card-7",
        "at": "2026-11-30T09:01:00+00:00",
        "transition": "apply",
        "state": "sent-back",
        "message": "apply sent back: 1 new failing test",
    },
    {"kind": "blocker", "key": "card-7", "transition": "apply", "message": "no DB\nhere"},
    verify("2026-11-30T10:00:00+00:00", [FINDING, "junk", {"kind": "defect"}]),
    verify(
        "2026-11-30T11:00:00+00:00",
        [{**FINDING, "transition": "open"}, {"id": "r2-1", "kind": "regression"}],
        scope=[{"id": "sc-1", "type": "new-requirement", "evidence": "wants a lockout"}, 3],
    ),
    verify("2026-11-30T12:00:00+00:00", [{**FINDING, "transition": "resolved"}]),
    {
        "kind": "outcome",
        "transition": "verify",
        "state": "blocked",
        "findings": {"findings": [FINDING]},
    },
    {"kind": "outcome", "transition": "verify", "state": "advanced", "findings": "not a map"},
    {
        "kind": "cycle",
        "key": "card-7",
        "data": {
            "event": "scope-applied",
            "dispositions": [{"id": "sc-1", "action": "new-card"}, 1],
        },
    },
    {"kind": "cycle", "key": "card-7", "data": {"event": "pushed"}},
    {
        "kind": "failover",
        "key": "card-7",
        "transition": "fix",
        "data": {"failed": "claude", "signature": "quota", "next": "codex"},
    },
    {
        "kind": "cycle",
        "key": "card-7",
        "at": "2026-12-01T08:00:00+00:00",
        "data": {"event": "merged"},
    },
]


def lesson(**overrides: Any) -> Lesson:
    found = distill(
        overrides.pop("records", JOURNAL),
        card=overrides.pop("card", 7),
        run=overrides.pop("run", "run1"),
        ending=overrides.pop("ending", "merged"),
        files=overrides.pop("files", ["b.py", "a.py", "a.py"]),
    )
    assert found is not None
    return found


def test_distill_keeps_what_the_run_struggled_with() -> None:
    found = lesson()
    assert found.date == "2026-12-01"  # the journal's last dated record
    assert found.files == ("a.py", "b.py")
    assert found.sent_back == ("apply: apply sent back: 1 new failing test",)
    assert found.blockers == ("apply: no DB here",)
    assert found.recurring == ("r1-1 (defect), open in rounds 1, 2: off by one at the end",)
    assert found.scope == ("sc-1 (new-requirement): wants a lockout; decision: new-card",)
    assert found.failovers == ("fix: claude failed (quota); retried once with codex",)
    body = found.render_body()
    assert body.startswith("# Lesson from card #7 (merged, 2026-12-01)")
    for heading in (
        "Sent back by the engine",
        "Findings that recurred",
        "Scope changes",
        "Failovers",
        "Blockers the agent reported",
    ):
        assert f"## {heading}" in body


def test_a_run_that_struggled_with_nothing_teaches_nothing() -> None:
    records = [verify("2026-11-30T10:00:00+00:00", [FINDING])]
    assert distill(records, card=1, run="r", ending="merged", files=["a.py"]) is None


def test_items_are_capped_in_number_and_length_and_undated_is_unknown() -> None:
    records = [
        {"kind": "outcome", "state": "sent-back", "message": f"reason {n} " + "x" * 500}
        for n in range(MAX_ITEMS + 5)
    ]
    found = lesson(records=records)
    assert len(found.sent_back) == MAX_ITEMS
    assert all(len(item) <= 240 for item in found.sent_back)
    assert found.sent_back[0].startswith("step: reason 0")
    assert found.date == "unknown"


def test_scope_without_a_decision_says_so() -> None:
    records = [verify("2026-11-30", [], scope=[{"id": "sc-2", "summary": "more"}])]
    assert lesson(records=records).scope == ("sc-2 (unknown): more; decision: none recorded",)


def test_render_and_parse_round_trip() -> None:
    found = lesson()
    text = render_lesson(found)
    assert text.startswith("---\ncard: 7\nrun: run1\noutcome: merged\ndate: '2026-12-01'\n")
    back = parse_lesson(text)
    assert back is not None
    assert (back.card, back.run, back.ending, back.date, back.files) == (
        7,
        "run1",
        "merged",
        "2026-12-01",
        ("a.py", "b.py"),
    )
    assert back.render_body() == found.render_body()
    assert parse_lesson(text.replace("\n", "\r\n")) is not None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("no front matter", id="plain"),
        pytest.param("---\n: [\n---\nbody", id="bad-yaml"),
        pytest.param("---\n- a list\n---\nbody", id="not-a-mapping"),
        pytest.param("---\ncard: true\nrun: r\noutcome: merged\nfiles: []\n---\n", id="bool-card"),
        pytest.param("---\ncard: 1\nrun: 2\noutcome: merged\nfiles: []\n---\n", id="int-run"),
        pytest.param("---\ncard: 1\nrun: r\noutcome: parked\nfiles: []\n---\n", id="ending"),
        pytest.param("---\ncard: 1\nrun: r\noutcome: merged\nfiles: a\n---\n", id="files"),
    ],
)
def test_parse_refuses_what_is_not_a_lesson(text: str) -> None:
    assert parse_lesson(text) is None


def test_mentioned_paths_are_generous_but_pathlike() -> None:
    text = "Fix `app/widget.py`, see ./docs/cycle.md. Not /etc/passwd, nor plain words; README.md"
    assert mentioned_paths(text) == {"app/widget.py", "docs/cycle.md", "README.md"}


def made(card: int, date: str, files: tuple[str, ...], body: str = "x") -> Lesson:
    return Lesson(card=card, run="r", ending="merged", date=date, files=files, body=body)


def test_select_orders_by_shared_files_then_newest_and_skips_unrelated() -> None:
    lessons = [
        made(1, "2026-01-01", ("a.py",)),
        made(2, "2026-03-01", ("a.py",)),
        made(3, "2026-02-01", ("a.py", "b.py")),
        made(4, "unknown", ("a.py",)),
        made(5, "2026-04-01", ("c.py",)),
    ]
    chosen = select_lessons(lessons, {"a.py", "b.py"}, budget=1_000)
    assert [lesson.card for lesson in chosen] == [3, 2, 1, 4]


def test_select_keeps_to_the_budget_and_cuts_a_lone_big_lesson() -> None:
    lessons = [
        made(1, "2026-01-02", ("a.py",), "a" * 300),
        made(2, "2026-01-01", ("a.py",), "b" * 300),
    ]
    assert [lesson.card for lesson in select_lessons(lessons, ["a.py"], budget=400)] == [1]
    [cut] = select_lessons([made(1, "2026-01-01", ("a.py",), "é" * 500)], ["a.py"], budget=300)
    assert len(cut.render_body().encode()) <= 300
    assert cut.render_body().endswith("(cut to pairbot's lesson budget)\n")
    assert select_lessons(lessons, ["z.py"]) == []
