"""One step of a card: lock its batch, derive the next step from its branch, run ONE, release.

    advance_card(env, card)   what every command, push and tick of a card comes to: under the
                              card's lock, read its journal (a run-state it cannot carry on
                              shows `incompatible` or `failed-resume`, and the error is raised);
                              an abandoned, parked, interrupted or history-rewrite-escalated
                              card runs nothing (its status is published); else the worktree is
                              made fresh on its branch, what an earlier step left due is
                              published (`_catch_up`), and a review that blocks is routed by
                              its findings' kinds (`app.cycle.contract`); else the transition
                              its plan names runs (`app.cycle.agent_step`), or, once
                              converged, the cycle end (`app.domain.card.cycle_end`) acts
    card_hosts(env, card, …)  `env` on the hosts the card runs on (its stored binding)

`app.cycle.driver` applies the commands that lead here; `app.cycle.report` publishes.
"""

from __future__ import annotations

import asyncio
import contextlib

from app.cycle import worktree as wt
from app.cycle.agent_step import run_transition
from app.cycle.batch import card_branch
from app.cycle.bookkeeper import bookkeep
from app.cycle.contract import ESCALATE, QUESTION, hold, record_route, route_of
from app.cycle.metrics_observer import observing
from app.cycle.records import CycleRecord, fold_cycle
from app.cycle.report import act_on_decision, close_abandoned, escalate_review, publish_review
from app.cycle.run_inputs import record_inputs
from app.cycle.schedule import card_key
from app.cycle.state import (
    CardState,
    CardStep,
    CycleEnv,
    dangling_step,
    park_status,
    pending_scope,
    publisher_for,
    pull_text,
    read_card,
    rewrite_escalation,
    risk_ledger,
    status_of,
)
from app.cycle.status_publish import interrupted_reason, publish_status
from app.domain.card import cycle_end as ce
from app.domain.card.binding import Binding, for_card
from app.domain.review.regression import active_risks
from app.domain.review.routing import Routing
from app.domain.text.mdtext import one_line
from app.engine import jsonl, lock
from app.engine.manifest import load_manifest, load_project_config
from app.engine.runstate import IncompatibleRunStateError, RunLocus, read_parks
from app.engine.step import StepResult, journal_event, parked_result
from app.engine.transition import Derivation, Transition, derive_change, read_change_disk
from app.errors import JournalCorruptError, StateCorruptError
from hosts.cardhash import card_hash
from hosts.errors import HostError
from hosts.labels import PrState
from hosts.models import Pull, Target


def card_hosts(
    env: CycleEnv, card: int, locus: RunLocus, rec: CycleRecord, *, store: bool
) -> CycleEnv:
    """`env` on the hosts `card` runs on: the binding stored with its run-state when it first
    ran (a running card never moves host), else the project's — recorded now when `store`
    (under the card's lock, in the journal that travels with the run-state everywhere)."""
    if env.resolution is None:
        return env  # hosts handed in directly: nothing to store or compare
    stored = Binding.from_json(rec.binding) if rec.binding is not None else None
    chosen = for_card(stored, env.resolution, card)
    if chosen.store and store:
        data = {"event": "hosts", "binding": chosen.binding.to_json()}
        journal_event(locus, env.deps.clock, kind="cycle", key=card_key(card), data=data)
    if chosen.line is not None and env.say is not None:
        env.say(chosen.line)
    if chosen.binding == env.resolution.binding or env.rebind is None:
        return env
    return env.rebind(chosen.binding)


async def advance_card(
    env: CycleEnv, card: int, *, run: bool = True, scope_comment: str | None = None
) -> CardStep:
    """Run one step of `card` (or, with `run=False`, only bring its publications up to date)."""
    key = card_key(card)
    project = load_project_config(env.root)
    load_manifest(env.root, key)  # validates; an unknown card batch is a clear error
    locus = RunLocus.for_batch(env.root, key)
    held = lock.acquire(locus.lock, now=env.deps.clock())
    try:
        try:
            records, history, rec = read_card(locus, key)
            parks = read_parks(locus)
        except IncompatibleRunStateError:
            await _show_unusable(env, card, locus, PrState.INCOMPATIBLE)
            raise
        except (StateCorruptError, JournalCorruptError):
            await _show_unusable(env, card, locus, PrState.FAILED_RESUME)
            raise
        env = card_hosts(env, card, locus, rec, store=True)
        state = CardState(
            env=env,
            card=card,
            project=project,
            locus=locus,
            records=records,
            history=history,
            rec=rec,
            parks=parks,
            pub=publisher_for(env, card, locus),
            scope_comment=scope_comment,
            held=held,
        )
        record_inputs(state)
        async with observing(locus, key):  # the run's books, kept as the step goes
            return await _step(state, held, run=run)
    finally:
        lock.release(held)


