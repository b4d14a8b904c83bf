"""usage.byRole and usage.sharedOverhead: per-role sums with coverage, the remainder shared,
and metrics.md rendering the same figures. Pure, over hand-built journals."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.reports.metrics import reduce_metrics
from app.domain.reports.metrics_md import render_metrics_md
from app.domain.reports.synthesis import render_synthesis
from app.domain.reports.usage_roles import ROLES, role_of

AS_OF = "2024-05-01T12:00:00+00:00"
KEY = "card-7"


def at(second: int) -> str:
    return f"2024-05-01T10:00:{second:02d}+00:00"


def step(
    transition: str, start: int, usage: dict[str, Any] | None, session: str
) -> list[dict[str, Any]]:
    ended: dict[str, Any] = {
        "kind": "outcome",
        "key": KEY,
        "at": at(start + 1),
        "transition": transition,
        "session": session,
        "state": "advanced",
    }
    if usage is not None:
        ended["usage"] = usage
    return [
        {
            "kind": "step-started",
            "key": KEY,
            "at": at(start),
            "transition": transition,
            "session": session,
        },
        ended,
    ]


def spent(tokens_in: int | None, tokens_out: int | None, cost: float | None) -> dict[str, Any]:
    return {"inputTokens": tokens_in, "outputTokens": tokens_out, "costUsd": cost}


def test_each_transition_has_its_role_and_the_rest_is_shared() -> None:
    assert [role_of(t) for t in ("propose", "apply", "verify", "red", "fix")] == [
        "preparation",
        "implementation",
        "reviewer",
        "red",
        "green",
    ]
    assert role_of("pr") is None
    records = [
        *step("propose", 0, spent(100, 10, 0.01), "a"),
        *step("apply", 2, spent(200, 20, 0.02), "b"),
        *step("verify", 4, spent(300, 30, 0.03), "c"),
        *step("verify", 6, spent(None, None, None), "d"),
        *step("pr", 8, spent(5, 5, 0.001), "e"),  # a step no role names that spent
    ]
    data = reduce_metrics(records, as_of=AS_OF).to_json()
    by_role = data["usage"]["byRole"]
    assert list(by_role) == ["implementation", "preparation", "reviewer"]
    assert by_role["preparation"]["tokens"] == {
        "value": 110,
        "coverage": "known",
        "reported": 1,
        "of": 1,
    }
    reviewer = by_role["reviewer"]
    assert reviewer["steps"] == 2
    assert reviewer["tokens"] == {"value": 330, "coverage": "partial", "reported": 1, "of": 2}
    assert reviewer["costUsd"]["value"] == 0.03
    shared = data["usage"]["sharedOverhead"]
    assert shared["steps"] == 1
    assert shared["tokens"] == {"value": 10, "coverage": "known", "reported": 1, "of": 1}
    # The totals are unchanged by the split: every agent step, role or not.
    assert data["usage"]["tokens"]["value"] == 110 + 220 + 330 + 10


def test_nothing_unattributable_is_an_unknown_overhead_never_a_zero() -> None:
    data = reduce_metrics(step("apply", 0, spent(1, 2, 0.5), "a"), as_of=AS_OF).to_json()
    assert data["usage"]["sharedOverhead"] == {
        "steps": 0,
        "inputTokens": {"value": None, "coverage": "unknown", "reported": 0, "of": 0},
        "outputTokens": {"value": None, "coverage": "unknown", "reported": 0, "of": 0},
        "tokens": {"value": None, "coverage": "unknown", "reported": 0, "of": 0},
        "costUsd": {"value": None, "coverage": "unknown", "reported": 0, "of": 0},
    }
    empty = reduce_metrics([], as_of=AS_OF).to_json()
    assert empty["usage"]["byRole"] == {}


def test_the_synthesis_tail_carries_by_role_and_shared_overhead() -> None:
    records = [*step("apply", 0, spent(200, 20, 0.02), "b"), *step("verify", 2, None, "c")]
    metrics = reduce_metrics(records, as_of=AS_OF)
    body = render_synthesis(
        7,
        3,
        "run-1",
        status="ready-for-merge",
        reviewed_head="a" * 40,
        versions={"pairbot": "1.0"},
        models={},
        metrics=metrics,
        metrics_revision=1,
    )
    tail = json.loads(body.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert tail["usage"]["byRole"] == metrics.to_json()["usage"]["byRole"]
    assert tail["usage"]["byRole"]["reviewer"]["tokens"]["value"] is None
    assert tail["usage"]["sharedOverhead"]["steps"] == 0


def test_metrics_md_shows_each_role_with_its_coverage() -> None:
    records = [
        *step("apply", 0, spent(1200, 345, 0.0123), "b"),
        *step("verify", 2, spent(None, None, None), "c"),
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    text = render_metrics_md(
        KEY,
        metrics,
        status={"status": "awaiting-verify", "next": "verify", "why": "a | pipe"},
        workflow={"version": "1.0", "inputsDigest": "sha256:ab"},
    )
    assert text == render_metrics_md(
        KEY,
        metrics,
        status={"status": "awaiting-verify", "next": "verify", "why": "a | pipe"},
        workflow={"version": "1.0", "inputsDigest": "sha256:ab"},
    )
    assert text.startswith("# pairbot metrics — card-7\n")
    assert "Status: awaiting-verify (next: verify) — a \\| pipe" in text
    assert "Workflow 1.0, inputs sha256:ab." in text
    assert "| implementation | 1 | 1,545 tokens (known: 1 step) | $0.0123 (known: 1 step) |" in text
    assert "| reviewer | 1 | unknown (1 of 1 step unreported) |" in text
    assert "| shared overhead | 0 | unknown (no step observed) |" in text
    assert "$0.0000" not in text and "| 0 tokens" not in text


_usage = st.none() | st.builds(
    spent,
    st.none() | st.integers(0, 5000),
    st.none() | st.integers(0, 5000),
    st.none() | st.floats(0, 5, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([*ROLES, "pr", "other"]), _usage),
        max_size=10,
    )
)
def test_roles_and_overhead_partition_the_agent_steps(steps: list[tuple[str, Any]]) -> None:
    records = [
        r for n, (transition, usage) in enumerate(steps) for r in step(transition, n, usage, str(n))
    ]
    metrics = reduce_metrics(records, as_of=AS_OF)
    parts = [*metrics.by_role.values(), metrics.shared_overhead]
    agent_steps = [s for s in metrics.steps if s.agent]
    assert sum(p.steps for p in parts) == len(agent_steps)
    assert sum(p.tokens.total for p in parts) == metrics.tokens.total
    assert sum(p.tokens.reported for p in parts) == metrics.tokens.reported
    known = [p.tokens.value for p in parts if p.tokens.value is not None]
    assert (sum(known) if known else None) == metrics.tokens.value
    json.dumps(metrics.to_json())
