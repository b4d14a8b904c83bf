"""The card cycle: one card advanced by exactly one step, and the commands that drive it.

    handle_request(env, request)   a `/pair <verb>` accepted by the App or the Action
    advance_card(env, card)        lock the card batch, derive, run ONE step, publish, release
                                   (`app.cycle.card_step`; re-exported here)
    tick(env, batch=None)          the schedule: the oldest-waiting runnable batch, one step
    handle_head_moved / handle_scope_decision   a pull request's events, on its card

The surfaces call these through `app.cycle.card_cycle.CardCycle`, which binds them to one
checkout built from typed settings; `env` is that object (or a test's hand-built `CycleEnv`).

This module applies the commands and the schedule; the step itself is in `card_step` (the
derivation and the cycle end), `agent_step` (an agent transition with its vet) and `bookkeeper`
(a finished cycle's lesson). A step of a card (`card-<n>`, see `app.cycle.batch`), in order:

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

The agent never holds a forge credential: every host write happens in the cycle, after the
agent ran.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Any

from app.cycle import humans, snapshot
from app.cycle.batch import write_manifest
from app.cycle.card_step import advance_card, card_hosts
from app.cycle.schedule import (
    IDLE_MESSAGE,
    PASSIVE,
    card_batches,
    card_key,
    card_of,
    tick_candidates,
)
from app.cycle.state import (
    CardStep,
    CycleEnv,
    last_review_findings,
    publisher_for,
    read_card,
)
from app.domain.intake.comment_commands import help_text
from app.domain.intake.pair_request import PairRequest
from app.domain.review.verdict import history_rewrite_ids
from app.engine.manifest import load_project_config
from app.engine.runner import apply_batch
from app.engine.runstate import IncompatibleRunStateError, RunLocus, read_parks
from app.engine.step import StepResult, journal_event
from app.errors import BatchLockedError, CommandNotRun, UserError
from hosts.errors import NotFound
from hosts.labels import PrState
from hosts.models import Target
from hosts.vocabulary import Vocabulary

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
    request = _on_its_card(env.root, request, env.hosts.pm.vocabulary)
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


def _on_its_card(root: Path, request: PairRequest, words: Vocabulary) -> PairRequest:
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
        f"PR #{request.card} is not a pairbot card's pull request; comment on the card's "
        f"{words.card} instead"
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


# ---------------------------------------------------------------- the schedule


async def tick(env: CycleEnv, batch: str | None = None) -> CardStep | StepResult:
    """One scheduled step: the named batch, or the oldest-waiting batch that has one to run.

    Candidates are the card batches not waiting for a person (known from their journal alone,
    so an idle tick makes no API call) and every committed batch manifest; the one whose
    journal moved longest ago goes first, so no batch starves another.
    """
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
        except IncompatibleRunStateError as err:  # a plain batch's: the others still tick
            log.warning("tick: skipped %s: %s", name, err)
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
