"""The synthesis comment: the one final PR summary of a card's cycle, rendered. Pure.

`render_synthesis` returns only pairbot's owned body; the shell wraps it with
`hosts.markers.render(synthesis_marker(card, pr, run_id), body, tail)` and upserts it, so a
republish with the same inputs is a no-op (docs/cycle.md). Sections, in this order:

1. identity: card, PR, run, reviewed head, versions, models;
2. quality (the last review's verdict) vs delivery (the engine status) — they differ until the
   summary is read back;
3. effective cycles and review executions, with retries, interruptions and steps kept apart,
   and each step a fallback agent took over (failover) when there was one; then the dispatch
   table: per step, the agents (and models) that ran it, its dispatches, retries, failovers,
   send-backs and redirects ("unknown" where the journal cannot say, never 0);
4. tokens, cost and wall time, each with its coverage ("unknown" when nothing was reported,
   never 0), and the card's budget figures when it has one;
5. late defects by origin, then the scope-proposal table (proposals are never defects);
6. a compact schema-1 JSON tail in a fenced block (sourceDigest, asOf, metricsRevision,
   completeness and the figures, nulls for unknowns).

Deterministic: mappings are rendered sorted, numbers with fixed formats, nothing reads a clock.
Every caller-supplied string passes `_clean` (hidden characters and HTML comments stripped,
token-shaped secrets and absolute paths replaced) and table cells escape `|`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.domain.reports.dispatch_stats import DispatchStats
from app.domain.reports.metrics_model import ORIGINS, CycleMetrics, FindingMetrics, Quantity
from app.domain.text.invisible import strip_hidden
from hosts.markers import make_marker

# Credentials that look like themselves: GitHub tokens, `sk-…` API keys, AWS key ids, bearer
# headers. A version or model string never needs to look like one.
_SECRET = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{16,}"
    r"|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})\b"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}"
)
# An absolute POSIX path (a `/` not preceded by a word character, `.` or `/`, as in a model id
# `vendor/model`), a home-relative one, or a Windows drive path.
_ABS_PATH = re.compile(r"(?<![\w./:-])(?:~/|[A-Za-z]:\\|/)[\w.-]+(?:[/\\][\w.-]+)*")
_ORIGIN_LABELS = {
    "preexisting-missed": "pre-existing, missed by an earlier review",
    "introduced-by-remediation": "introduced by a remediation",
    "unknown": "unknown",
}


def synthesis_marker(card: int, pr: int | None, run_id: str) -> str:
    """`<!-- pair:synthesis #<card>[ PR#<n>] run:<runId> -->`."""
    return make_marker("synthesis", card, pr, run_id)


def _clean(text: str) -> str:
    text = strip_hidden(text)
    text = _SECRET.sub("[redacted]", text)
    return _ABS_PATH.sub("[path]", text)


def _clean_json(value: object) -> object:
    """The JSON tail with every string (keys too) passed through `_clean`."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        return {_clean(str(k)): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v) for v in value]
    return value


def _cell(text: str | None) -> str:
    """A Markdown table cell: cleaned, one line, `|` escaped; an absent value is an em dash."""
    if text is None or text == "":
        return "—"
    one_line = " ".join(_clean(text).split())
    return one_line.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def _figure(quantity: Quantity, shown: str, missing: str = "unreported") -> str:
    """`shown (known: …)`, `shown (partial: n of m steps <missing>)` or `unknown (…)`."""
    of = f"{quantity.unreported} of {_steps(quantity.total)} {missing}"
    if quantity.value is None:
        return "unknown (no step observed)" if quantity.total == 0 else f"unknown ({of})"
    if quantity.coverage == "known":
        return f"{shown} (known: {_steps(quantity.total)})"
    return f"{shown} (partial: {of})"


def _tokens(quantity: Quantity) -> str:
    value = quantity.value
    return _figure(quantity, f"{int(value):,} tokens" if value is not None else "")


