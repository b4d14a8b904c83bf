"""The card cycle: one card advanced by exactly one step, and the commands that drive it.

    handle_request(env, request)   a `/pair <verb>` accepted by the App or the Action
    advance_card(env, card)        lock the card batch, derive, run ONE step, publish, release
    tick(env, batch=None)          the schedule: the oldest-waiting runnable batch, one step
    handle_head_moved / handle_scope_decision   a pull request's events, on its card

The surfaces call these through `app.cycle.card_cycle.CardCycle`, which binds them to one
checkout built from typed settings; `env` is that object (or a test's hand-built `CycleEnv`).

A step of a card (`card-<n>`, see `app.cycle.batch`), in order:

1. read the journal (agents' reports, the engine's outcomes, the cycle's host records);
2. a park (awaiting approval, blocked, needs input) or an abandoned card runs nothing; nor
   does a card whose last review found something only a history rewrite can fix: it waits
   for a human (`awaiting-human`), and only `/pair retry` after the branch's history was
   rewritten (a new head) runs anything: a fresh review of that new head;
3. the card's worktree is made fresh on `pair/card-<n>` at its newest tip
   (`app.cycle.worktree`), and `derive_change` names the transition from its plan;
4. an agent transition runs through the engine's `run_change_step` with a vet
   (`app.cycle.card_vet`): tests before and after, protected files, commit and push — a result
   that breaks or loses a passing test, or touches a sealed or protected file (existing
   tests, runner configs, dependency manifests), is sent back, never recorded as advanced;
5. its publication follows in the same step: the draft PR after the first push, the review
   comment and `pair-review` status on the reviewed head after a verify;
6. a converged card goes through `app.domain.card.cycle_end.decide_cycle_end`: delta re-review,
   scope decision, the synthesis (published and read back), ready-for-merge, the merge gate;
7. the `pr-state:*` label and the tracking comment tell what the step left behind.

The agent never holds a forge credential: every host write happens here, after the agent ran.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from app.cycle import snapshot
from app.cycle import worktree as wt
from app.cycle.batch import card_branch, write_manifest
from app.cycle.card_vet import Vetter
from app.cycle.head_checks import evidence_quotes, read_head_evidence, recorded_evidence
from app.cycle.lesson_files import (
    changed_files,
    distill_lesson,
    lessons_for_proposal,
    open_lesson_pull,
    record_lesson,
)
from app.cycle.records import CycleRecord
from app.cycle.report import (
    act_on_decision,
    after_transition,
    close_abandoned,
    interrupted_reason,
    publish_review,
    publish_status,
)
from app.cycle.schedule import (
    IDLE_MESSAGE,
    PASSIVE,
    card_batches,
    card_key,
    card_of,
    tick_candidates,
)
from app.cycle.state import (
    CardState,
    CardStep,
    CycleEnv,
    dangling_step,
    last_review_findings,
    park_status,
    pending_scope,
    publisher_for,
    pull_text,
    read_card,
    rewrite_escalation,
    risk_ledger,
    status_of,
)
from app.domain.card import cycle_end as ce
from app.domain.card.binding import Binding, for_card
from app.domain.card.budget import budget_of
from app.domain.intake.comment_commands import help_text
from app.domain.intake.pair_request import PairRequest
from app.domain.reports.lesson import Lesson
from app.domain.review.evidence import Evidence, waiting_reason
from app.domain.review.regression import active_risks
from app.domain.review.verdict import history_rewrite_ids
from app.domain.text.mdtext import one_line
from app.engine import jsonl, lock
from app.engine.change_context import ChangeStepContext
from app.engine.change_step import run_change_step
from app.engine.manifest import load_manifest, load_project_config
from app.engine.runstate import RunLocus, read_parks
from app.engine.step import StepResult, journal_event, parked_result
from app.engine.transition import Derivation, Transition, derive_change, read_change_disk
from app.errors import BatchLockedError, CommandNotRun, UserError
from app.settings import resolve_settings
from hosts.cardhash import card_hash
from hosts.errors import HostError, NotFound
from hosts.labels import PrState
from hosts.models import Pull, Target

log = logging.getLogger(__name__)

__all__ = [
    "PASSIVE",
    "CardStep",
    "CycleEnv",
    "advance_card",
    "card_for_pull",
    "handle_head_moved",
    "handle_request",
    "handle_scope_decision",
    "tick",
]


# ---------------------------------------------------------------- commands


async def handle_request(env: CycleEnv, request: PairRequest) -> CardStep:
    """Apply one accepted command to its card; at most one step runs.

    A command that changes the card is recorded with the delivery it came in (the webhook
    delivery id the App forwards), so a redelivered dispatch is recognised and runs nothing.
    """
    request = _on_its_card(env.root, request)
    key = card_key(request.card)
    locus = RunLocus.for_batch(env.root, key)
    env = card_hosts(env, request.card, locus, read_card(locus, key)[2], store=False)
    try:
        return await _apply_request(env, request)
    except UserError as err:
        key = card_key(request.card)
        announced = request.comment is not None and not request.comment.on_pull
        if isinstance(err, CommandNotRun) or not announced or not _has_cycle(env.root, key):
            raise  # nothing announced it over the card's status, or the card has none
        # The App announced this command in the card's tracking comment: put the card's own
        # status back before the refusal is answered (the reply says why nothing ran).
        _forget_tracking(env, RunLocus.for_batch(env.root, key), request)
        await advance_card(env, request.card, run=False)
        raise CommandNotRun(str(err)) from err


def _has_cycle(root: Path, key: str) -> bool:
    return (root / ".pair" / "batches" / key / "batch.yaml").is_file()


async def _existing_card(env: CycleEnv, card: int) -> None:
    """Refuse (a `UserError`, nothing written) a command on a card the host does not have."""
    try:
        await env.hosts.pm.get_card(card)
    except NotFound:
        raise UserError(
            f"card #{card} does not exist on the {env.hosts.pm.name} host (or pairbot's "
            "credential cannot see it); nothing was recorded — check the number"
        ) from None


async def _card_gone(env: CycleEnv, card: int) -> bool:
    """Whether the host no longer has `card` (asked only after a step failed with NotFound)."""
    try:
        await env.hosts.pm.get_card(card)
    except NotFound:
        return True
    return False


async def _apply_request(env: CycleEnv, request: PairRequest) -> CardStep:
    card, key = request.card, card_key(request.card)
    locus = RunLocus.for_batch(env.root, key)
    rec = read_card(locus, key)[2]
    if request.delivery and request.delivery in rec.deliveries:
        _forget_tracking(env, locus, request)
        return await advance_card(env, card, run=False)
    if request.verb in ("implement", "refine"):
        if not _has_cycle(env.root, key):
            # Read before anything is written: a card batch for a card that does not exist
            # would stay behind and fail every later tick.
            await _existing_card(env, card)
        write_manifest(env.root, card, request.args.get("agent"))
        _forget_tracking(env, locus, request)
        data: dict[str, Any] = {"event": "bound", "card": card, "mode": request.verb}
        # A finished cycle (abandoned, or its PR merged) is not continued: the next one gets
        # its own run id, so its review and synthesis are comments of its own.
        fresh = rec.run_id is None or rec.finished
        data["run"] = uuid.uuid4().hex[:12] if fresh else rec.run_id
        data.update({k: v for k, v in request.args.items() if k in _BOUND_KEYS})
        journal_event(locus, env.deps.clock, kind="cycle", key=key, data=data)
        return await _recorded(env, locus, request)
    if not _has_cycle(env.root, key):
        raise UserError(
            f"card #{card} has no pairbot cycle yet; comment `/pair implement` on it first"
        )
    _forget_tracking(env, locus, request)
    if request.verb == "help":
        step = await advance_card(env, card, run=False)
        publisher = publisher_for(env, card, locus)
        await publisher.reply(Target("card", card), "help", help_text(_trigger(env)))
        return step
    if request.verb == "status":
        return await advance_card(env, card, run=False)
    if request.verb == "abandon":
        journal_event(locus, env.deps.clock, kind="cycle", key=key, data={"event": "abandoned"})
        return await _recorded(env, locus, request, run=False)
    parked = read_parks(locus).get(key) is not None
    if not parked and request.verb in ("approve", "answer", "feedback", "retry"):
        escalated = _escalated_ids(locus, key)
        if escalated:
            return await _at_rewrite_escalation(env, locus, request, escalated)
    if request.verb == "retry" and rec.interrupted is not None and not parked:
        # A dead run left its step unfinished and nothing parked it: resume it.
        journal_event(locus, env.deps.clock, kind="cycle", key=key, data={"event": "resumed"})
        return await _recorded(env, locus, request)
    if request.verb == "rerun-proof":
        raise UserError(
            f"card #{card} is a one-card batch without proof-of-work; `rerun-proof` applies to "
            "batches with phases (pairbot batch rerun-proof <batch> <phase>)"
        )
    if request.verb == "approve" and read_parks(locus).get(key) is None:
        if rec.label not in (PrState.AWAITING_HUMAN.value, PrState.ESCALATED.value):
            raise UserError(
                f"card #{card} is not waiting for an approval (status "
                f"{(rec.label or 'unknown').removeprefix('pr-state:')}); nothing to approve"
            )
        data = {"event": "merge-approved", "head": rec.reviewed_head}
        journal_event(locus, env.deps.clock, kind="cycle", key=key, data=data)
        return await _recorded(env, locus, request)
    from app.cycle import humans  # noqa: PLC0415  # only the human verbs need it

    verb = request.verb
    if verb not in ("approve", "answer", "feedback", "retry"):  # pragma: no cover - exhaustive
        raise UserError(f"unknown verb {verb!r}")
    humans.record_human(env.root, key, key, verb, request.text or "", now=env.deps.clock())
    return await _recorded(env, locus, request)


def _escalated_ids(locus: RunLocus, key: str) -> list[str]:
    return history_rewrite_ids(last_review_findings(read_card(locus, key)[1]))


async def _at_rewrite_escalation(
    env: CycleEnv, locus: RunLocus, request: PairRequest, ids: list[str]
) -> CardStep:
    """A command at a history-rewrite escalation: nothing in pairbot waives it. `/pair retry`
    is recorded (the next step reviews the branch's new head, if the history was rewritten);
    every other verb is refused, naming what to do."""
    which = ", ".join(ids)
    if request.verb != "retry":
        raise UserError(
            f"card #{request.card} waits for a human to rewrite the branch's history "
            f"(finding {which}); `/pair {request.verb}` cannot waive that. Rewrite the history, "
            "push it, then comment `/pair retry`: the new head is reviewed afresh"
        )
    data = {"event": "rewrite-retry"}
    journal_event(locus, env.deps.clock, kind="cycle", key=card_key(request.card), data=data)
    return await _recorded(env, locus, request)


def _on_its_card(root: Path, request: PairRequest) -> PairRequest:
    """A command commented on a pull request acts on the card whose cycle opened that pull
    request (docs/cycle.md: a command is a line of an issue or PR comment). The App and the Action
    both name the number the comment was on; only the run-state knows the card behind it."""
    if request.comment is None or not request.comment.on_pull:
        return request
    card = card_for_pull(root, request.card)
    if card is not None:
        return dataclasses.replace(request, card=card)
    if request.verb == "implement":
        return request  # a pull request nobody's cycle opened may become a card of its own
    raise UserError(
        f"PR #{request.card} is not a pairbot card's pull request; comment on the card's issue"
    )


def _forget_tracking(env: CycleEnv, locus: RunLocus, request: PairRequest) -> None:
    """A command commented on the card was announced by the App in the card's tracking comment
    ("queued `/pair …`", app/web/handling.py), so the digest the journal holds no longer
    describes that comment: forget it, or a step whose own body is unchanged (`/pair status`,
    a card that waits) would leave "queued … runs next" standing for good. Where nothing
    announced the command (the Action's own comment path) the republish is a read that finds
    the body unchanged and writes nothing."""
    if request.comment is None or request.comment.on_pull:
        return  # the App writes no tracking comment for a command on a pull request
    data = {"event": "tracking", "digest": None}
    journal_event(locus, env.deps.clock, kind="cycle", key=card_key(request.card), data=data)


async def _recorded(
    env: CycleEnv, locus: RunLocus, request: PairRequest, *, run: bool = True
) -> CardStep:
    """After a command's effect is journaled: note its delivery, save, then take the step."""
    if run:  # the card as it stands at this command is what its steps' agents read
        trigger = request.comment.id if request.comment and not request.comment.on_pull else None
        await snapshot.record(
            env.hosts.pm, env.deps.clock, locus, request.card, trigger_comment=trigger
        )
    if request.delivery:
        data = {"event": "command", "verb": request.verb, "delivery": request.delivery}
        journal_event(locus, env.deps.clock, kind="cycle", key=card_key(request.card), data=data)
    await env.save()  # an acknowledged command is never lost with its runner
    return await advance_card(env, request.card, run=run)


_BOUND_KEYS = ("until", "merge", "prepare", "agent")


def _trigger(env: CycleEnv) -> str:
    try:
        return load_project_config(env.root).trigger
    except UserError:
        return "pair"


# ---------------------------------------------------------------- one step


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
        records, history, rec = read_card(locus, key)
        env = card_hosts(env, card, locus, rec, store=True)
        state = CardState(
            env=env,
            card=card,
            project=project,
            locus=locus,
            records=records,
            history=history,
            rec=rec,
            parks=read_parks(locus),
            pub=publisher_for(env, card, locus),
            scope_comment=scope_comment,
            held=held,
        )
        return await _step(state, held, run=run)
    finally:
        lock.release(held)


async def _step(state: CardState, held: lock.LockProof, *, run: bool) -> CardStep:
    rec, key = state.rec, state.key
    if rec.abandoned:
        message = f"card #{state.card} is abandoned"
        closed = await close_abandoned(state)
        if closed:
            message += f"; {closed}"
        if rec.pushed is not None:  # abandoned after work: what it struggled with is a lesson
            await _bookkeep(state, "abandoned", state.env.root, rec.pushed)
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
            return await _transition(state, held, tree, base, "verify", delta=delta)
        rewritten = tree.start != rec.reviewed_head
        if rec.rewrite_retry and not rewritten:
            # A retry on the unchanged head is spent: the next one, after the rewrite, counts.
            data = {"event": "rewrite-retry", "spent": True}
            journal_event(state.locus, env.deps.clock, kind="cycle", key=state.key, data=data)
        result = _escalation_result(state, escalated, rewritten=rewritten)
        return await publish_status(state, result, PrState.AWAITING_HUMAN, None)
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
        return await publish_status(state, result, PrState.READY, derived)
    if derived.next is not None:
        return await _transition(state, held, tree, base, _guarded_next(state, derived.next))
    if derived.status == "failed-fix":
        result = StepResult(
            "nothing-ready",
            key,
            "",
            message=f"the fix loop spent maxFixRounds ({state.project.cycle.max_fix_rounds})",
        )
        return await publish_status(state, result, PrState.FAILED_FIX, derived)
    return await _cycle_end(state, held, tree, base, derived)


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
        f"awaiting a human: finding {which} can only be fixed by rewriting the branch's Git "
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
        await state.pub.ensure_pull(rec, tree.branch, base, *pull_text(card))
    if rec.reviewed_head is not None and rec.review_published != rec.reviewed_head:
        await publish_review(state)


async def _transition(
    state: CardState,
    held: lock.LockProof,
    tree: wt.Worktree,
    base: str,
    transition: Transition,
    *,
    delta: str | None = None,
) -> CardStep:
    env, rec = state.env, state.rec
    card = await env.hosts.pm.get_card(state.card)
    taken = rec.snapshot
    if taken is None:  # a cycle bound before snapshots were kept: take one now, once
        taken = await snapshot.record(
            env.hosts.pm, env.deps.clock, state.locus, state.card, trigger_comment=None
        )
    notes: list[str] = []
    if rec.sendbacks and rec.last_sendback:
        notes.append(f"Your previous attempt was sent back by the engine: {rec.last_sendback}")
    if delta is not None:
        notes.append(
            f"Delta re-review: {delta}. Re-check the earlier findings and what changed since the "
            f"reviewed head {rec.reviewed_head or '(none)'}; do not start a fresh full pass."
        )
    evidence: Evidence | None = None
    if transition == "verify":
        # Outside evidence on the exact head under review, read before any agent runs.
        evidence = await read_head_evidence(state, tree.start)
        if evidence is not None and evidence.waiting:
            result = StepResult(
                "nothing-ready", state.key, "verify", message=waiting_reason(evidence)
            )
            return await publish_status(state, result, PrState.AWAITING_VERIFY, None)
    elif transition in ("red", "fix"):
        # The failing checks the last review saw are findings the fix addresses too.
        evidence = recorded_evidence(rec, rec.reviewed_head)
    manifest = load_manifest(env.root, state.key)
    settings = resolve_settings(
        env=env.deps.env, manifest=manifest.settings, project=state.project.batch
    )
    prepare_parks = transition == "propose" and state.gate("prepare").fires(card.labels)
    lessons: tuple[Lesson, ...] = ()
    if transition == "propose":
        card_text = f"{taken.get('title', '')}\n{taken.get('body', '')}"
        lessons = await asyncio.to_thread(
            lessons_for_proposal,
            env.root,
            state.project.lessons,
            card_text=card_text,
            tree=tree.path,
            key=state.key,
            base=base,
        )
    vetter = Vetter(
        state=state, tree=tree, transition=transition, card=card, base=base, settings=settings
    )
    await asyncio.to_thread(vetter.measure_before)
    ctx = ChangeStepContext(
        root=tree.path,
        locus=state.locus,
        change=state.key,
        transition=transition,
        settings=settings,
        gate="after-propose" if prepare_parks else "voluntary",
        batch=state.key,
        phase=manifest.phase_of(state.key),
        max_fix_rounds=state.project.cycle.max_fix_rounds,
        card=snapshot.quotes(dict(taken)),
        notes=tuple(notes),
        lessons=lessons,
        history=state.history,
        vet=vetter.vet,
        state_root=env.root,
        card_budget=budget_of(state.project.budget),
        evidence=evidence_quotes(evidence),
        external_blocking=tuple(c.name for c in evidence.blocking)
        if evidence is not None and transition == "verify"
        else (),
        panel=tuple(state.project.review.reviewers()) if transition == "verify" else (),
        between_reviewers=_put_back(tree),
        severity_floor=state.project.review.severity_floor,
        review_notes=_review_notes(state) if transition == "verify" else (),
    )
    try:
        result = await run_change_step(ctx, env.deps, held)
    except Exception as err:
        # The step failed in this process (a host or git error) and the error is reported as
        # it propagates: the next step runs it again. Only a run that dies without a word (a
        # kill, a cancelled job) leaves its step dangling, to be found `interrupted`.
        data = {"event": "step-raised", "transition": transition, "error": type(err).__name__}
        journal_event(state.locus, env.deps.clock, kind="cycle", key=state.key, data=data)
        raise
    return await after_transition(state, result, tree, base, card)


def _put_back(tree: wt.Worktree) -> Callable[[], Awaitable[None]]:
    """Between two reviewers of a panel: the tree as the step began (a reviewer's edits are
    never what the next one reviews)."""

    async def put_back() -> None:
        await asyncio.to_thread(wt.reset, tree.path, tree.start)

    return put_back


def _review_notes(state: CardState) -> tuple[str, ...]:
    """What the verifier needs beyond its command: the run's remediation batches and reviewed
    heads (a regression claim names them), and the card's required findings."""
    rec = state.rec
    lines: list[str] = []
    if rec.remediations:
        batches = "; ".join(f"{b} produced {h}" for b, h in rec.remediations.items())
        lines.append(f"Remediation batches of this run: {batches}.")
    if rec.reviewed_heads:
        heads = ", ".join(dict.fromkeys(rec.reviewed_heads))
        lines.append(f"Heads earlier reviews of this run reviewed: {heads}.")
    return (*lines, *_required_notes(state))


def _required_notes(state: CardState) -> tuple[str, ...]:
    """The card's required findings, for the verifier to re-prove on this head."""
    required = state.project.review.required_for(state.card)
    if not required:
        return ()
    lines = [
        "Required findings (verified evidence this card carries): re-prove each on this head "
        "with its probe and oracle, and report it in `requiredProofs` {id, head, reproduced, "
        'observed}; one still present is an open finding of kind "regression" with '
        "`requiredFinding: <id>`."
    ]
    for item in required:
        fields = (
            f"{item.id}: observed at {item.observed_head}; {item.kind}, {item.severity}; "
            f"summary: {item.summary}; oracle: {item.oracle}; probe: {item.probe}; "
            f"observed: {item.observed}"
        )
        lines.append(f"- {one_line(fields, 1000)}")
    return tuple(lines)


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
        return await _transition(state, held, tree, base, "verify", delta=decision.reason)
    step = await act_on_decision(state, decision, pull, card, derived)
    if step.status == PrState.MERGED.value.removeprefix("pr-state:") and rec.reviewed_head:
        await _bookkeep(state, "merged", tree.path, rec.reviewed_head)
    return step


async def _bookkeep(
    state: CardState, ending: Literal["merged", "abandoned"], repo: Path, head: str
) -> None:
    """The bookkeeper: the finished cycle's lesson, from its journal as it now stands, naming
    the files `head` changed — written beside the run-state, or proposed to the base branch
    through a PR of its own (`lessons.where`). A lesson is an aid, never part of the card's
    outcome: one that cannot be written or proposed is logged for the operator (and a PR
    that cannot be opened journaled as `lesson-pr-failed`), and the step goes on."""
    where = state.project.lessons.where
    if where == "state-branch":
        await asyncio.to_thread(_write_lesson, state, ending, repo, head)
    elif where == "default-branch":
        await _propose_lesson(state, ending, repo, head)


def _write_lesson(
    state: CardState, ending: Literal["merged", "abandoned"], repo: Path, head: str
) -> None:
    try:
        base = state.env.base_branch or wt.current_branch(state.env.root, state.env.deps.env)
        record_lesson(
            state.env.root,
            state.project.lessons,
            jsonl.read_records(state.locus.journal),
            card=state.card,
            key=state.key,
            run=state.rec.run_id,
            ending=ending,
            files=changed_files(repo, base, head),
        )
    except (OSError, wt.WorktreeError) as err:
        log.warning("card #%s: its lesson was not written: %s", state.card, err)


def _lesson_pr_recorded(records: list[Any], key: str, run: str | None) -> bool:
    return any(
        r.get("kind") == "cycle"
        and r.get("key") == key
        and isinstance(r.get("data"), dict)
        and r["data"].get("event") == "lesson-pr"
        and r["data"].get("run") == run
        for r in records
    )


async def _propose_lesson(
    state: CardState, ending: Literal["merged", "abandoned"], repo: Path, head: str
) -> None:
    """The lesson on its own branch and PR to the base branch, once per run: a `lesson-pr`
    entry in the journal says it is open, and a later step of the card skips it."""
    run = state.rec.run_id
    records = await asyncio.to_thread(jsonl.read_records, state.locus.journal)
    if _lesson_pr_recorded(records, state.key, run):
        return
    try:
        base = state.env.base_branch or wt.current_branch(state.env.root, state.env.deps.env)
        # The files first: preparing the lesson's branch fetches the base, which now holds
        # the card's own merged work.
        files = await asyncio.to_thread(changed_files, repo, base, head)
        lesson = distill_lesson(
            state.project.lessons,
            records,
            card=state.card,
            key=state.key,
            run=run,
            ending=ending,
            files=files,
        )
        if lesson is None:
            return
        pull = await open_lesson_pull(
            state.pub.code, state.env.root, lesson, base, state.env.remote
        )
    except (OSError, wt.WorktreeError, HostError) as err:
        log.warning("card #%s: its lesson's PR was not opened: %s", state.card, err)
        state.pub.record("lesson-pr-failed", run=run, reason=one_line(str(err), 300))
        return
    state.pub.record("lesson-pr", run=run, number=pull.number, url=pull.url)


# ---------------------------------------------------------------- the schedule


async def tick(env: CycleEnv, batch: str | None = None) -> CardStep | StepResult:
    """One scheduled step: the named batch, or the oldest-waiting batch that has one to run.

    Candidates are the card batches not waiting for a person (known from their journal alone,
    so an idle tick makes no API call) and every committed batch manifest; the one whose
    journal moved longest ago goes first, so no batch starves another.
    """
    from app.engine.runner import apply_batch  # noqa: PLC0415

    if batch is not None:
        number = card_of(batch)
        if number is not None:
            return await advance_card(env, number)
        return await apply_batch(env.root, batch, env.deps)
    # The candidates come from files alone (`app.cycle.schedule`), so an idle tick makes no
    # API call; the Action answers a scheduled run with none from the same function.
    waiting = tick_candidates(env.root)
    quiet: CardStep | StepResult | None = None
    for _, name in sorted(waiting):
        try:
            step = await tick(env, name)
        except BatchLockedError:
            continue
        except NotFound:
            number = card_of(name)
            if number is None or not await _card_gone(env, number):
                raise  # something else is missing: the tick reports it
            # A card deleted (or moved out of sight) after its cycle began: one line, and
            # the other batches still get their tick.
            log.warning(
                "tick: skipped %s: card #%d no longer exists on the %s host; delete "
                ".pair/batches/%s to forget its cycle",
                name,
                number,
                env.hosts.pm.name,
                name,
            )
            continue
        result = step.result if isinstance(step, CardStep) else step
        if result.state != "nothing-ready":
            return step
        quiet = quiet or step  # what the first one said is the tick's answer if none runs
    return quiet or StepResult("nothing-ready", "", "", message=IDLE_MESSAGE)


# ---------------------------------------------------------------- pull request events


def card_for_pull(root: Path, pull: int) -> int | None:
    """The card whose cycle opened `pull`, from the recorded card batches."""
    for number in card_batches(root):
        key = card_key(number)
        if read_card(RunLocus.for_batch(root, key), key)[2].pr == pull:
            return number
    return None


async def handle_head_moved(env: CycleEnv, pull: int, head: str) -> CardStep | StepResult:
    """A push to the card's PR branch: a reviewed head that moved is re-reviewed (delta).

    pairbot's own push (the head it recorded) is not news: acting on it would make every push
    trigger the next step, a bot triggering itself.
    """
    card = card_for_pull(env.root, pull)
    if card is None:
        return StepResult("nothing-ready", "", "", message=f"PR #{pull} is not a pairbot card's")
    key = card_key(card)
    rec = read_card(RunLocus.for_batch(env.root, key), key)[2]
    if head in (rec.pushed, rec.reviewed_head):
        return StepResult(
            "nothing-ready", key, "", message=f"head {head[:12]} is pairbot's own push"
        )
    return await advance_card(env, card)


async def handle_scope_decision(
    env: CycleEnv, pull: int, comment: str | None = None
) -> CardStep | StepResult:
    """A scope-decision comment on the card's PR (`comment`: its id or URL, else the newest
    one): the cycle end reads it back from the host, validates and applies it."""
    card = card_for_pull(env.root, pull)
    if card is None:
        return StepResult("nothing-ready", "", "", message=f"PR #{pull} is not a pairbot card's")
    return await advance_card(env, card, scope_comment=comment)
