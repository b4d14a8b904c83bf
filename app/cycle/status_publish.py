"""A card's status published: its one `pr-state:*` label and its tracking comment.

    publish_status(state, result, status, derived)   the label, then the tracking comment
                                                     (what `/pair status` explains), and the
                                                     step's summary
    card_facts(state, status, derived)               what the explanation is built from
    interrupted_reason(rec, trigger)                 why a dead run's step is shown unfinished

Every card step ends here (`app.cycle.card_step`, `app.cycle.agent_step`, `app.cycle.report`).
"""

from __future__ import annotations

import re
from typing import Any

from app.cycle.records import CycleRecord
from app.cycle.state import (
    CardState,
    CardStep,
    pending_scope,
    rewrite_escalation,
)
from app.domain.card import cycle_end as ce
from app.domain.card.agent_failures import failover_lines
from app.domain.card.budget import budget_of, check_budget
from app.domain.reports.explain import CardFacts, explain
from app.domain.reports.tracking import TrackingStep, render_tracking
from app.engine.step import StepResult
from app.engine.transition import TRANSITIONS, Derivation
from hosts.labels import PrState


def card_facts(state: CardState, status: PrState, derived: Derivation | None) -> CardFacts:
    """The `/pair status` facts of a card, from what its journal says."""
    rec = state.rec
    park = state.parks.get(state.key)
    over_budget = park is not None and park.state == "awaiting-human"
    reason = park.reason if park else None
    if status == PrState.INTERRUPTED and rec.interrupted is not None:
        reason = interrupted_reason(rec, state.project.trigger)
    rewrite = rewrite_escalation(state) if status == PrState.ESCALATE and park is None else []
    if rewrite:
        reason = (
            f"finding {', '.join(rewrite)} can only be fixed by rewriting the branch's Git "
            f"history: rewrite it, push, then `/{state.project.trigger} retry`"
        )
    return CardFacts(
        card=state.card,
        status=status.value.removeprefix("pr-state:"),
        next_step=_next_step(state, status, derived),
        park_reason=reason,
        gate_why="the card spent its budget; a maintainer's approval continues it"
        if over_budget
        else None,
        fix_rounds_used=derived.fix_rounds if derived else 0,
        max_fix_rounds=state.project.cycle.max_fix_rounds,
        review_round=state.history.accepted_count("verify"),
        open_blocking=rec.review_blocking,
        pending_scope=len(pending_scope(state)),
        pr=rec.pr,
        pr_url=rec.pr_url,
        pr_closed=rec.pr_closed,
        trigger=state.project.trigger,
        reviewed_head=rec.reviewed_head,
        until=state.until(),
        merge_gate=(rec.merge or state.project.cycle.merge),
        prepare_gate=(rec.prepare or state.project.cycle.prepare),
        records=tuple(r for r in state.records if r.get("key") == state.key),
    )


def interrupted_reason(rec: CycleRecord, trigger: str) -> str:
    """Why a card whose run died mid-step waits, and what resumes it."""
    dead = rec.interrupted or {}
    return (
        f"the run stopped during `{dead.get('transition') or '?'}` (started "
        f"{dead.get('at') or '?'}) before it recorded an outcome; comment `/{trigger} retry` "
        "to run the step again"
    )


def _next_step(state: CardState, status: PrState, derived: Derivation | None) -> str | None:
    """The step that runs next: the engine's transition while the change is being built, and
    the cycle end's own step (a delta re-review, publish, merge) once it has converged; at the
    review's escalate or a question, the step the person's word leads to (never the `red`
    the blocking findings would otherwise derive)."""
    done = (PrState.READY_FOR_MERGE, PrState.MERGED, PrState.ABANDONED, PrState.INTERRUPTED)
    if status in done:
        return None
    if status == PrState.ESCALATE:
        # A person decides (or rewrites the branch's history); the next review reads it. The
        # findings' red is not next: nothing is written for them until that review.
        return "verify"
    park = state.parks.get(state.key)
    if status == PrState.NEEDS_INPUT and park is not None:
        # The answer re-runs the step that asked: the review's question re-runs the review.
        return park.transition if park.transition in TRANSITIONS else None
    if derived is None:
        return None
    if derived.next is not None:
        return derived.next
    if derived.status != "done":
        return None  # failed-fix: the fix rounds are spent
    rec = state.rec
    return ce.next_end_step(
        pending_scope=len(pending_scope(state)),
        reviewed_head=rec.reviewed_head,
        synthesis_confirmed=rec.synthesis_head is not None
        and rec.synthesis_head == rec.reviewed_head,
        until=state.until(),
        merged=rec.merged_sha is not None,
    )


