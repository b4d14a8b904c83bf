"""What a card step leaves on the hosts: the review, the PR, the cycle's end, label and tracking.

The card cycle (`app.cycle.card_step`, `app.cycle.agent_step`) decides; this module renders and
publishes through `app.cycle.publish.Publisher`, after the step's outcome is recorded:

    after_transition   push → draft PR; verify → review comment + `pair-review` on its head
    act_on_decision    the cycle end: scope packet or decision, synthesis read back,
                       ready-for-merge, the merge gate, a merge pinned to the reviewed head

Each ends with `app.cycle.status_publish.publish_status`: the label and the tracking comment.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from app import __version__
from app.cycle.head_checks import recorded_evidence
from app.cycle.publish import kept
from app.cycle.state import (
    CardState,
    CardStep,
    park_status,
    pending_scope,
    pull_text,
    read_card,
    rewrite_escalation,
    status_of,
)
from app.cycle.status_publish import publish_status
from app.cycle.worktree import Worktree
from app.domain.card import cycle_end as ce
from app.domain.card.agent_failures import failover_lines
from app.domain.card.autonomy import GateCondition
from app.domain.card.budget import budget_of, check_budget
from app.domain.card.merge_method import choose_merge_method
from app.domain.reports.dispatch_stats import dispatch_stats
from app.domain.reports.escalation import Escalation, Stage, render_escalation
from app.domain.reports.metrics import reduce_metrics
from app.domain.reports.synthesis import models_by_step, render_synthesis, synthesis_marker
from app.domain.review.panel import PANEL_VOTE_KIND, PanelVote
from app.domain.review.review_comment import render_review, review_status_description
from app.domain.review.verdict import FindingsReport
from app.domain.scope.decision import (
    ExtendCard,
    NewCard,
    OpenRemediationRound,
    ScopeDecision,
    ScopeState,
    apply_decisions,
    is_deciders_decision,
    rewrite_card,
    validate_decision,
)
from app.domain.scope.refusal import Refusal
from app.engine.runstate import Park, read_parks, write_parks
from app.engine.step import StepResult, iso_now, journal_event
from app.engine.transition import Derivation, derive_change, read_change_disk
from hosts.cardhash import card_hash
from hosts.errors import Conflict
from hosts.labels import PrState
from hosts.markers import human_tail, render, same_text
from hosts.models import Card, Pull, Target


async def after_transition(
    state: CardState, result: StepResult, tree: Worktree, base: str, card: Card
) -> CardStep:
    """Publish what an agent transition produced, then the status."""
    # Re-read: the step appended its outcome (and the vet its records) to the journal.
    state.records, state.history, state.rec = read_card(state.locus, state.key)
    accepted = result.state in ("advanced", "awaiting-approval")
    if accepted and result.transition == "verify":
        # Journaled with the outcome, before the checkpoint: a saved review always has its head.
        data = {
            "event": "reviewed",
            "head": tree.start,
            "cardHash": card_hash(card.title, card.body),
            "converged": _last_converged(state),
            "blocking": _blocking(state) + _external_blocking(state, tree.start),
            "round": state.history.accepted_count("verify"),
        }
        journal_event(state.locus, state.env.deps.clock, kind="cycle", key=state.key, data=data)
        state.records, state.history, state.rec = read_card(state.locus, state.key)
    # The outcome is recorded: make it durable before the publications that follow it.
    await state.env.save()
    rec = state.rec
    if accepted and result.transition in ("apply", "fix", "red") and rec.pushed is not None:
        await state.pub.ensure_pull(rec, tree.branch, base, *pull_text(card, state.env.hosts.code))
    if accepted and result.transition == "verify":
        await publish_review(state)

    derived = derive_change(
        read_change_disk(tree.path, state.key),
        state.history,
        state.project.cycle.max_fix_rounds,
    )
    status = status_of(derived, state.rec)
    if result.state == "awaiting-approval":
        state.parks = read_parks(state.locus)
        parked = state.parks.get(state.key)
        over_budget = parked is not None and parked.state == "awaiting-human"
        status = PrState.AWAITING_HUMAN if over_budget else PrState.AWAITING_APPROVAL
        gate = state.gate("prepare")
        if not over_budget and result.transition == "propose" and gate.mode == "when":
            status = await _escalate(state, "prepare", gate, gate.fired(card.labels))
    elif result.state == "blocked":
        state.parks = read_parks(state.locus)  # the step just parked the card
        parked = state.parks.get(state.key)
        status = (
            park_status(parked, state.records, state.key) if parked is not None else PrState.BLOCKED
        )
    elif derived.status == "done":
        status = PrState.IN_PROGRESS  # converged: the cycle end runs on the next step
    if accepted and result.transition == "verify-red":
        state.parks = read_parks(state.locus)  # the red verifier's third refusal parks it
        parked = state.parks.get(state.key)
        if parked is not None:
            status = park_status(parked, state.records, state.key)
    rewrite = rewrite_escalation(state) if accepted and result.transition == "verify" else []
    if rewrite:
        # Before any red, seal or fix: a human decides; the run's one escalation comment says so.
        why = "only a rewrite of the branch's Git history fixes it"
        await escalate_review(state, rewrite, why, stage="history-rewrite")
        status = PrState.ESCALATE  # the review's escalate (seed 004), not a gate's park
    plan = _plan_text(tree, state.key) if result.transition == "propose" else None
    return await publish_status(state, result, status, derived, plan=plan)


def _last_verify_findings(state: CardState) -> dict[str, Any] | None:
    for accepted in reversed(state.history.accepted):
        if accepted.transition == "verify":
            return dict(accepted.findings) if accepted.findings else None
    return None


def _last_converged(state: CardState) -> bool | None:
    for accepted in reversed(state.history.accepted):
        if accepted.transition == "verify":
            return accepted.converged
    return None


def _blocking(state: CardState) -> int:
    findings = _last_verify_findings(state) or {}
    return sum(
        1
        for f in findings.get("findings", [])
        if isinstance(f, dict) and f.get("blocking") and f.get("transition", "open") == "open"
    )


def _panel_votes(state: CardState) -> list[PanelVote]:
    """The panel's votes of the last accepted verify (none when one reviewer reviewed)."""
    current: list[PanelVote] = []
    pending: list[PanelVote] = []
    for record in state.records:
        if record.get("key") != state.key:
            continue
        kind = record.get("kind")
        data = record.get("data")
        if kind == PANEL_VOTE_KIND and isinstance(data, dict):
            converged = data.get("converged")
            blocking = data.get("blocking")
            pending.append(
                PanelVote(
                    str(data.get("reviewer")),
                    converged if isinstance(converged, bool) else None,
                    blocking if isinstance(blocking, int) else 0,
                )
            )
        elif kind == "outcome":
            if record.get("transition") == "verify" and record.get("state") in (
                "advanced",
                "awaiting-approval",
            ):
                current = pending
            pending = []
    return current


