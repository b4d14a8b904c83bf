"""render_synthesis: section order, coverage wording, tables, the JSON tail, determinism."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from app.domain.reports.metrics import reduce_metrics
from app.domain.reports.metrics_model import CycleMetrics
from app.domain.reports.synthesis import models_by_step, render_synthesis, synthesis_marker
from hosts.markers import check_marker, render

AS_OF = "2024-05-01T12:00:00+00:00"
HEAD = "a" * 40


def rec(kind: str, at: str, transition: str, session: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "key": "c",
        "at": f"2024-05-01T10:{at}+00:00",
        "transition": transition,
        "session": session,
        **extra,
    }


def usage(inp: int | None, out: int | None, cost: float | None = None) -> dict[str, Any]:
    return {"inputTokens": inp, "outputTokens": out, "costUsd": cost}


JOURNAL: list[dict[str, Any]] = [
    rec("step-started", "00:00", "apply", "a"),
    rec("outcome", "10:00", "apply", "a", state="advanced", usage=usage(10_000, 2_340, 0.5)),
    rec("step-started", "10:05", "verify", "v1"),
    rec(
        "outcome",
        "12:05",
        "verify",
        "v1",
        state="advanced",
        usage=usage(None, None),
        verdict={"converged": False},
        findings={
            "findings": [{"id": "r1-1", "kind": "defect", "blocking": True}],
            "scopeChanges": [{"id": "sc-1", "type": "new-requirement", "affectedAc": "AC-2"}],
        },
    ),
    rec("step-started", "13:00", "red", "r1"),
    rec("outcome", "14:00", "red", "r1", state="advanced"),
    rec("step-started", "15:00", "fix", "f1"),
    rec("outcome", "16:00", "fix", "f1", state="advanced"),
    rec("step-started", "17:00", "verify", "v2"),
    rec(
        "outcome",
        "18:00",
        "verify",
        "v2",
        state="advanced",
        verdict={"converged": True},
        findings={
            "findings": [
                {"id": "r1-1", "kind": "defect", "blocking": True, "transition": "resolved"},
                {"id": "r2-1", "kind": "regression", "blocking": False},
            ],
            "scopeChanges": [{"id": "sc-1", "type": "new-requirement", "affectedAc": "AC-2"}],
        },
    ),
    rec("step-started", "19:00", "verify", "v3"),  # interrupted
]


def synth(metrics: CycleMetrics, **overrides: Any) -> str:
    kwargs: dict[str, Any] = {
        "status": "ready-for-merge",
        "reviewed_head": HEAD,
        "versions": {"pairbot": "0.1.0", "workflow": "4.0.1"},
        "models": {"reviewer": "vendor/model-x", "green": "fable"},
        "metrics": metrics,
        "metrics_revision": 2,
    }
    kwargs.update(overrides)
    return render_synthesis(12, 34, "run-1", **kwargs)


def tail(text: str) -> dict[str, Any]:
    match = re.search(r"```json\n(.*)\n```", text)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_sections_in_the_seeds_order() -> None:
    text = synth(reduce_metrics(JOURNAL, as_of=AS_OF))
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    assert headings == [
        "### Identity",
        "### Status",
        "### Cycles and reviews",
        "### Dispatches",
        "### Tokens and time",
        "### Late defects by origin",
        "### Scope proposals",
    ]
    assert text.index("### Scope proposals") < text.index("```json")
    assert f"`{HEAD}`" in text
    assert "| Model: green | `fable` |" in text
    assert text.index("Model: green") < text.index("Model: reviewer")  # sorted


def test_figures_and_coverage_wording() -> None:
    text = synth(reduce_metrics(JOURNAL, as_of=AS_OF))
    # apply and verify v1 and v2 and the interrupted v3, red and fix: 6 agent steps, 1 reported
    assert "12,340 tokens (partial: 5 of 6 steps unreported)" in text
    assert "$0.5000 (partial: 5 of 6 steps unreported)" in text
    assert "(partial: 1 of 6 steps unobserved)" in text  # the interrupted verify
    assert "| not-converged |" not in text
    assert "| converged | ready-for-merge |" in text
    assert "| 1 | 2 | 0 | 1 |" in text  # cycles, reviews, retries, interrupted
    assert "| introduced by a remediation | 1 |" in text
    assert "| `r2-1` | regression | 2 | introduced-by-remediation |" in text
    assert "| `sc-1` | new-requirement | AC-2 | pending |" in text


def test_unknown_is_never_rendered_as_zero() -> None:
    records = [
        rec("step-started", "00:00", "apply", "a"),
        rec("outcome", "00:30", "apply", "a", state="advanced", usage=usage(None, None)),
    ]
    text = synth(reduce_metrics(records, as_of=AS_OF))
    assert "| Tokens (input + output) | unknown (1 of 1 step unreported) |" in text
    assert "| Cost | unknown (1 of 1 step unreported) |" in text
    assert "0 tokens" not in text
    data = tail(text)
    assert data["usage"]["tokens"]["value"] is None
    assert data["usage"]["costUsd"]["value"] is None
    assert data["time"]["wallSeconds"]["value"] == 30.0


def test_empty_journal_renders() -> None:
    text = synth(reduce_metrics([], as_of=AS_OF), reviewed_head=None)
    assert "unknown (no step observed)" in text
    assert "| Reviewed head | not reviewed |" in text
    assert "None." in text


@pytest.mark.parametrize(
    ("revision", "expected_completeness"), [pytest.param(1, "partial", id="rev1")]
)
def test_json_tail_parses_and_matches(revision: int, expected_completeness: str) -> None:
    metrics = reduce_metrics(JOURNAL, as_of=AS_OF, decisions={"sc-1": "ignore"})
    data = tail(synth(metrics, metrics_revision=revision))
    assert data == {**metrics.to_json(metrics_revision=revision), "dispatch": {}}
    assert list(data)[:5] == ["schema", "sourceDigest", "asOf", "metricsRevision", "completeness"]
    assert data["schema"] == 1
    assert data["completeness"] == expected_completeness
    assert data["scope"] == [
        {"id": "sc-1", "type": "new-requirement", "affectedAc": "AC-2", "decision": "ignore"}
    ]


def test_byte_identical_rerender() -> None:
    first = synth(reduce_metrics(JOURNAL, as_of=AS_OF))
    again = synth(
        reduce_metrics([dict(r) for r in JOURNAL], as_of=AS_OF),
        versions={"workflow": "4.0.1", "pairbot": "0.1.0"},
        models={"green": "fable", "reviewer": "vendor/model-x"},
    )
    assert first.encode() == again.encode()


def test_no_secrets_paths_or_table_breaks() -> None:
    hostile = [
        rec(
            "outcome",
            "00:01",
            "verify",
            "v",
            state="advanced",
            findings={
                "scopeChanges": [
                    {"id": "sc-1", "type": "a|b `x` /home/me/.ssh/id_rsa", "affectedAc": "AC-1"}
                ]
            },
        )
    ]
    text = synth(
        reduce_metrics(hostile, as_of=AS_OF),
        models={"reviewer": "ghp_" + "A" * 36},
        versions={"pairbot": "/opt/pairbot/bin <!-- x -->"},
    )
    assert "ghp_" not in text
    assert "/home/me" not in text
    assert "/opt/pairbot" not in text
    assert "<!--" not in text
    assert "a\\|b 'x' [path]" in text
    # the tail escapes the backticks (nothing closes the fence) and still parses to the value
    json_line = text.split("```json\n", 1)[1].split("\n", 1)[0]
    assert "`" not in json_line
    assert tail(text)["scope"][0]["type"] == "a|b `x` [path]"
    assert "vendor/model-x" in synth(reduce_metrics([], as_of=AS_OF))  # a model id is no path


def test_marker_and_render() -> None:
    marker = synthesis_marker(12, 34, "run-1")
    assert marker == "<!-- pair:synthesis #12 PR#34 run:run-1 -->"
    assert check_marker(marker) == marker
    body = synth(reduce_metrics(JOURNAL, as_of=AS_OF))
    assert render(marker, body).startswith(marker + "\n## pairbot synthesis — card #12, PR #34")
    with pytest.raises(ValueError, match="run id"):
        render_synthesis(
            1,
            None,
            "bad run",
            status="x",
            reviewed_head=None,
            versions={},
            models={},
            metrics=reduce_metrics([], as_of=AS_OF),
            metrics_revision=1,
        )


def test_failovers_and_the_budget_are_shown_when_there_are_some() -> None:
    metrics = reduce_metrics([], as_of=AS_OF)
    plain = synth(metrics)
    assert "Failover" not in plain and "Budget:" not in plain
    text = synth(
        metrics,
        failovers=("apply: claude failed (quota); retried once with codex",),
        budget="budget: 3/1 steps, 120k/100k tokens; usage unknown for 1 of 3 steps",
    )
    cycles = text.index("### Cycles and reviews")
    tokens = text.index("### Tokens and time")
    failover = text.index("- apply: claude failed (quota); retried once with codex")
    budget = text.index("Budget: 3/1 steps, 120k/100k tokens; usage unknown for 1 of 3 steps.")
    assert cycles < failover < tokens < budget


def test_models_by_step_names_what_ran_each_step_and_the_fallback_wins() -> None:
    records = [
        {"kind": "step-started", "transition": "propose", "data": {"agent": "claude"}},
        {"kind": "step-started", "transition": "apply", "data": {"agent": "claude"}},
        {"kind": "failover", "transition": "apply", "data": {"failed": "claude"}},
        {"kind": "step-started", "transition": "apply", "data": {"agent": "codex", "model": "o3"}},
        {"kind": "step-started", "transition": "verify", "data": None},  # an older journal
        {"kind": "outcome", "transition": "verify", "data": {"agent": "nobody"}},
    ]
    assert models_by_step(records) == {"propose": "claude", "apply": "codex (o3)"}
