"""One card's state under its lock, and what every part of the card cycle shares about it.

    CycleEnv        the checkout, the hosts, the engine's deps, the checkpoint that saves
                    (`app.cycle.card_cycle.CardCycle` builds one from typed settings)
    CardState       a card as read under its lock: project config, journal, cycle record, parks
    CardStep        what one invocation did to one card (result, status, PR, explanation)
    read_card       the journal once, folded three ways (records, history, cycle record)
    status_of       the `pr-state:*` a derivation stands for
    park_status     the `pr-state:*` a park stands for (a failed step: failed-<stage>)
    pending_scope   scope proposals no applied decision has settled
    risk_ledger     this run's regression-risk ledger (`app.domain.review.regression`)
    rewrite_escalation  the active history-rewrite findings of the last review

`app.cycle.card_step` drives a step, `app.cycle.card_vet` checks an agent's result,
`app.cycle.report` publishes; they share these without importing each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.cycle.publish import Publisher
from app.cycle.records import CycleRecord, fold_cycle
from app.cycle.schedule import card_key
from app.domain.card import cycle_end as ce
from app.domain.card.autonomy import GateCondition, parse_gate_condition
from app.domain.card.binding import Binding, Resolution
from app.domain.reports.explain import Explanation
from app.domain.review.regression import RiskEvent
from app.domain.review.verdict import ScopeChange, history_rewrite_ids
from app.domain.text.invisible import strip_hidden
from app.engine import jsonl
from app.engine.journal import KeyHistory, fold_records
from app.engine.lock import LockProof
from app.engine.manifest import ProjectConfig
from app.engine.runstate import Park, RunLocus
from app.engine.step import EngineDeps, StepResult
from app.engine.transition import Derivation
from app.hosting import BoundHosts
from hosts.base import Host
from hosts.labels import PrState
from hosts.models import Card


@dataclass(frozen=True)
class CycleEnv:
    """What a cycle step needs from the world: the checkout, the hosts, the engine's deps."""

    root: Path  # the project checkout; run-state lives under its .pair/
    hosts: BoundHosts
    deps: EngineDeps
    base_branch: str | None = None
    remote: str = "origin"  # where the card branches are fetched from (a name or a path)
    # Makes what the journal holds so far durable beyond this process (the Action pushes the
    # run-state branch); called after a command is recorded and after a step's push.
    checkpoint: Callable[[], Awaitable[None]] | None = None
    # The project's host binding for this run and how to bind another one: a card that
    # already ran keeps the binding stored with its run-state (`app.domain.card.binding.for_card`).
    # None (a test's hand-built hosts): nothing is stored or compared.
    resolution: Resolution | None = None
    rebind: Callable[[Binding], CycleEnv] | None = None
    say: Callable[[str], None] | None = None  # the run's own lines (the binding), not the agent's
    # The run this is (the Action's workflow run, the App's job), linked from the tracking
    # comment; read from the surface's settings, never from the environment here.
    run_url: str | None = None

    async def save(self) -> None:
        """Run the checkpoint, if there is one."""
        if self.checkpoint is not None:
            await self.checkpoint()


@dataclass(frozen=True)
class CardStep:
    """What one invocation did to one card."""

    result: StepResult
    card: int
    status: str  # the pr-state status, e.g. "awaiting-verify"
    pr: int | None = None
    explanation: Explanation | None = None

    def to_json(self) -> dict[str, Any]:
        """For `--json` and the Action's outputs."""
        data = {**self.result.to_json(), "card": self.card, "status": self.status, "pr": self.pr}
        if self.explanation is not None:
            data["explanation"] = self.explanation.to_json()
        return data


@dataclass
class CardState:
    """One card's state as read under its lock."""

    env: CycleEnv
    card: int
    project: ProjectConfig
    locus: RunLocus
    records: list[dict[str, Any]]
    history: KeyHistory
    rec: CycleRecord
    parks: dict[str, Park]
    pub: Publisher
    scope_comment: str | None = None  # the decision comment an event named, if any
    held: LockProof | None = None  # the card's lock, held for this step

    @property
    def key(self) -> str:
        return card_key(self.card)

    def until(self) -> ce.Until:
        value = self.rec.until or self.project.cycle.until
        return "merged" if value == "merged" else "ready-for-merge"

    def gate(self, name: str) -> GateCondition:
        written = self.rec.merge if name == "merge" else self.rec.prepare
        configured = self.project.cycle.merge if name == "merge" else self.project.cycle.prepare
        return parse_gate_condition(written or configured)


def read_card(locus: RunLocus, key: str) -> tuple[list[dict[str, Any]], KeyHistory, CycleRecord]:
    records = [dict(r) for r in jsonl.read_records(locus.journal)]
    return records, fold_records(records).history(key), fold_cycle(records, key)


def publisher_for(env: CycleEnv, card: int, locus: RunLocus) -> Publisher:
    return Publisher(
        pm=env.hosts.pm,
        code=env.hosts.code,
        locus=locus,
        clock=env.deps.clock,
        card=card,
        key=card_key(card),
        root=env.root,
    )


def status_of(derived: Derivation, rec: CycleRecord) -> PrState:
    if derived.status == "failed-fix":
        return PrState.FAILED_FIX
    if derived.status == "awaiting-verify":
        return PrState.AWAITING_VERIFY
    if derived.status == "done" and rec.label is not None:
        return PrState(rec.label)
    if derived.status == "ready":
        return PrState.READY
    return PrState.IN_PROGRESS