def _external_blocking(state: CardState, head: str) -> int:
    """How many failing required checks the verify of `head` saw."""
    evidence = recorded_evidence(state.rec, head)
    return len(evidence.blocking) if evidence is not None else 0


def _plan_text(tree: Worktree, key: str) -> str | None:
    plan = tree.path / ".pair" / "changes" / key / "plan.md"
    return plan.read_text(encoding="utf-8", errors="replace") if plan.is_file() else None


async def publish_review(state: CardState) -> None:
    """The review comment and `pair-review` status of the last recorded review."""
    rec = state.rec
    head = rec.reviewed_head
    if head is None or rec.pr is None:
        return
    raw = _last_verify_findings(state)
    report = FindingsReport.model_validate(raw) if raw else FindingsReport()
    converged = bool(rec.review_converged)
    round_ = state.history.accepted_count("verify")
    evidence = recorded_evidence(rec, head)
    body = render_review(
        report,
        head=head,
        review_round=round_,
        converged=converged,
        blocking=rec.review_blocking,
        external=evidence.checks if evidence is not None else (),
        panel=_panel_votes(state),
    )
    description = review_status_description(converged=converged, blocking=rec.review_blocking)
    await state.pub.review(rec, head, body, "success" if converged else "failure", description)


# ---------------------------------------------------------------- the cycle's end


async def act_on_decision(
    state: CardState, decision: ce.Decision, pull: Pull | None, card: Card, derived: Derivation
) -> CardStep:
    """Carry out the cycle-end decision (never ReReview: the caller runs that verify)."""
    key, rec, pub = state.key, state.rec, state.pub
    if isinstance(decision, ce.AwaitingScopeDecision) and pull is not None:
        return await _scope(state, pull, card, derived)
    if isinstance(decision, ce.Publish | ce.FailedPublication) and pull is not None:
        confirmed = await _publish_synthesis(state, pull)
        status = PrState.READY_FOR_MERGE if confirmed else PrState.FAILED_PUBLICATION
        if confirmed and state.until() == "merged":
            status = PrState.IN_PROGRESS  # the merge gate decides on the next step
        message = (
            "synthesis published and read back"
            if confirmed
            else "the synthesis comment could not be confirmed"
        )
        result = StepResult("advanced" if confirmed else "blocked", key, "publish", message=message)
        return await publish_status(state, result, status, derived)
    if isinstance(decision, ce.Merge) and pull is not None:
        refusal = await _review_refusal(state, pull, decision.head)
        if refusal is not None:
            return await _refuse_merge(state, refusal, derived)
        code = state.env.hosts.code
        choice = choose_merge_method(state.project.cycle.merge_method, await code.merge_methods())
        if choice.method is None:
            return await _refuse_merge(state, f"merge refused: {choice.refusal}", derived)
        merged = await code.merge(pull.number, decision.head, choice.method)
        if not merged.merged:
            # Accepted but not done (Azure DevOps completes a PR asynchronously): nothing is
            # recorded as merged, and the card stays in progress, so the next step looks again.
            result = StepResult(
                "advanced",
                key,
                "merge",
                message=f"merge of {decision.head[:12]} requested; PR #{pull.number} is not "
                "merged yet, the next step checks again",
            )
            return await publish_status(state, result, PrState.IN_PROGRESS, derived)
        pub.record("merged", head=decision.head, sha=merged.sha)
        rec.merged_sha = merged.sha
        result = StepResult(
            "advanced", key, "merge", message=f"merged {decision.head[:12]}: {decision.reason}"
        )
        return await publish_status(state, result, PrState.MERGED, derived)
    if isinstance(decision, ce.Escalated):
        await _escalate(state, "merge", state.gate("merge"), decision.conditions)
    result = StepResult("nothing-ready", key, "", message=decision.reason)
    return await publish_status(state, result, decision.pr_state, derived)


