"""`metrics.md`: a run's metrics as a person reads them, beside `metrics.json`. Pure.

`render_metrics_md(batch, metrics, status=…, workflow=…)` renders the same figures
`metrics.json` holds (`CycleMetrics.to_json`): the status the run last showed, what the figures
were reduced from, the cycles and reviews, tokens, cost and wall time with their coverage
("unknown" when nothing was reported, never 0), usage per role and the shared overhead, and
the findings. Same inputs, same bytes: nothing reads a clock, mappings are rendered sorted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.domain.reports.metrics_model import CycleMetrics, Quantity, RoleUsage


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def figure(quantity: Quantity, shown: Callable[[float], str], missing: str = "unreported") -> str:
    """`shown (known)`, `shown (partial: n of m steps <missing>)` or `unknown (…)`."""
    if quantity.value is None:
        if quantity.total == 0:
            return "unknown (no step observed)"
        return f"unknown ({quantity.unreported} of {_steps(quantity.total)} {missing})"
    if quantity.coverage == "known":
        return f"{shown(quantity.value)} (known: {_steps(quantity.total)})"
    unreported = f"{quantity.unreported} of {_steps(quantity.total)} {missing}"
    return f"{shown(quantity.value)} (partial: {unreported})"


def tokens(value: float) -> str:
    """`1,545 tokens`."""
    return f"{int(value):,} tokens"


def money(value: float) -> str:
    """`$0.0123`."""
    return f"${value:,.4f}"


def duration(seconds: float) -> str:
    """`1h 02m 03s`, `2m 03s`, `3s`."""
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or "—"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows)
    return lines


def _usage_row(name: str, usage: RoleUsage) -> tuple[str, ...]:
    return (
        name,
        str(usage.steps),
        figure(usage.tokens, tokens),
        figure(usage.cost_usd, money),
    )


def render_metrics_md(
    batch: str,
    metrics: CycleMetrics,
    *,
    status: Mapping[str, str | None] | None = None,
    workflow: Mapping[str, str | None] | None = None,
) -> str:
    """The owned text of `metrics.md` (ends with a newline)."""
    lines = [f"# pairbot metrics — {batch}", ""]
    if status is not None and status.get("status"):
        shown = f"Status: {status['status']}"
        if status.get("next"):
            shown += f" (next: {status['next']})"
        if status.get("why"):
            shown += f" — {status['why']}"
        lines += [_cell(shown), ""]
    lines += [
        f"As of {metrics.as_of or 'no record yet'}, from {metrics.records} journal records "
        f"({metrics.source_digest}); completeness {metrics.completeness}.",
    ]
    if workflow is not None:
        lines.append(
            f"Workflow {workflow.get('version') or 'unknown'}, "
            f"inputs {workflow.get('inputsDigest') or 'unknown'}."
        )
    lines += ["", "## Cycles and reviews", ""]
    lines += _table(
        ("Quality (last review)", "Fix cycles", "Reviews", "Retries", "Interrupted", "Orphaned"),
        [
            (
                metrics.quality,
                str(metrics.cycles),
                str(metrics.review_executions),
                str(metrics.retries),
                str(metrics.interrupted),
                str(metrics.orphaned),
            )
        ],
    )
    if metrics.steps_by_transition:
        steps = ", ".join(f"{n} {c}" for n, c in sorted(metrics.steps_by_transition.items()))
        lines += ["", f"Steps by transition: {steps}."]
    lines += ["", "## Tokens, cost and time", ""]
    lines += _table(
        ("Measure", "Value"),
        [
            ("Tokens (input + output)", figure(metrics.tokens, tokens)),
            ("Input tokens", figure(metrics.input_tokens, tokens)),
            ("Output tokens", figure(metrics.output_tokens, tokens)),
            ("Cost", figure(metrics.cost_usd, money)),
            ("Wall time", figure(metrics.wall_seconds, duration, "unobserved")),
        ],
    )
    lines += ["", "## Usage by role", ""]
    rows = [_usage_row(role, usage) for role, usage in sorted(metrics.by_role.items())]
    rows.append(_usage_row("shared overhead", metrics.shared_overhead))
    lines += _table(("Role", "Steps", "Tokens", "Cost"), rows)
    findings = metrics.findings
    late = ", ".join(f"{origin} {count}" for origin, count in findings.late_by_origin.items())
    lines += [
        "",
        "## Findings",
        "",
        f"{findings.total} in all, {findings.blocking} blocking, {findings.open_blocking} still "
        f"open and blocking; late defects by origin: {late}; "
        f"{len(metrics.scope)} scope proposal(s).",
        "",
    ]
    return "\n".join(lines)