async def _show_unusable(env: CycleEnv, card: int, locus: RunLocus, status: PrState) -> None:
    """A run-state the step cannot carry on shows on the card (and its PR, when the journal
    still names it) as `incompatible` or `failed-resume`. Nothing in the run directory is
    written: the error that follows says what is wrong and what to do. A host that cannot be
    reached now leaves the label as it was; the error is still raised."""
    pr: int | None = None
    with contextlib.suppress(JournalCorruptError):
        pr = fold_cycle(jsonl.read_records(locus.journal), card_key(card)).pr
    with contextlib.suppress(HostError):
        await env.hosts.pm.set_state_label(Target("card", card), status)
        if pr is not None:
            await env.hosts.code.set_state_label(Target("pull", pr), status)


async def _step(state: CardState, held: lock.LockProof, *, run: bool) -> CardStep:
    rec, key = state.rec, state.key
    if rec.abandoned:
        message = f"card #{state.card} is abandoned"
        closed = await close_abandoned(state)
        if closed:
            message += f"; {closed}"
        if rec.pushed is not None:  # abandoned after work: what it struggled with is a lesson
            await bookkeep(state, "abandoned", state.env.root, rec.pushed)
        result = StepResult("nothing-ready", key, "", message=message)
        return await publish_status(state, result, PrState.ABANDONED, None)
    park = state.parks.get(key)
    if park is not None:
        result = parked_result(key, park)
        return await publish_status(state, result, park_status(park, state.records, key), None)
    if _interrupted(state):
        return await publish_status(state, _interrupted_result(state), PrState.INTERRUPTED, None)
    env = state.env
    base = env.base_branch or wt.current_branch(env.root, env.deps.env)
    # Git and the test runner block; in a thread, so the App's event loop keeps answering.
    tree = await asyncio.to_thread(
        wt.prepare, env.root, key, card_branch(state.card), base, env.remote
    )
    disk = read_change_disk(tree.path, key)
    derived = derive_change(disk, state.history, state.project.cycle.max_fix_rounds)
    await _catch_up(state, tree, base, applied=disk.applied)
    escalated = rewrite_escalation(state)
    if escalated:
        if run and rec.rewrite_retry and tree.start != rec.reviewed_head:
            delta = f"the branch's history was rewritten for finding {', '.join(escalated)}"
            return await run_transition(state, held, tree, base, "verify", delta=delta)
        rewritten = tree.start != rec.reviewed_head
        if rec.rewrite_retry and not rewritten:
            # A retry on the unchanged head is spent: the next one, after the rewrite, counts.
            data = {"event": "rewrite-retry", "spent": True}
            journal_event(state.locus, env.deps.clock, kind="cycle", key=state.key, data=data)
        result = _escalation_result(state, escalated, rewritten=rewritten)
        return await publish_status(state, result, PrState.ESCALATE, None)
    if not run:
        result = StepResult("nothing-ready", key, "", message="status refreshed")
        return await publish_status(state, result, status_of(derived, rec), derived)
    if rec.mode == "refine" and derived.next not in (None, "propose"):
        result = StepResult(
            "nothing-ready",
            key,
            "",
            message="refined: the plan is ready; comment `/pair implement` to build it",
        )
        return await publish_status(state, result, PrState.TARGET_READY, derived)
    if derived.next == "red" and state.history.feedback is None:
        return await _routed(state, held, tree, base, derived)
    if derived.next is not None:
        return await run_transition(state, held, tree, base, _guarded_next(state, derived.next))
    if derived.status == "failed-fix":
        result = StepResult(
            "nothing-ready",
            key,
            "",
            message=f"the fix loop spent maxFixRounds ({state.project.cycle.max_fix_rounds})",
        )
        return await publish_status(state, result, PrState.FAILED_FIX, derived)
    return await _cycle_end(state, held, tree, base, derived)


async def _routed(
    state: CardState, held: lock.LockProof, tree: wt.Worktree, base: str, derived: Derivation
) -> CardStep:
    """A review that blocks, routed by its findings' kinds (`app.cycle.contract.route_of`)."""
    routing = route_of(state, tree.path)
    if routing.failed_fix:
        message = f"failed-fix: {routing.reason} ({', '.join(routing.findings)})"
        result = StepResult("nothing-ready", state.key, "", message=message, blocker=message)
        return await publish_status(state, result, PrState.FAILED_FIX, derived)
    if routing.route in ("needs-input", "escalate"):
        return await _held_by_review(state, routing, derived)
    if routing.route == "verify":
        return await run_transition(state, held, tree, base, "verify", delta=routing.reason)
    record_route(state, routing)
    transition: Transition = {"green-fix": "fix", "re-plan": "propose"}.get(  # type: ignore[assignment]
        routing.route, "red"
    )
    return await run_transition(state, held, tree, base, transition, routing=routing)