async def _escalate(
    state: CardState, stage: Stage, gate: GateCondition, conditions: tuple[str, ...]
) -> PrState:
    """The run's one escalation comment (`app.domain.reports.escalation`); the label to show."""
    what = Escalation(state.card, stage, gate.text, conditions, state.project.trigger)
    await state.pub.escalation(
        state.rec, render_escalation(what), stage=stage, conditions=list(conditions)
    )
    return PrState.ESCALATED


async def escalate_review(
    state: CardState, findings: Sequence[str], reason: str, *, stage: Stage = "review"
) -> PrState:
    """The review's escalate through the run's one escalation comment: a finding handed to a
    person, or one only a history rewrite fixes; both are the review's `escalate`."""
    what = Escalation(state.card, stage, reason, tuple(findings), state.project.trigger)
    await state.pub.escalation(
        state.rec, render_escalation(what), stage=stage, conditions=list(findings)
    )
    return PrState.ESCALATE


async def _review_refusal(state: CardState, pull: Pull, head: str) -> str | None:
    """Why the merge of `head` must not happen, read from the host just before it: pairbot
    merges only a head whose `pair-review` status is `success` on that exact commit (another
    writer may have changed it, and a status on an earlier head says nothing about this one)."""
    status = await state.env.hosts.code.get_review_status(pull.number, head)
    retry = f"Comment `/{state.project.trigger} retry` once it is"
    if status is None:
        return (
            f"merge refused: PR #{pull.number}'s head {head[:12]} carries no `pair-review` "
            f"status; pairbot merges only a head whose review status is success. {retry}"
        )
    if status.state != "success":
        said = f" ({status.description})" if status.description else ""
        return (
            f"merge refused: `pair-review` on PR #{pull.number}'s head {head[:12]} is "
            f"{status.state}{said}, not success. {retry}"
        )
    return None


async def _refuse_merge(state: CardState, reason: str, derived: Derivation) -> CardStep:
    """Park the card at the merge (blocked, the reason on it and in the tracking comment);
    `/pair retry` clears the park and the next step reads the status again."""
    parks = read_parks(state.locus)
    parks[state.key] = Park(
        state="blocked", transition="merge", reason=reason, at=iso_now(state.env.deps.clock)
    )
    write_parks(state.locus, parks, state.held)
    state.parks = parks
    result = StepResult("blocked", state.key, "merge", blocker=reason, message=reason)
    return await publish_status(state, result, PrState.BLOCKED, derived)


async def close_abandoned(state: CardState) -> str | None:
    """`/pair abandon` closes the card's open PR, once; returns what happened to it (for the
    step's message), None when the card has no PR."""
    rec = state.rec
    if rec.pr is None:
        return None
    if rec.pr_closed:
        return f"PR #{rec.pr} is closed"
    if rec.merged_sha is not None:
        return f"PR #{rec.pr} is merged"
    try:
        await state.env.hosts.code.close(Target("pull", rec.pr))
    except Conflict as err:  # merged outside pairbot: nothing to close
        return f"PR #{rec.pr} was not closed: {err}"
    state.pub.record("pr-closed", number=rec.pr)
    rec.pr_closed = True
    return f"PR #{rec.pr} closed"


