"""A card's steps and events, read from its journal records: each step's transition, outcome,
duration, usage and findings (open findings carried from one step to the next), and the
journal's other records as one line of text each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.web.pages.views import ACCEPTED, CLOSED, Event, Finding, Report, Step, Usage


def _parse(at: str) -> datetime | None:
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return None


def _duration(start: str, end: str) -> float | None:
    began, ended = _parse(start), _parse(end)
    if began is None or ended is None:
        return None
    return round((ended - began).total_seconds(), 3)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage()
    total = raw.get("totalTokens")
    if not isinstance(total, int):
        parts = (raw.get("inputTokens"), raw.get("outputTokens"))
        total = parts[0] + parts[1] if all(isinstance(p, int) for p in parts) else None  # type: ignore[operator]
    cost = raw.get("costUsd")
    return Usage(tokens=total, cost_usd=float(cost) if isinstance(cost, int | float) else None)


def _findings(raw: Any, before: Mapping[str, Finding]) -> tuple[Finding, ...]:
    """A verify outcome's findings, each marked new or still open against the last round, and
    the last round's that are gone marked resolved."""
    items = raw.get("findings") if isinstance(raw, Mapping) else None
    seen: list[Finding] = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping):
            continue
        ident = str(item.get("id") or f"#{index + 1}")
        text = item.get("title") or item.get("summary") or item.get("message") or ""
        seen.append(
            Finding(
                id=ident,
                severity=str(item.get("severity") or ""),
                text=str(text),
                transition=_finding_state(item.get("transition"), carried=ident in before),
            )
        )
    ids = {f.id for f in seen}
    gone = [
        Finding(f.id, f.severity, f.text, "resolved")
        for f in before.values()
        if f.id not in ids and f.transition not in CLOSED
    ]
    return (*seen, *gone)


def _finding_state(declared: object, *, carried: bool) -> str:
    """What became of a finding this round: the reviewer's own transition when it closed the
    finding (a finding carried forward as `resolved` is not still open), else new or still
    open against the last round."""
    if declared in ("resolved", "superseded"):
        return str(declared)
    if declared == "human":
        return "needs a person"
    return "still open" if carried else "new"


def _event_text(data: Mapping[str, Any]) -> str | None:
    """A cycle event worth a line on the card's page; None for the bookkeeping ones."""
    event = data.get("event")
    if event == "pushed":
        return f"pushed {str(data.get('sha', ''))[:12]} ({data.get('transition') or 'a step'})"
    if event == "pr":
        return f"opened PR #{data.get('number')}"
    if event == "reviewed":
        verdict = "converged" if data.get("converged") else "not converged"
        return (
            f"review round {data.get('round')} read back on {str(data.get('head', ''))[:12]}: "
            f"{verdict}, {data.get('blocking', 0)} blocking"
        )
    if event == "review-published":
        return f"review comment and status published on {str(data.get('head', ''))[:12]}"
    if event == "label":
        return f"label set: {data.get('state')}"
    if event == "tracking":
        return f"tracking comment: {data.get('status')} — {data.get('why') or ''}".rstrip(" —")
    if event == "synthesis":
        return f"synthesis comment published on {str(data.get('head', ''))[:12]}"
    if event == "merged":
        return f"merged as {str(data.get('sha', ''))[:12]}"
    if event == "abandoned":
        return "abandoned"
    if isinstance(event, str) and event.startswith("scope"):
        details = ", ".join(
            f"{k}: {v}" for k, v in data.items() if k != "event" and isinstance(v, str | int)
        )
        return f"{event}" + (f" ({details})" if details else "")
    return None


def card_steps(
    records: Sequence[Mapping[str, Any]], key: str
) -> tuple[tuple[Step, ...], tuple[Event, ...]]:
    """The card's steps in order, and its host-side events, from its batch journal."""
    steps: list[Step] = []
    open_steps: dict[str, int] = {}  # session -> index in steps
    events: list[Event] = []
    pushed = ""
    last_findings: dict[str, Finding] = {}
    reviews = 0
    for ref, record in enumerate(records):
        if record.get("key") != key:
            continue
        kind = record.get("kind")
        at = str(record.get("at", ""))
        session = str(record.get("session") or "")
        raw = record.get("data")
        data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if kind == "step-started":
            open_steps[session] = len(steps)
            steps.append(
                Step(
                    transition=str(record.get("transition") or ""),
                    session=session,
                    started_at=at,
                    agent=str(data.get("agent") or ""),
                    model=str(data.get("model") or ""),
                    journal_ref=ref,
                )
            )
        elif kind in ("progress", "blocker", "needs-input", "completion") and (
            session in open_steps
        ):
            index = open_steps[session]
            report = Report(at=at, kind=str(kind), message=str(record.get("message", "")))
            steps[index] = replace(steps[index], reports=(*steps[index].reports, report))
        elif kind == "outcome":
            transition = str(record.get("transition") or "")
            index_or_none = open_steps.pop(session, None)
            base = (
                steps[index_or_none]
                if index_or_none is not None
                else Step(transition=transition, session=session, started_at=at)
            )
            findings: tuple[Finding, ...] = ()
            review_round = None
            if transition == "verify" and record.get("findings") is not None:
                findings = _findings(record.get("findings"), last_findings)
                last_findings = {f.id: f for f in findings if f.transition not in CLOSED}
                if record.get("state") in ACCEPTED:
                    reviews += 1
                    review_round = reviews
            done = replace(
                base,
                outcome=str(record.get("state") or ""),
                ended_at=at,
                duration_s=_duration(base.started_at, at),
                message=str(record.get("message", "")),
                usage=_usage(record.get("usage")),
                commit=pushed,
                journal_ref=ref,
                findings=findings,
                review_round=review_round,
            )
            if index_or_none is None:
                steps.append(done)
            else:
                steps[index_or_none] = done
            pushed = ""
        elif kind == "cycle":
            if data.get("event") == "pushed":
                pushed = str(data.get("sha") or "")
            text = _event_text(data)
            if text is not None:
                events.append(
                    Event(at=at, event=str(data.get("event")), text=text, journal_ref=ref)
                )
    return tuple(steps), tuple(events)
