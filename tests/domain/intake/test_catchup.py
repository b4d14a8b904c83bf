"""Which lost deliveries the App asks GitHub for again (app.domain.intake.catchup), read from
items shaped as GitHub's "list deliveries for an app webhook" answers them, and the cursor of
its Link header (hosts.github.deliveries.next_cursor)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.domain.intake.catchup import (
    GITHUB_KEEPS_S,
    plan_redeliveries,
    read_deliveries,
)
from app.web.catchup import ACTS_ON
from hosts.github.deliveries import next_cursor

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()


def item(
    ident: int, guid: str, status: int, *, ago_s: float = 60.0, **extra: Any
) -> dict[str, Any]:
    """One hook-delivery item in GitHub's documented shape."""
    when = datetime.fromtimestamp(NOW - ago_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base: dict[str, Any] = {
        "id": ident,
        "guid": guid,
        "delivered_at": when,
        "redelivery": False,
        "duration": 0.27,
        "status": "OK" if status < 300 else f"Invalid HTTP Response: {status}",
        "status_code": status,
        "event": "issue_comment",
        "action": "created",
        "installation_id": 123,
        "repository_id": 456,
        "throttled_at": None,
    }
    base.update(extra)
    return base


def plan(items: list[dict[str, Any]], **kwargs: Any) -> Any:
    read, unreadable = read_deliveries(items)
    assert unreadable == 0
    return plan_redeliveries(read, ACTS_ON, now=NOW, **kwargs)


def test_a_refused_command_is_asked_for_again_and_a_later_success_is_not() -> None:
    result = plan(
        [
            item(5, "lost", 503, ago_s=300),
            item(6, "saved", 503, ago_s=200),
            item(7, "saved", 202, ago_s=100, redelivery=True),
            item(8, "fine", 202),
        ]
    )
    assert [d.guid for d in result.redeliver] == ["lost"]
    assert result.failed == 1


def test_what_is_not_asked_for() -> None:
    result = plan(
        [
            item(1, "issues", 503, event="issues", action="opened"),
            item(2, "edited", 503, action="edited"),
            item(3, "ping", 503, event="ping", action=None),
            item(4, "bytes", 422),
            item(5, "too-big", 413),
            item(6, "old", 503, ago_s=GITHUB_KEEPS_S + 60),
            *(item(10 + n, "stubborn", 503, ago_s=500 - n, redelivery=n > 0) for n in range(5)),
        ]
    )
    assert result.redeliver == ()
    assert (result.not_ours, result.final, result.exhausted) == (3, 2, 1)


def test_no_answer_and_retryable_answers_are_asked_for_once_each_oldest_first() -> None:
    result = plan(
        [
            item(9, "timeout", 0, ago_s=10),
            item(8, "busy", 429, ago_s=20),
            item(7, "late", 408, ago_s=30),
            item(3, "down", 502, ago_s=400),
            item(4, "down", 503, ago_s=300, redelivery=True),
            item(2, "moved", 503, event="pull_request", action="synchronize", ago_s=500),
        ]
    )
    assert [(d.guid, d.id) for d in result.redeliver] == [
        ("moved", 2),
        ("down", 4),  # its newest attempt
        ("late", 7),
        ("busy", 8),
        ("timeout", 9),
    ]


def test_a_redelivery_on_its_way_is_not_asked_for_again_until_it_is_overdue() -> None:
    items = [item(4, "lost", 503, ago_s=300), item(5, "again", 0, ago_s=200)]
    # Both asked for a minute ago and accepted; GitHub has not listed the new attempts yet.
    waiting = plan(items, asked={4: NOW - 60, 5: NOW - 60}, pending_s=600)
    assert (waiting.redeliver, waiting.pending, waiting.failed) == ((), 2, 2)
    overdue = plan(items, asked={4: NOW - 601, 5: NOW - 60}, pending_s=600)
    assert ([d.id for d in overdue.redeliver], overdue.pending) == ([4], 1)
    # The redelivery arrived and was refused again: a new attempt, so it is asked for again.
    refused_again = plan([*items, item(6, "lost", 503, ago_s=5, redelivery=True)], asked={4: NOW})
    assert [d.id for d in refused_again.redeliver] == [6, 5]


def test_a_pass_is_capped_and_the_rest_wait_for_the_next() -> None:
    result = plan([item(n, f"g{n}", 503, ago_s=1000 - n) for n in range(1, 8)], cap=3)
    assert [d.guid for d in result.redeliver] == ["g1", "g2", "g3"]
    assert result.deferred == 4


def test_the_window_bounds_what_is_looked_at() -> None:
    items = [item(1, "hour-ago", 503, ago_s=3600), item(2, "now", 503, ago_s=5)]
    assert [d.guid for d in plan(items, window_s=600).redeliver] == ["now"]


def test_unreadable_items_are_counted_not_fatal() -> None:
    read, unreadable = read_deliveries(
        [
            item(1, "ok", 503),
            {"id": "1", "guid": "x"},
            item(0, "zero", 503),
            item(2, "", 503),
            item(3, "no-date", 503, delivered_at="yesterday"),
            "not an object",
        ]
    )
    assert [d.guid for d in read] == ["ok"] and unreadable == 5


def test_the_next_cursor_comes_from_the_link_header() -> None:
    link = (
        '<https://api.github.com/app/hook/deliveries?per_page=2&cursor=v1_12077215967>; rel="next"'
    )
    assert next_cursor(link) == "v1_12077215967"
    both = '<https://x/app/hook/deliveries?cursor=v1_1>; rel="prev", ' + link
    assert next_cursor(both) == "v1_12077215967"
    assert next_cursor('<https://x/app/hook/deliveries?cursor=v1_1>; rel="prev"') is None
    assert next_cursor(None) is None and next_cursor("") is None