async def _publish_synthesis(state: CardState, pull: Pull) -> bool:
    rec = state.rec
    run_id = rec.run_id or "run"
    mine = [r for r in state.records if r.get("key") == state.key]
    budget = check_budget("card", budget_of(state.project.budget), mine, state.key)
    metrics = reduce_metrics(
        mine,
        as_of=iso_now(state.env.deps.clock),
        decisions={str(d.get("id")): str(d.get("action")) for d in rec.dispositions},
    )
    body = render_synthesis(
        state.card,
        pull.number,
        run_id,
        status="ready-for-merge",
        reviewed_head=rec.reviewed_head,
        versions={"pairbot": __version__},
        models=models_by_step(mine),
        metrics=metrics,
        metrics_revision=1,
        failovers=failover_lines(mine),
        budget=budget.line if budget is not None else None,
        dispatches=dispatch_stats(mine),
    )
    marker = synthesis_marker(state.card, pull.number, run_id)
    done = await state.env.hosts.code.upsert_comment(Target("pull", pull.number), marker, body)
    # Read back: the upsert re-reads the comment; pairbot's section must be exactly what was
    # rendered (a human's text after it is theirs and does not count).
    stored = done.comment.body
    confirmed = same_text(stored, render(marker, body, human_tail(stored)))
    state.pub.record(
        "synthesis",
        head=rec.reviewed_head,
        confirmed=confirmed,
        comment=kept(Target("pull", pull.number), done),
    )
    rec.synthesis_head = rec.reviewed_head if confirmed else None
    return confirmed


async def _scope(state: CardState, pull: Pull, card: Card, derived: Derivation) -> CardStep:
    key, rec, pub, hosts = state.key, state.rec, state.pub, state.env.hosts
    pending = pending_scope(state)
    assignees = pull.assignees or card.assignees
    deciders = partial(
        is_deciders_decision, maintainer=state.project.maintainer, assignees=assignees
    )
    comment = await hosts.code.read_scope_decision(
        pull.number, state.scope_comment, prefer=deciders
    )
    if comment is not None and comment.id not in rec.applied_refs:
        checked = validate_decision(
            comment,
            maintainer=state.project.maintainer,
            assignees=assignees,
            pending=pending,
        )
        if isinstance(checked, Refusal):
            await pub.reply(
                Target("pull", pull.number),
                "scope-refusal",
                f"pairbot did not apply the scope decision ({checked.code}): {checked.message}",
            )
        else:
            rewritten = rewrite_card(card.body, checked)
            if isinstance(rewritten, Refusal):
                await pub.reply(
                    Target("pull", pull.number),
                    "scope-refusal",
                    f"pairbot did not apply the scope decision ({rewritten.code}): "
                    f"{rewritten.message}",
                )
            else:
                return await _apply_scope(
                    state, card, decision=checked, body=rewritten, derived=derived
                )
    await pub.scope_packet(rec, pending)
    result = StepResult(
        "nothing-ready",
        key,
        "",
        message=f"{len(pending)} scope proposal(s) await the maintainer's decision",
    )
    return await publish_status(state, result, PrState.AWAITING_SCOPE_DECISION, derived)


async def _apply_scope(
    state: CardState, card: Card, *, decision: ScopeDecision, body: str, derived: Derivation
) -> CardStep:
    key, rec, pub, hosts = state.key, state.rec, state.pub, state.env.hosts
    ledger = ScopeState(
        pending=tuple(pending_scope(state)),
        applied_refs=rec.applied_refs,
        scope_epoch=rec.scope_epoch,
    )
    new_state, effects = apply_decisions(ledger, decision)
    for effect in effects:
        if isinstance(effect, NewCard) and effect.proposal_id not in rec.split_cards:
            created = await hosts.pm.create_card(effect.title, effect.body)
            pub.record("scope-card", proposal=effect.proposal_id, number=created.number)
        elif isinstance(effect, ExtendCard) and body != card.body:
            await hosts.pm.update_card(state.card, body=body)
    remediation = next((e for e in effects if isinstance(e, OpenRemediationRound)), None)
    dispositions = [
        {"id": d.id, "type": d.type, "action": d.action, "ref": d.decision_ref, "ac": d.ac}
        for d in new_state.dispositions
        if d.decision_ref == decision.ref
    ]
    pub.record(
        "scope-applied",
        ref=decision.ref,
        dispositions=dispositions,
        scopeEpoch=new_state.scope_epoch,
        by=decision.author,
        url=decision.url,
    )
    if remediation is not None:
        # One remediation round through the ordinary pipeline: apply again for the extended
        # ACs, then the delta re-review the changed card hash asks for.
        journal_event(
            state.locus,
            state.env.deps.clock,
            kind="feedback",
            key=key,
            transition="apply",
            message="The maintainer extended the card's scope: implement the rewritten "
            f"acceptance criteria {', '.join(remediation.acs)} (see the card).",
        )
    result = StepResult(
        "advanced",
        key,
        "scope-decision",
        message=f"applied scope decision {decision.ref}: "
        + ", ".join(f"{d['id']} → {d['action']}" for d in dispositions),
    )
    status = PrState.IN_PROGRESS
    return await publish_status(state, result, status, derived)


# ---------------------------------------------------------------- label + tracking
