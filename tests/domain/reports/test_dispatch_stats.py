"""dispatch_stats: per-step dispatches, retries, failovers, send-backs and the agents that ran.

And how the synthesis renders them (a table, and the `dispatch` object of its JSON tail).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from app.domain.reports.dispatch_stats import DispatchStats, agent_label, dispatch_stats
from app.domain.reports.metrics import reduce_metrics
from app.domain.reports.synthesis import render_synthesis


def started(transition: str, agent: str | None = None, model: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if agent is not None:
        data["agent"] = agent
    if model is not None:
        data["model"] = model
    return {"kind": "step-started", "key": "card-1", "transition": transition, "data": data}


def ended(transition: str, state: str) -> dict[str, Any]:
    return {"kind": "outcome", "key": "card-1", "transition": transition, "state": state}


JOURNAL: list[dict[str, Any]] = [
    started("propose", "claude", "opus"),
    ended("propose", "advanced"),
    # apply: quota failure, failover to codex, then sent back, then accepted
    started("apply", "claude", "opus"),
    ended("apply", "failed"),
    {"kind": "failover", "key": "card-1", "transition": "apply", "data": {"failed": "claude"}},
    started("apply", "codex"),
    ended("apply", "sent-back"),
    started("apply", "codex"),
    ended("apply", "advanced"),
    # verify: blocked, then run again (a retry)
    started("verify", "claude", "opus"),
    ended("verify", "blocked"),
    started("verify", "claude", "opus"),
    ended("verify", "advanced"),
    {"kind": "cycle", "key": "card-1", "data": {"event": "pushed"}},  # no transition: skipped
    "not a record",
]


def by_step() -> dict[str, DispatchStats]:
    return {entry.transition: entry for entry in dispatch_stats(JOURNAL)}  # type: ignore[arg-type]


def test_counts_per_step_in_first_run_order() -> None:
    stats = dispatch_stats(JOURNAL)  # type: ignore[arg-type]
    assert [s.transition for s in stats] == ["propose", "apply", "verify"]
    steps = by_step()
    assert (steps["propose"].dispatches, steps["propose"].retries) == (1, 0)
    apply = steps["apply"]
    assert (apply.dispatches, apply.failovers, apply.sent_back, apply.retries) == (3, 1, 1, 0)
    assert apply.agents == ["claude (opus)", "codex"]
    verify = steps["verify"]
    assert (verify.dispatches, verify.retries, verify.failovers) == (2, 1, 0)
    assert verify.agents == ["claude (opus)"]


def test_redirects_are_unknown_never_zero() -> None:
    for entry in dispatch_stats(JOURNAL):  # type: ignore[arg-type]
        assert entry.redirects is None
        assert entry.to_json()["redirects"] is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"agent": "claude", "model": "opus"}, "claude (opus)", id="with-model"),
        pytest.param({"agent": "codex"}, "codex", id="agent-only"),
        pytest.param({"agent": ""}, None, id="empty-agent"),
        pytest.param({"model": "x"}, None, id="no-agent"),
        pytest.param(None, None, id="no-data"),
    ],
)
def test_agent_label(data: Any, expected: str | None) -> None:
    assert agent_label(data) == expected


def test_the_synthesis_shows_the_dispatch_table_and_tail() -> None:
    records = [r for r in JOURNAL if isinstance(r, dict)]
    text = render_synthesis(
        1,
        2,
        "run-1",
        status="ready-for-merge",
        reviewed_head="b" * 40,
        versions={},
        models={},
        metrics=reduce_metrics(records, as_of="2026-12-02T00:00:00+00:00"),
        metrics_revision=1,
        dispatches=dispatch_stats(records),
    )
    assert "| apply | `claude (opus)` → `codex` | 3 | 0 | 1 | 1 | unknown |" in text
    assert "| verify | `claude (opus)` | 2 | 1 | 0 | 0 | unknown |" in text
    match = re.search(r"```json\n(.*)\n```", text)
    assert match is not None
    tail = json.loads(match.group(1))
    assert tail["dispatch"]["apply"] == {
        "dispatches": 3,
        "retries": 0,
        "failovers": 1,
        "sentBack": 1,
        "redirects": None,
        "agents": ["claude (opus)", "codex"],
    }


def test_no_dispatch_says_so() -> None:
    text = render_synthesis(
        1,
        None,
        "run-1",
        status="ready-for-merge",
        reviewed_head=None,
        versions={},
        models={},
        metrics=reduce_metrics([], as_of="x"),
        metrics_revision=1,
    )
    assert "No step was dispatched." in text
    match = re.search(r"```json\n(.*)\n```", text)
    assert match is not None and json.loads(match.group(1))["dispatch"] == {}


def test_an_agent_without_a_name_shows_unknown() -> None:
    records = [started("apply"), ended("apply", "advanced")]
    text = render_synthesis(
        1,
        None,
        "run-1",
        status="ready-for-merge",
        reviewed_head=None,
        versions={},
        models={},
        metrics=reduce_metrics(records, as_of="x"),
        metrics_revision=1,
        dispatches=dispatch_stats(records),
    )
    assert "| apply | unknown | 1 | 0 | 0 | 0 | unknown |" in text