def _cost(quantity: Quantity) -> str:
    value = quantity.value
    return _figure(quantity, f"${value:,.4f}" if value is not None else "")


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _time(quantity: Quantity) -> str:
    value = quantity.value
    return _figure(quantity, _duration(float(value)) if value is not None else "", "unobserved")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def models_by_step(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """What ran each kind of step, from the journal's `step-started` entries: the agent, and its
    model when the stage names one. The latest attempt wins (a fallback agent replaces the
    failed one); a step that names no agent (an older journal) is left out, never guessed."""
    models: dict[str, str] = {}
    for record in records:
        data = record.get("data")
        if record.get("kind") != "step-started" or not isinstance(data, Mapping):
            continue
        agent, model = data.get("agent"), data.get("model")
        if not isinstance(agent, str) or not agent:
            continue
        shown = f"{agent} ({model})" if isinstance(model, str) and model else agent
        models[str(record.get("transition") or "step")] = shown
    return models


def _dispatch_table(dispatches: Sequence[DispatchStats]) -> list[str]:
    """`### Dispatches`: one row per step kind, in the order each first ran."""
    lines = ["### Dispatches", ""]
    if not dispatches:
        return [*lines, "No step was dispatched.", ""]
    rows: list[tuple[str, ...]] = [
        (
            _cell(entry.transition),
            " → ".join(_code(agent) for agent in entry.agents) or "unknown",
            str(entry.dispatches),
            str(entry.retries),
            str(entry.failovers),
            str(entry.sent_back),
            "unknown" if entry.redirects is None else str(entry.redirects),
        )
        for entry in dispatches
    ]
    header = ("Step", "Agent (model)", "Dispatches", "Retries", "Failovers", "Sent back")
    return [*lines, *_table((*header, "Redirects"), rows), ""]


def render_synthesis(
    card: int,
    pr: int | None,
    run_id: str,
    *,
    status: str,
    reviewed_head: str | None,
    versions: Mapping[str, str],
    models: Mapping[str, str],
    metrics: CycleMetrics,
    metrics_revision: int,
    failovers: Sequence[str] = (),
    budget: str | None = None,
    dispatches: Sequence[DispatchStats] = (),
) -> str:
    """The owned body of the ONE synthesis comment (no marker): same inputs, same bytes.

    `failovers` are the steps a fallback agent took over (`agent_failures.failover_lines`);
    `budget` the card's budget line (`budget.budget_line`), when it has a budget;
    `dispatches` the per-step dispatch figures (`dispatches.dispatch_stats`).
    """
    synthesis_marker(card, pr, run_id)  # validates run_id as the marker will carry it
    pr_part = f", PR #{pr}" if pr is not None else ""
    lines: list[str] = [f"## pairbot synthesis — card #{card}{pr_part}", ""]
    lines += _identity_section(
        card, pr, run_id, reviewed_head=reviewed_head, versions=versions, models=models
    )
    lines += ["### Status", ""]
    lines += _table(
        ("Quality (last review)", "Delivery"),
        [(_cell(metrics.quality), _cell(status))],
    )
    lines.append("")
    lines += _cycles_section(metrics, failovers)
    lines += _dispatch_table(dispatches)
    lines += _time_section(metrics, budget)
    lines += _findings_section(metrics.findings)
    lines += _scope_section(metrics)
    lines += _metrics_json_section(metrics, metrics_revision, dispatches)
    return "\n".join(lines)


def _identity_section(
    card: int,
    pr: int | None,
    run_id: str,
    *,
    reviewed_head: str | None,
    versions: Mapping[str, str],
    models: Mapping[str, str],
) -> list[str]:
    identity: list[tuple[str, ...]] = [
        ("Card", f"#{card}"),
        ("Pull request", f"#{pr}" if pr is not None else "not opened"),
        ("Run", _code(run_id)),
        ("Reviewed head", _code(reviewed_head) if reviewed_head else "not reviewed"),
    ]
    identity += [(f"Version: {_cell(name)}", _code(versions[name])) for name in sorted(versions)]
    identity += [(f"Model: {_cell(role)}", _code(models[role])) for role in sorted(models)]
    return ["### Identity", "", *_table(("Item", "Value"), identity), ""]


def _cycles_section(metrics: CycleMetrics, failovers: Sequence[str]) -> list[str]:
    lines = ["### Cycles and reviews", ""]
    lines += _table(
        ("Effective fix cycles", "Review executions", "Retries", "Interrupted steps"),
        [
            (
                str(metrics.cycles),
                str(metrics.review_executions),
                str(metrics.retries),
                str(metrics.interrupted),
            )
        ],
    )
    if metrics.steps_by_transition:
        steps = ", ".join(
            f"{_cell(name)} {count}" for name, count in sorted(metrics.steps_by_transition.items())
        )
        lines += ["", f"Steps by transition: {steps}."]
    if failovers:
        lines += ["", "Failover (a step retried once with the fallback agent):", ""]
        lines += [f"- {_cell(line)}" for line in failovers]
    lines.append("")
    return lines


def _time_section(metrics: CycleMetrics, budget: str | None) -> list[str]:
    lines = ["### Tokens and time", ""]
    lines += _table(
        ("Measure", "Value"),
        [
            ("Tokens (input + output)", _tokens(metrics.tokens)),
            ("Input tokens", _tokens(metrics.input_tokens)),
            ("Output tokens", _tokens(metrics.output_tokens)),
            ("Cost", _cost(metrics.cost_usd)),
            ("Wall time", _time(metrics.wall_seconds)),
        ],
    )
    lines += ["", f"Completeness: {metrics.completeness}."]
    if budget is not None:
        lines += ["", f"Budget: {_cell(budget.removeprefix('budget: '))}."]
    lines.append("")
    return lines


def _findings_section(findings: FindingMetrics) -> list[str]:
    lines = ["### Late defects by origin", ""]
    by_origin = findings.late_by_origin
    lines += _table(
        ("Origin", "Count"),
        [(_ORIGIN_LABELS[origin], str(by_origin[origin])) for origin in ORIGINS],
    )
    if findings.late:
        lines += [""]
        lines += _table(
            ("Finding", "Kind", "First seen in review", "Origin"),
            [
                (_code(d.id), _cell(d.kind), str(d.first_round), _cell(d.origin))
                for d in findings.late
            ],
        )
    return [
        *lines,
        "",
        f"Findings: {findings.total} in all, {findings.blocking} blocking, "
        f"{findings.open_blocking} still open and blocking.",
        "",
    ]


def _scope_section(metrics: CycleMetrics) -> list[str]:
    lines = ["### Scope proposals", ""]
    if metrics.scope:
        lines += _table(
            ("Proposal", "Type", "Affected AC", "Decision"),
            [
                (_code(s.id), _cell(s.type), _cell(s.affected_ac), _cell(s.decision or "pending"))
                for s in metrics.scope
            ],
        )
    else:
        lines.append("None.")
    lines.append("")
    return lines


def _metrics_json_section(
    metrics: CycleMetrics, metrics_revision: int, dispatches: Sequence[DispatchStats]
) -> list[str]:
    # Backticks and `<` only occur inside JSON strings, so their \u escapes keep the JSON equal
    # while nothing in it can close the fence or open an HTML comment.
    data = metrics.to_json(metrics_revision=metrics_revision)
    data["dispatch"] = {entry.transition: entry.to_json() for entry in dispatches}
    tail = (
        json.dumps(
            _clean_json(data),
            separators=(",", ":"),
            ensure_ascii=True,
            allow_nan=False,
        )
        .replace("`", "\\u0060")
        .replace("<", "\\u003c")
    )
    return [
        "<details><summary>Metrics (schema 1)</summary>",
        "",
        "```json",
        tail,
        "```",
        "",
        "</details>",
    ]