async def publish_status(
    state: CardState,
    result: StepResult,
    status: PrState,
    derived: Derivation | None,
    *,
    plan: str | None = None,
) -> CardStep:
    """Set the one `pr-state:*` label and upsert the tracking comment; the step's summary."""
    ran = result.state not in ("nothing-ready",)
    await state.pub.label(state.rec, status, reconcile=ran)
    facts = card_facts(state, status, derived)
    explanation = explain(facts)
    body = render_tracking(
        facts,
        explanation,
        tracking_steps(state),
        plan=plan,
        notes=run_notes(state),
        run_url=state.env.run_url,
        words=state.pub.pm.vocabulary,
    )
    shown = {"status": explanation.status, "next": explanation.next, "why": explanation.why}
    await state.pub.tracking(state.rec, body, shown)
    return CardStep(
        result=result,
        card=state.card,
        status=facts.status,
        pr=state.rec.pr,
        explanation=explanation,
    )


def run_notes(state: CardState) -> tuple[str, ...]:
    """The tracking comment's lines on the run: each step a fallback agent took over, and the
    card's budget figures when `.pair/config.yaml` sets one."""
    mine = [r for r in state.records if r.get("key") == state.key]
    notes = [f"failover: {line}" for line in failover_lines(mine)]
    check = check_budget("card", budget_of(state.project.budget), mine, state.key)
    if check is not None:
        notes.append(check.line)
    return tuple(notes)


def tracking_steps(state: CardState) -> tuple[TrackingStep, ...]:
    """Each recorded step with what it pushed (the commit, linked when the host has web URLs)
    and the PR it fed."""
    match = _PULL_URL.match(state.rec.pr_url or "")
    web = match.group("repo") if match else None
    steps: list[TrackingStep] = []
    pushed: str | None = None  # a step's push is journaled just before its outcome
    pr_url: str | None = None
    for record in state.records:
        if record.get("key") != state.key:
            continue
        data = record.get("data") if record.get("kind") == "cycle" else None
        if isinstance(data, dict) and data.get("event") == "pushed":
            pushed = str(data.get("sha"))
        elif isinstance(data, dict) and data.get("event") == "pr":
            pr_url = str(data.get("url") or "") or None
        elif record.get("kind") == "outcome":
            steps.append(
                TrackingStep(
                    at=str(record.get("at", "")),
                    transition=str(record.get("transition", "")),
                    outcome=str(record.get("state", "")),
                    message=str(record.get("message", "")),
                    pr_url=pr_url,
                    commit=pushed,
                    commit_url=f"{web}/commit/{pushed}" if web and pushed else None,
                    tokens=_tokens(record.get("usage")),
                )
            )
            pushed = None
    return tuple(steps)


# A PR's web page is `<repo>/pull/<n>` on GitHub and `<repo>/pullrequest/<n>` on Azure Repos;
# on both a commit's page is `<repo>/commit/<sha>`.
_PULL_URL = re.compile(r"^(?P<repo>https?://[^\s]+?)/(?:pull|pullrequest)/\d+$")


def _tokens(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    total = usage.get("totalTokens")
    if isinstance(total, int):
        return total
    parts = [usage.get("inputTokens"), usage.get("outputTokens")]
    return sum(parts) if all(isinstance(p, int) for p in parts) else None  # type: ignore[arg-type]