# The stage whose failure a step's `failed` outcome stands for (docs/hosts.md, `pr-state`): an
# agent that crashed without completing, a result refused until the step gave up, a review that
# could not be trusted. A failed red or fix stays `blocked`: `failed-fix` means the fix rounds
# are spent, which a crash is not.
FAILED_AT: Mapping[str, PrState] = {
    "propose": PrState.FAILED_PREPARATION,
    "apply": PrState.FAILED_IMPLEMENT,
    "verify": PrState.FAILED_VERIFY,
}


# Parks the contract path writes (`app.cycle.contract`), by their transition.
HELD_AT: Mapping[str, PrState] = {
    "escalate": PrState.ESCALATE,
    "custody": PrState.FAILED_CUSTODY,
    "contract": PrState.FAILED_CONTRACT,
}


def _failed_red(outcome: Mapping[str, Any]) -> PrState | None:
    """A failed `red` is `failed-seal` when the sealer refused its contract, `failed-contract`
    when the red verifier refused it until the step gave up; any other failure stays blocked."""
    if outcome.get("transition") != "red":
        return None
    message = str(outcome.get("message", ""))
    if message.startswith("failed-seal"):
        return PrState.FAILED_SEAL
    if "contract-incomplete" in message:
        return PrState.FAILED_CONTRACT
    return None


def last_outcome(records: Sequence[Mapping[str, Any]], key: str) -> Mapping[str, Any] | None:
    """The newest `outcome` the engine journaled for `key`."""
    for record in reversed(records):
        if record.get("kind") == "outcome" and record.get("key") == key:
            found: Mapping[str, Any] = record
            return found
    return None


# After these, a step left unfinished is not news: its run reported the error (`step-raised`),
# or a person already said to go on (`/pair implement`, `/pair retry`).
_GOES_ON = frozenset({"step-raised", "bound", "resumed"})


def dangling_step(records: Sequence[Mapping[str, Any]], key: str) -> Mapping[str, Any] | None:
    """The `step-started` ("doing") of `key` that no `outcome` ("done") followed, that no
    `interrupted` record names yet, and that nothing since says to go on from (an error its own
    run reported, a `/pair implement` or `/pair retry`): a dead run's step, seen the first time."""
    started: Mapping[str, Any] | None = None
    for record in records:
        if record.get("key") != key:
            continue
        kind = record.get("kind")
        if kind == "step-started":
            started = record
        elif kind in ("outcome", "retry"):
            started = None  # done, or a person said to run it again
        elif kind == "cycle" and started is not None:
            data = record.get("data")
            event = data.get("event") if isinstance(data, Mapping) else None
            if event in _GOES_ON or (
                event == "interrupted"
                and isinstance(data, Mapping)
                and data.get("session") == started.get("session")
            ):
                started = None  # seen already, failed in a run that said so, or resumed
    return started


def park_status(park: Park, records: Sequence[Mapping[str, Any]], key: str) -> PrState:
    """The label of a parked card: the park's own state, or `failed-<stage>` when the step
    that parked it failed (its outcome is `failed`, not an agent's blocker)."""
    if park.state == "blocked":
        held = HELD_AT.get(park.transition)
        if held is not None:
            return held
        last = last_outcome(records, key)
        if last is not None and last.get("state") == "failed":
            failed = _failed_red(last) or FAILED_AT.get(str(last.get("transition")))
            if failed is not None and last.get("transition") == park.transition:
                return failed
    if park.state == "awaiting-approval" and _escalated_since_step(records, key):
        return PrState.ESCALATED
    return PrState.of(park.state)


def _escalated_since_step(records: Sequence[Mapping[str, Any]], key: str) -> bool:
    """Whether the newest record of `key` past its last step is a `prepare` escalation."""
    for record in reversed(records):
        if record.get("key") != key:
            continue
        if record.get("kind") == "step-started":
            return False
        data = record.get("data")
        if isinstance(data, Mapping) and data.get("event") == "escalated":
            return data.get("stage") == "prepare"
    return False


def pull_text(card: Card, code: Host) -> tuple[str, str]:
    """The title and description of `card`'s pull request on `code`: the description opens
    with the host's own closing reference (`Host.closing_reference`: GitHub's `Closes #7.`,
    Azure DevOps' linked work item), never another host's syntax."""
    title = strip_hidden(card.title).strip() or f"card #{card.number}"
    words = code.vocabulary
    closing = code.closing_reference(card.number)
    body = (
        f"Implemented by pairbot, test-first, on this branch; an independent reviewer checks "
        f"each {words.head_update} of this {words.pull} (the `pair-review` {words.review_status})."
    )
    return f"pair: {title}"[:240], f"{closing}\n\n{body}" if closing else body


def pending_scope(state: CardState) -> list[ScopeChange]:
    """Scope proposals of the last accepted review that no applied decision has settled."""
    decided = {str(d.get("id")) for d in state.rec.dispositions}
    for accepted in reversed(state.history.accepted):
        if accepted.transition == "verify":
            raw = (accepted.findings or {}).get("scopeChanges", [])
            proposals = [ScopeChange.model_validate(p) for p in raw if isinstance(p, dict)]
            return [p for p in proposals if p.id not in decided]
    return []


def risk_ledger(rec: CycleRecord) -> list[RiskEvent]:
    """This run's regression-risk ledger, as journaled."""
    return [RiskEvent.from_json(data) for data in rec.risks]


def last_review_findings(history: KeyHistory) -> list[Mapping[str, Any]]:
    """The findings the last accepted review reported (none without a findings file)."""
    for accepted in reversed(history.accepted):
        if accepted.transition == "verify":
            found = (accepted.findings or {}).get("findings", [])
            return [f for f in found if isinstance(f, Mapping)]
    return []


def rewrite_escalation(state: CardState) -> list[str]:
    """The last review's active findings only a history rewrite can fix: while there is one,
    the card waits for a human, and nothing in pairbot can waive it."""
    return history_rewrite_ids(last_review_findings(state.history))
