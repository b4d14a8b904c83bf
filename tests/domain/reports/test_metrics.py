"""reduce_metrics over small hand-built journals: coverage, timing, cycles, findings, scope."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.reports.metrics import reduce_metrics

AS_OF = "2024-05-01T12:00:00+00:00"
KEY = "login"


def t(seconds: int) -> str:
    return f"2024-05-01T10:{seconds // 60:02d}:{seconds % 60:02d}+00:00"


def started(transition: str, at: int, session: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"kind": "step-started", "key": KEY, "at": t(at)}
    record["transition"] = transition
    if session is not None:
        record["session"] = session
    return record


def outcome(
    transition: str,
    at: int,
    *,
    session: str | None = None,
    state: str = "advanced",
    usage: dict[str, Any] | None = None,
    findings: dict[str, Any] | None = None,
    converged: bool | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "kind": "outcome",
        "key": KEY,
        "at": t(at),
        "transition": transition,
        "state": state,
    }
    if session is not None:
        record["session"] = session
    if usage is not None:
        record["usage"] = usage
    if findings is not None:
        record["findings"] = findings
    if converged is not None:
        record["verdict"] = {"converged": converged}
    return record


def step(
    transition: str, start: int, end: int, session: str, **kwargs: Any
) -> list[dict[str, Any]]:
    return [
        started(transition, start, session),
        outcome(transition, end, session=session, **kwargs),
    ]


def usage(inp: int | None, out: int | None, cost: float | None = None) -> dict[str, Any]:
    return {"inputTokens": inp, "outputTokens": out, "costUsd": cost}


def finding(fid: str, kind: str, *, blocking: bool = True, transition: str = "open") -> Any:
    return {"id": fid, "kind": kind, "blocking": blocking, "transition": transition}


# ---------------------------------------------------------------- usage coverage


@pytest.mark.parametrize(
    ("usages", "coverage", "value", "reported", "total"),
    [
        pytest.param([usage(100, 20, 0.5), usage(10, 2, 0.25)], "known", 132, 2, 2, id="all-known"),
        pytest.param(
            [usage(100, 20, 0.5), usage(None, None, None), None],
            "partial",
            120,
            1,
            3,
            id="some-known",
        ),
        pytest.param(
            [usage(None, None, None), None], "unknown", None, 0, 2, id="none-known-never-zero"
        ),
        pytest.param([usage(0, 0, 0.0)], "known", 0, 1, 1, id="a-reported-zero-is-a-zero"),
        pytest.param([usage(5, None)], "unknown", None, 0, 1, id="half-reported-total-unknown"),
        pytest.param([usage(-1, True)], "unknown", None, 0, 1, id="nonsense-is-unreported"),
    ],
)
def test_token_coverage(
    usages: list[dict[str, Any] | None],
    coverage: str,
    value: int | None,
    reported: int,
    total: int,
) -> None:
    records: list[dict[str, Any]] = []
    for n, figures in enumerate(usages):
        # "apply" is an agent transition: a missing usage object is an unreported step.
        records += step("apply", n * 10, n * 10 + 5, f"s{n}", usage=figures)
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.tokens.coverage == coverage
    assert metrics.tokens.value == value
    assert (metrics.tokens.reported, metrics.tokens.total) == (reported, total)
    if coverage != "known":
        assert metrics.completeness == "partial"


def test_cost_partial_sums_known_ones_and_non_agent_steps_do_not_count() -> None:
    records = [
        *step("apply", 0, 5, "a", usage=usage(1, 1, 0.125)),
        *step("verify", 6, 9, "b", usage=usage(1, 1, None)),
        *step("pr", 10, 11, "c"),  # no agent: no usage expected
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.cost_usd.value == 0.125
    assert metrics.cost_usd.coverage == "partial"
    assert metrics.cost_usd.unreported == 1
    assert metrics.tokens.coverage == "known"
    assert metrics.tokens.total == 2


def test_all_known_and_paired_is_complete() -> None:
    records = step("apply", 0, 30, "a", usage=usage(10, 5, 0.01))
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.completeness == "complete"
    assert metrics.wall_seconds.value == 30.0
    assert metrics.wall_seconds.coverage == "known"


# ---------------------------------------------------------------- time


def test_interrupted_step_makes_time_partial() -> None:
    records = [
        *step("apply", 0, 90, "a", usage=usage(10, 5, 0.01)),
        started("verify", 100, "b"),  # crashed: no outcome
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.interrupted == 1
    assert metrics.wall_seconds.value == 90.0
    assert metrics.wall_seconds.coverage == "partial"
    assert metrics.wall_seconds.unreported == 1
    # the interrupted verify spent tokens nobody reported
    assert metrics.tokens.coverage == "partial"
    assert metrics.completeness == "partial"


def test_outcome_without_start_is_an_orphan() -> None:
    records = [outcome("apply", 5, session="x", usage=usage(1, 1, 0.0))]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.orphaned == 1
    assert metrics.wall_seconds.coverage == "unknown"
    assert metrics.wall_seconds.value is None
    assert metrics.completeness == "partial"


def test_restart_of_the_same_key_closes_the_earlier_start_as_interrupted() -> None:
    records = [started("apply", 0), started("apply", 50), outcome("apply", 80, usage=usage(1, 1))]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.interrupted == 1
    assert metrics.wall_seconds.value == 30.0
    assert metrics.steps_by_transition == {"apply": 2}


def test_proof_of_work_record_ends_its_step() -> None:
    records = [
        {"kind": "step-started", "key": KEY, "at": t(0), "transition": "proof-of-work"},
        {"kind": "proof-of-work", "key": KEY, "at": t(12), "proof": {"gatePassed": True}},
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.interrupted == 0
    assert metrics.wall_seconds.value == 12.0
    assert metrics.tokens.total == 0  # no agent step


@pytest.mark.parametrize(
    ("start", "end"),
    [
        pytest.param("not a time", t(5), id="unparsable"),
        pytest.param("2024-05-01T10:00:00", t(5), id="naive-vs-aware"),
        pytest.param(t(10), t(5), id="negative"),
    ],
)
def test_unreadable_times_are_unknown_not_zero(start: str, end: str) -> None:
    records = [
        {"kind": "step-started", "key": KEY, "at": start, "transition": "pr", "session": "s"},
        {"kind": "outcome", "key": KEY, "at": end, "transition": "pr", "session": "s"},
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.wall_seconds.value is None
    assert metrics.wall_seconds.coverage == "unknown"


# ---------------------------------------------------------------- cycles, reviews, retries


def test_cycles_reviews_and_retries_are_counted_apart() -> None:
    records = [
        *step("apply", 0, 10, "a", usage=usage(1, 1)),
        *step("verify", 11, 20, "v1", usage=usage(1, 1), converged=False),
        *step("red", 21, 25, "r1", usage=usage(1, 1)),
        *step("fix", 26, 30, "f1", usage=usage(1, 1), state="blocked"),  # retried
        *step("fix", 31, 40, "f2", usage=usage(1, 1)),
        *step("verify", 41, 45, "v2", usage=usage(1, 1), state="blocked"),  # retried
        *step("verify", 46, 50, "v3", usage=usage(1, 1), converged=True),
        *step("fix", 51, 52, "f3", usage=usage(1, 1), state="blocked"),  # never re-run
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.cycles == 1
    assert metrics.review_executions == 2
    assert metrics.retries == 2
    assert metrics.quality == "converged"
    assert metrics.steps_by_transition == {"apply": 1, "fix": 3, "red": 1, "verify": 3}


def test_a_fix_not_yet_re_reviewed_is_not_a_cycle() -> None:
    records = [
        *step("verify", 0, 1, "v1", usage=usage(1, 1), converged=False),
        *step("red", 2, 3, "r1", usage=usage(1, 1)),
        *step("fix", 4, 5, "f1", usage=usage(1, 1)),
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert metrics.cycles == 0
    assert metrics.quality == "not-converged"


def test_no_review_is_unreviewed() -> None:
    assert reduce_metrics([], as_of=AS_OF).quality == "unreviewed"


# ---------------------------------------------------------------- findings


def review(*items: Any, scope: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"findings": list(items), "scopeChanges": scope or []}


def test_late_defects_by_origin() -> None:
    records = [
        *step("verify", 0, 1, "v1", findings=review(finding("r1-1", "defect"))),
        *step("red", 2, 3, "r"),
        *step("fix", 4, 5, "f"),
        *step(
            "verify",
            6,
            7,
            "v2",
            findings=review(
                finding("r1-1", "defect", transition="resolved"),
                finding("r2-1", "regression"),
                finding("r2-2", "defect"),
                finding("r2-3", "question", blocking=False),
                finding("r2-4", "contract-gap"),
            ),
        ),
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    late = {d.id: d.origin for d in metrics.findings.late}
    assert late == {
        "r2-1": "introduced-by-remediation",
        "r2-2": "preexisting-missed",
        "r2-4": "unknown",
    }
    assert metrics.findings.late_by_origin == {
        "preexisting-missed": 1,
        "introduced-by-remediation": 1,
        "unknown": 1,
    }
    assert metrics.findings.total == 5
    assert metrics.findings.blocking == 4
    assert metrics.findings.open_blocking == 3
    assert metrics.findings.by_kind == {
        "contract-gap": 1,
        "defect": 2,
        "question": 1,
        "regression": 1,
    }


def test_regression_without_a_fix_before_it_is_unknown() -> None:
    records = [
        *step("verify", 0, 1, "v1", findings=review()),
        *step("verify", 2, 3, "v2", findings=review(finding("r2-1", "regression"))),
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    assert [(d.id, d.origin) for d in metrics.findings.late] == [("r2-1", "unknown")]


def test_round_one_findings_are_not_late() -> None:
    records = step("verify", 0, 1, "v1", findings=review(finding("r1-1", "regression")))
    assert reduce_metrics(records, as_of=AS_OF).findings.late == ()


# ---------------------------------------------------------------- scope


def test_scope_proposals_with_decisions() -> None:
    proposals = [
        {"id": "sc-1", "type": "new-requirement", "evidence": "e", "affectedAc": "AC-2"},
        {"id": "sc-2", "type": "changed-requirement"},
    ]
    records = step("verify", 0, 1, "v1", findings=review(scope=proposals))
    metrics = reduce_metrics(records, as_of=AS_OF, decisions={"sc-1": "new-card"})
    assert [(s.id, s.type, s.affected_ac, s.decision) for s in metrics.scope] == [
        ("sc-1", "new-requirement", "AC-2", "new-card"),
        ("sc-2", "changed-requirement", None, None),
    ]
    assert metrics.findings.total == 0  # proposals are never defects


# ---------------------------------------------------------------- digest and JSON


def test_digest_tracks_the_inputs_and_json_round_trips() -> None:
    records = step("apply", 0, 5, "a", usage=usage(None, None))
    first = reduce_metrics(records, as_of=AS_OF)
    again = reduce_metrics([dict(r) for r in records], as_of=AS_OF)
    changed = reduce_metrics([*records, started("verify", 9)], as_of=AS_OF)
    assert first.source_digest == again.source_digest
    assert first.source_digest != changed.source_digest
    assert first.source_digest.startswith("sha256:")
    data = json.loads(json.dumps(first.to_json(metrics_revision=3)))
    assert list(data)[:5] == ["schema", "sourceDigest", "asOf", "metricsRevision", "completeness"]
    assert data["usage"]["tokens"] == {"value": None, "coverage": "unknown", "reported": 0, "of": 1}
    assert data["asOf"] == AS_OF
    assert "metricsRevision" not in first.to_json()


# ---------------------------------------------------------------- properties

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children)
    ),
    max_leaves=8,
)
_kinds = st.sampled_from(["step-started", "outcome", "proof-of-work", "retry", "x"])
_values = _json | st.sampled_from(["verify", "fix", "apply", "pr", "advanced", "blocked", t(3)])
_usage = st.fixed_dictionaries(
    {},
    optional={
        "inputTokens": st.none() | st.integers(-5, 10_000) | st.booleans(),
        "outputTokens": st.none() | st.integers(-5, 10_000),
        "costUsd": st.none() | st.floats(),
    },
)
_record = st.fixed_dictionaries(
    {},
    optional={
        "kind": _kinds | _json,
        "key": st.sampled_from([KEY, "other"]) | _json,
        "at": st.sampled_from([t(1), t(2), "bad"]) | _json,
        "transition": _values,
        "session": st.sampled_from(["a", "b"]) | _json,
        "state": _values,
        "usage": _usage | _json,
        "findings": _json,
        "verdict": _json,
    },
) | st.dictionaries(st.text(max_size=6), _json, max_size=4)


def _reported_tokens(record: Any) -> bool:
    figures = record.get("usage")
    if record.get("kind") != "outcome" or not isinstance(figures, dict):
        return False

    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    return count(figures.get("inputTokens")) and count(figures.get("outputTokens"))


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, max_size=12))
def test_reduce_never_raises_and_unknown_iff_nothing_reported(records: list[Any]) -> None:
    metrics = reduce_metrics(records, as_of=AS_OF)
    unknown = metrics.tokens.coverage == "unknown"
    assert unknown == (not any(_reported_tokens(r) for r in records))
    assert (metrics.tokens.value is None) == unknown
    for quantity in (metrics.input_tokens, metrics.output_tokens, metrics.cost_usd):
        assert (quantity.coverage == "unknown") == (quantity.reported == 0)
        assert (quantity.value is None) == (quantity.reported == 0)
    json.dumps(metrics.to_json(metrics_revision=1))
