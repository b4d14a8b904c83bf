"""Cycle metrics: one pure reduction of a card's journal records into the synthesis figures.

`reduce_metrics(records, as_of=...)` reads the journal records of one change/card key (the
parsed JSONL dicts, in file order) and returns `CycleMetrics`. It has no clock (`as_of` is
passed in), never raises on a malformed record (a record it cannot read is skipped or counted
as missing coverage), and never fabricates a zero: a figure nobody reported is `None` with
coverage `unknown` (docs/cycle.md).

Steps. A step is a `step-started` entry paired with the entry that ends it: an `outcome` (by
session when both carry one, else by key and transition, oldest open start first) or, for
`proof-of-work`, the `proof-of-work` verdict record. A start with no end is *interrupted*; an
end with no start is an *orphan*; both leave the step's wall time unknown.

Figures (every one derived from the records alone):

    cycles             completed fix rounds: an accepted `fix` outcome followed by an accepted
                       `verify` (the re-review ran on it); an unreviewed fix is not yet a cycle
    review_executions  accepted `verify` outcomes (a review that produced a verdict)
    retries            steps that ended blocked/failed and whose key+transition was started
                       again later; kept apart from cycles and reviews
    steps              step count by transition (interrupted and orphan steps included)
    usage              input/output/total tokens and cost over the *agent steps* (an outcome
                       carrying a `usage` object, or any step of an agent transition, including
                       an interrupted one): `known` when every agent step reported the figure,
                       `partial` (the sum of the reported ones, and how many are unreported)
                       when some did, `unknown` (value None) when none did. A step's total
                       tokens are known only when both its input and output counts are.
                       The same figures per role (`byRole`: preparation, implementation,
                       reviewer, red, green, decomposition) and for the agent steps no role
                       names (`sharedOverhead`): `app.domain.reports.usage_roles`
    wall_time          seconds from `step-started` to its end (ISO 8601 timestamps), summed over
                       the steps where both sides were observed; same coverage rule over steps
    quality            the last accepted verify's verdict: converged / not-converged /
                       unknown (its verdict does not say) / unreviewed (no accepted verify)

Findings come from the `findings` object of accepted `verify` outcomes (the verifier's
findings file: `{"findings": [...], "scopeChanges": [...]}`); review round N is the N-th such
review. Each id counts once (its latest report wins for kind and transition). A finding is a
*late defect* when it was first seen in a round later than 1 and is not a `question`; its origin:

    introduced-by-remediation  a `regression` first seen after an accepted `fix`
    preexisting-missed         a `defect` (the code already had it; an earlier review missed it)
    unknown                    anything else (a regression with no fix before it, a late
                               approved-test-failing or contract-gap): the journal cannot say

Scope proposals (`sc-<n>`, never defects) are listed in first-seen order with the maintainer's
decision when the caller passes it (`decisions`: proposal id → action, e.g. from the scope
ledger's dispositions); otherwise the decision is None (pending or not known here).

Regression risks. The four counters of the card's regression-risk ledger (`cycle` entries
`{event: "risk"}`, the latest run's), derived by `app.domain.review.regression.counters`: the active
view (`activeRegressionRisks`) apart from the history (`invalidatedRemediations`,
`regressionRepairs`, `dischargedRegressionRisks`).

The values it returns are `app.domain.reports.metrics_model`'s.

`completeness` is `complete` only when every usage and time figure is `known` and no step was
interrupted or orphaned. `source_digest` is `sha256:<hex>` over the canonical JSON of the
records reduced, so a consumer sees whether the inputs changed.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.reports.metrics_model import (
    CycleMetrics,
    FindingMetrics,
    LateDefect,
    Origin,
    Quality,
    ScopeProposal,
    StepMetrics,
)
from app.domain.reports.usage_roles import sum_amounts, sum_counts, usage_by_role
from app.domain.review.regression import RiskEvent, counters

# Transitions that spawn an agent: one of these that never reported usage is unreported usage.
AGENT_TRANSITIONS: frozenset[str] = frozenset(
    {"propose", "apply", "verify", "red", "verify-red", "fix", "decompose"}
)
ACCEPTED_STATES: frozenset[str] = frozenset({"advanced", "awaiting-approval"})
BLOCKED_STATES: frozenset[str] = frozenset({"blocked", "failed"})
ACTIVE_TRANSITIONS: frozenset[str] = frozenset({"open", "human"})


# ---------------------------------------------------------------- reading values defensively


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    """A non-negative integer count, else None (a bool, a float or a negative is no count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _money(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    amount = float(value)
    return amount if math.isfinite(amount) and amount >= 0 else None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _seconds(started: Any, ended: Any) -> float | None:
    """Elapsed seconds between two ISO 8601 stamps; None if either is unreadable or it is < 0."""
    start, end = _parse_time(started), _parse_time(ended)
    if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None):
        return None
    try:
        elapsed = (end - start).total_seconds()
    except OverflowError:  # pragma: no cover - needs dates at the ends of datetime's range
        return None
    return elapsed if elapsed >= 0 else None


def source_digest(records: Sequence[Any]) -> str:
    """`sha256:<hex>` of the records' canonical JSON (sorted keys, compact)."""
    try:
        text = json.dumps(
            list(records), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
    except (TypeError, ValueError):  # keys that cannot be sorted together, circular values
        text = repr(list(records))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ---------------------------------------------------------------- pairing steps


@dataclass
class _Open:
    key: str
    transition: str
    session: str | None
    at: Any
    order: int


def _end(
    opened: _Open | None,
    *,
    key: str,
    transition: str,
    state: str | None,
    at: Any,
    usage: Any,
) -> StepMetrics:
    usage_map = usage if isinstance(usage, Mapping) else None
    agent = transition in AGENT_TRANSITIONS or usage_map is not None
    figures = usage_map or {}
    return StepMetrics(
        key=key,
        transition=transition,
        state=state,
        started_at=_str(opened.at) if opened else None,
        ended_at=_str(at),
        seconds=_seconds(opened.at, at) if opened else None,
        agent=agent,
        observed_start=opened is not None,
        input_tokens=_count(figures.get("inputTokens")),
        output_tokens=_count(figures.get("outputTokens")),
        cost_usd=_money(figures.get("costUsd")),
    )


def _pair_steps(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, StepMetrics]]:
    """Every step as (order, metrics), order being the index of its start (or its end)."""
    open_steps: list[_Open] = []
    steps: list[tuple[int, StepMetrics]] = []

    def interrupt(step: _Open) -> None:
        open_steps.remove(step)
        steps.append(
            (
                step.order,
                StepMetrics(
                    key=step.key,
                    transition=step.transition,
                    state=None,
                    started_at=_str(step.at),
                    ended_at=None,
                    seconds=None,
                    agent=step.transition in AGENT_TRANSITIONS,
                    observed_end=False,
                ),
            )
        )

    def take(key: str, transition: str, session: str | None) -> _Open | None:
        if session is not None:
            for step in open_steps:
                if step.key == key and step.session == session:
                    open_steps.remove(step)
                    return step
        for step in open_steps:
            if step.key == key and step.transition == transition:
                open_steps.remove(step)
                return step
        return None

    for index, record in enumerate(records):
        kind = record.get("kind")
        key = _str(record.get("key")) or ""
        session = _str(record.get("session"))
        if kind == "step-started":
            transition = _str(record.get("transition")) or ""
            # One key runs one step at a time: an earlier start still open there never ended.
            for stale in [s for s in open_steps if s.key == key]:
                interrupt(stale)
            open_steps.append(_Open(key, transition, session, record.get("at"), index))
        elif kind == "outcome":
            transition = _str(record.get("transition")) or ""
            opened = take(key, transition, session)
            ended = _end(
                opened,
                key=key,
                transition=transition,
                state=_str(record.get("state")) or "",
                at=record.get("at"),
                usage=record.get("usage"),
            )
            steps.append((opened.order if opened else index, ended))
        elif kind == "proof-of-work":
            proof = record.get("proof")
            passed = isinstance(proof, Mapping) and proof.get("gatePassed") is True
            opened = take(key, "proof-of-work", None)
            ended = _end(
                opened,
                key=key,
                transition="proof-of-work",
                state="advanced" if passed else "blocked",
                at=record.get("at"),
                usage=None,
            )
            steps.append((opened.order if opened else index, ended))
    for step in list(open_steps):
        interrupt(step)
    steps.sort(key=lambda pair: pair[0])
    return steps


# ---------------------------------------------------------------- findings and scope


def _items(value: Any, name: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, Mapping):
        return []
    listed = value.get(name)
    if not isinstance(listed, list):
        return []
    return [item for item in listed if isinstance(item, Mapping) and _str(item.get("id"))]


@dataclass
class _Seen:
    kind: str
    first_round: int
    after_fix: bool
    ever_blocking: bool
    blocking: bool
    transition: str


def _reduce_findings(
    reviews: Sequence[tuple[Mapping[str, Any] | None, bool]],
) -> FindingMetrics:
    seen: dict[str, _Seen] = {}
    last_ids: set[str] = set()
    for number, (report, after_fix) in enumerate(reviews, start=1):
        current: set[str] = set()
        for item in _items(report, "findings"):
            fid = str(item["id"])
            kind = _str(item.get("kind")) or "unknown"
            blocking = item.get("blocking") is True
            transition = _str(item.get("transition")) or "open"
            current.add(fid)
            known = seen.get(fid)
            if known is None:
                seen[fid] = _Seen(kind, number, after_fix, blocking, blocking, transition)
            else:
                known.kind, known.blocking, known.transition = kind, blocking, transition
                known.ever_blocking = known.ever_blocking or blocking
        if report is not None:  # a verdict-only review lists nothing: keep the last listing
            last_ids = current
    by_kind: dict[str, int] = {}
    for entry in seen.values():
        by_kind[entry.kind] = by_kind.get(entry.kind, 0) + 1
    late = tuple(
        LateDefect(id=fid, kind=entry.kind, first_round=entry.first_round, origin=_origin(entry))
        for fid, entry in seen.items()
        if entry.first_round > 1 and entry.kind != "question"
    )
    metrics = FindingMetrics(
        total=len(seen),
        blocking=sum(1 for entry in seen.values() if entry.ever_blocking),
        open_blocking=sum(
            1
            for fid, entry in seen.items()
            if fid in last_ids and entry.blocking and entry.transition in ACTIVE_TRANSITIONS
        ),
        by_kind=dict(sorted(by_kind.items())),
        late=late,
    )
    return metrics


def _origin(item: _Seen) -> Origin:
    if item.kind == "regression":
        return "introduced-by-remediation" if item.after_fix else "unknown"
    if item.kind == "defect":
        return "preexisting-missed"
    return "unknown"


def _reduce_scope(
    reports: Sequence[Mapping[str, Any] | None], decisions: Mapping[str, str]
) -> tuple[ScopeProposal, ...]:
    latest: dict[str, ScopeProposal] = {}
    for report in reports:
        for item in _items(report, "scopeChanges"):
            sid = str(item["id"])
            affected = _str(item.get("affectedAc", item.get("affected_ac")))
            decision = decisions.get(sid)
            latest[sid] = ScopeProposal(
                id=sid,
                type=_str(item.get("type")) or "unknown",
                affected_ac=affected,
                decision=decision if isinstance(decision, str) else None,
            )
    return tuple(latest.values())


# ---------------------------------------------------------------- the reducer


def reduce_metrics(
    entries: Sequence[Mapping[str, Any]],
    *,
    as_of: str,
    decisions: Mapping[str, str] | None = None,
) -> CycleMetrics:
    """Reduce one card's journal records (file order) into its cycle metrics. Never raises."""
    records = [record for record in entries if isinstance(record, Mapping)]
    steps = [step for _, step in _pair_steps(records)]

    cycles, quality, reviews = _reviews(records)
    retries = _retries(steps)
    by_transition: dict[str, int] = {}
    for step in steps:
        by_transition[step.transition] = by_transition.get(step.transition, 0) + 1

    agent_steps = [step for step in steps if step.agent]
    input_tokens = sum_counts([s.input_tokens for s in agent_steps])
    output_tokens = sum_counts([s.output_tokens for s in agent_steps])
    tokens = sum_counts([s.tokens for s in agent_steps])
    cost = sum_amounts([s.cost_usd for s in agent_steps], 6)
    wall = sum_amounts([s.seconds for s in steps], 3)
    by_role, shared = usage_by_role(agent_steps)
    interrupted = sum(1 for s in steps if s.interrupted)
    orphaned = sum(1 for s in steps if s.orphaned)

    findings = _reduce_findings(reviews)
    scope = _reduce_scope([report for report, _ in reviews], decisions or {})
    all_known = all(
        q.coverage == "known" for q in (input_tokens, output_tokens, tokens, cost, wall)
    )
    return CycleMetrics(
        as_of=as_of,
        source_digest=source_digest(records),
        records=len(records),
        completeness="complete" if all_known and not interrupted and not orphaned else "partial",
        quality=quality,
        cycles=cycles,
        review_executions=len(reviews),
        retries=retries,
        interrupted=interrupted,
        orphaned=orphaned,
        steps_by_transition=dict(sorted(by_transition.items())),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens=tokens,
        cost_usd=cost,
        wall_seconds=wall,
        steps=tuple(steps),
        findings=findings,
        scope=scope,
        regression=_regression(records),
        by_role=by_role,
        shared_overhead=shared,
    )


def _reviews(
    records: Sequence[Mapping[str, Any]],
) -> tuple[int, Quality, list[tuple[Mapping[str, Any] | None, bool]]]:
    """Cycles, the quality and each accepted review's findings report (with whether a fix came
    before it), in journal order."""
    cycles = 0
    fix_pending = False  # an accepted fix not yet re-reviewed
    any_fix = False
    quality: Quality = "unreviewed"
    reviews: list[tuple[Mapping[str, Any] | None, bool]] = []
    for record in records:
        state = _str(record.get("state"))
        if record.get("kind") != "outcome" or state not in ACCEPTED_STATES:
            continue
        transition = _str(record.get("transition"))
        if transition == "fix":
            fix_pending = any_fix = True
        elif transition == "verify":
            if fix_pending:
                cycles += 1
                fix_pending = False
            findings = record.get("findings")
            reviews.append((findings if isinstance(findings, Mapping) else None, any_fix))
            verdict = record.get("verdict")
            converged = verdict.get("converged") if isinstance(verdict, Mapping) else None
            quality = (
                "converged"
                if converged is True
                else "not-converged"
                if converged is False
                else "unknown"
            )
    return cycles, quality, reviews


def _retries(steps: Sequence[StepMetrics]) -> int:
    """Blocked ends whose key+transition was started again later."""
    return sum(
        1
        for i, step in enumerate(steps)
        if step.state in BLOCKED_STATES
        and any(
            later.key == step.key and later.transition == step.transition
            for later in steps[i + 1 :]
        )
    )


def _regression(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The ledger counters of the latest run that wrote one; a malformed entry is skipped."""
    events: list[RiskEvent] = []
    for record in records:
        data = record.get("data")
        if record.get("kind") != "cycle" or not isinstance(data, Mapping):
            continue
        if data.get("event") != "risk":
            continue
        try:
            event = RiskEvent.from_json(data)
        except (KeyError, TypeError, ValueError):
            continue
        if events and event.run != events[-1].run:
            events = []  # a new run's ledger: the earlier run's risks are its own history
        events.append(event)
    return counters(events)