async def _held_by_review(state: CardState, routing: Routing, derived: Derivation) -> CardStep:
    """The review asked a question (needs-input, `/pair answer`) or handed a finding to a person
    (the review's escalate, one escalation comment, `/pair retry` once decided)."""
    if routing.route == "needs-input":
        hold(state, "needs-input", QUESTION, routing.reason)
        status = PrState.NEEDS_INPUT
    else:
        hold(state, "blocked", ESCALATE, routing.reason)
        status = await escalate_review(state, routing.findings, routing.reason)
    result = StepResult("nothing-ready", state.key, "", message=routing.reason)
    return await publish_status(state, result, status, derived)


def _escalation_result(state: CardState, ids: list[str], *, rewritten: bool) -> StepResult:
    """Why nothing runs at a history-rewrite escalation, and what the human does."""
    which = ", ".join(one_line(i, 40) for i in ids)
    trigger = state.project.trigger
    if rewritten:
        then = f"the branch has a new head: comment `/{trigger} retry` to have it reviewed"
    else:
        then = (
            f"rewrite the branch's history and push it, then comment `/{trigger} retry` "
            "(the new head is reviewed afresh)"
        )
    message = (
        f"escalated to a human: finding {which} can only be fixed by rewriting the branch's Git "
        f"history, which pairbot never does and no command waives; {then}"
    )
    return StepResult("nothing-ready", state.key, "", message=message, blocker=message)


def _interrupted(state: CardState) -> bool:
    """Whether a dead run left this card's step unfinished. Asked under the card's lock, so
    a step started with no outcome recorded after it belongs to a run that is gone: it is
    recorded once (`interrupted`), and the card waits for `/pair retry` (or `/pair
    implement`), because a step that died once may die again and spend again."""
    started = dangling_step(state.records, state.key)
    if started is not None:
        data = {
            "event": "interrupted",
            "transition": started.get("transition"),
            "session": started.get("session"),
            "at": started.get("at"),
        }
        journal_event(state.locus, state.env.deps.clock, kind="cycle", key=state.key, data=data)
        state.records, state.history, state.rec = read_card(state.locus, state.key)
    return state.rec.interrupted is not None


def _interrupted_result(state: CardState) -> StepResult:
    transition = str((state.rec.interrupted or {}).get("transition") or "")
    reason = interrupted_reason(state.rec, state.project.trigger)
    return StepResult("nothing-ready", state.key, transition, message=reason)


def _guarded_next(state: CardState, transition: Transition) -> Transition:
    """`propose` again when a plan is on the branch but no propose was ever recorded and the
    `prepare` gate applies: the plan it pushed never got its approval park, and building on an
    unapproved plan would bypass the gate. (The re-run refines the plan and parks.)"""
    if (
        transition == "apply"
        and state.history.accepted_count("propose") == 0
        and state.gate("prepare").mode != "never"
    ):
        return "propose"
    return transition


async def _catch_up(state: CardState, tree: wt.Worktree, base: str, *, applied: bool) -> None:
    """Finish the publications an earlier, interrupted step left due.

    The branch is the evidence, not only the journal: work an apply pushed (it passed the vet
    first) but whose record a killed runner took with it still gets its draft PR.
    """
    rec = state.rec
    if applied and rec.pr is None:
        card = await state.env.hosts.pm.get_card(state.card)
        await state.pub.ensure_pull(rec, tree.branch, base, *pull_text(card, state.env.hosts.code))
    if rec.reviewed_head is not None and rec.review_published != rec.reviewed_head:
        await publish_review(state)


async def _cycle_end(
    state: CardState, held: lock.LockProof, tree: wt.Worktree, base: str, derived: Derivation
) -> CardStep:
    rec, hosts = state.rec, state.env.hosts
    pull: Pull | None = await hosts.code.get_pull(rec.pr) if rec.pr is not None else None
    card = await hosts.pm.get_card(state.card)
    labels = frozenset(card.labels) | frozenset(pull.labels if pull else ())
    facts = ce.CycleEndFacts(
        converged=True,
        pending_scope=len(pending_scope(state)),
        synthesis_confirmed=rec.synthesis_head is not None
        and rec.synthesis_head == rec.reviewed_head,
        until=state.until(),
        merge_gate=state.gate("merge"),
        labels=labels,
        reviewed_head=rec.reviewed_head,
        current_head=pull.head_sha if pull is not None else None,
        card_hash_reviewed=rec.reviewed_card_hash,
        card_hash_now=card_hash(card.title, card.body),
        pull_state=pull.state if pull is not None else "open",
        approved=rec.merge_approved_head is not None
        and rec.merge_approved_head == rec.reviewed_head,
        active_risks=len(active_risks(risk_ledger(rec))),
    )
    decision = ce.decide_cycle_end(facts)
    if isinstance(decision, ce.ReReview | ce.Unreviewed):
        return await run_transition(state, held, tree, base, "verify", delta=decision.reason)
    step = await act_on_decision(state, decision, pull, card, derived)
    if step.status == PrState.MERGED.value.removeprefix("pr-state:") and rec.reviewed_head:
        await bookkeep(state, "merged", tree.path, rec.reviewed_head)
    return step
