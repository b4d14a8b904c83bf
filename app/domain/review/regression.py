"""The regression-risk ledger: one authority over every transition, the active matrix derived. Pure.

A defect the independent review proves a remediation introduced does more than reopen: it
invalidates that remediation (`fix-<round>`) and the card goes back through the ordinary path
(red → fix → an independent delta review). Nothing in Git moves: the rewind is a state
transition recorded here, the branch keeps its head, and the fix goes forward.

The ledger is append-only (`cycle` entries `{event: "risk", ...}` in the card's journal, one
run's worth); the active matrix is derived from it, never stored and never supplied:

    opened      the review on `head` proved finding F regressed in batch B (admissible claim)
    repaired    a later fix (`repair`) produced `head` while the risk was active
    discharged  an independent review of exactly a repaired `head` executed the closure
                assertions, showed the obligation passing, re-tested the boundaries and closed
                the batch's own findings in that same review
    reopened    a discharged risk observed again (the same finding, never a new discovery)

`check_event` is the one authority: every event, whoever writes it, is accepted, recognised as
a replay (a no-op) or refused with a typed code `risk-refused:<family>`:

    no-predecessor     a repair or discharge with no active risk; reopen of a risk never
                       discharged; open of a risk already open or discharged
    missing-repair     a discharge with no repair that produced the exact reviewed head
    evidence-mutated   the claim's digest differs from the one the risk was opened with
    payload-mismatch   risk id not derived from (subject, finding, batch); the finding's
                       transition or blocking flag disagrees with the event; a closure that
                       does not cover the claim's assertions and boundaries, an obligation
                       not passing, the batch's findings not closed
    wrong-binding      an event for another run, finding, batch or head than the risk's
    stale-writer       an event computed against an older ledger than the persisted one
    wrong-actor        anything but a review opens or discharges, anything but a fix repairs
                       (a scope decision or a human command can neither waive nor discharge)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app.domain.review.verdict import FindingsReport, RegressionClaim

RiskAction = Literal["opened", "repaired", "discharged", "reopened"]
Actor = Literal["review", "fix", "scope-decision", "human"]
ACTIVE_TRANSITIONS = frozenset({"open", "human"})
COUNTERS = (
    "invalidatedRemediations",
    "regressionRepairs",
    "activeRegressionRisks",
    "dischargedRegressionRisks",
)


def risk_id(subject: str, finding: str, batch: str) -> str:
    """The one id of a risk: the card (or PR), the stable finding id, the introducing batch."""
    return f"{subject}:{finding}:{batch}"


def evidence_digest(claim: Mapping[str, Any]) -> str:
    """The digest of a claim as recorded: immutable evidence is compared by it, byte for byte."""
    canonical = json.dumps(claim, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class RiskEvent:
    """One ledger entry as it is journaled (`to_json`) and read back (`from_json`)."""

    action: RiskAction
    risk: str
    subject: str
    finding: str
    batch: str  # the remediation batch that introduced the defect
    run: str
    head: str  # opened/reopened: the reviewed head; repaired: the fix's head; discharged: reviewed
    evidence: str  # digest of the claim
    seq: int  # the ledger length the writer saw
    by: Actor = "review"
    transition: str = "open"  # the finding's transition in the review that wrote it
    blocking: bool = True
    repair: str | None = None  # repaired: the batch that repaired it
    claim: Mapping[str, Any] | None = None  # opened: the tuple itself
    batch_findings: tuple[str, ...] = ()  # opened: the findings the batch was remediating
    closure: Mapping[str, Any] | None = None  # discharged: what the review executed
    batch_closed: bool = False  # discharged: the batch's findings closed in that review

    def to_json(self) -> dict[str, Any]:
        """The journal's `data` (with `event: "risk"`)."""
        data: dict[str, Any] = {
            "event": "risk",
            "action": self.action,
            "risk": self.risk,
            "subject": self.subject,
            "finding": self.finding,
            "batch": self.batch,
            "run": self.run,
            "head": self.head,
            "evidence": self.evidence,
            "seq": self.seq,
            "by": self.by,
            "transition": self.transition,
            "blocking": self.blocking,
        }
        optional = {
            "repair": self.repair,
            "claim": dict(self.claim) if self.claim is not None else None,
            "batchFindings": list(self.batch_findings) or None,
            "closure": dict(self.closure) if self.closure is not None else None,
            "batchClosed": self.batch_closed or None,
        }
        data.update({k: v for k, v in optional.items() if v is not None})
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RiskEvent:
        """Read back a journaled entry (as written by `to_json`)."""
        claim, closure = data.get("claim"), data.get("closure")
        return cls(
            action=data["action"],
            risk=str(data["risk"]),
            subject=str(data["subject"]),
            finding=str(data["finding"]),
            batch=str(data["batch"]),
            run=str(data["run"]),
            head=str(data["head"]),
            evidence=str(data["evidence"]),
            seq=int(data["seq"]),
            by=data.get("by", "review"),
            transition=str(data.get("transition", "open")),
            blocking=bool(data.get("blocking", True)),
            repair=data.get("repair"),
            claim=claim if isinstance(claim, Mapping) else None,
            batch_findings=tuple(str(f) for f in data.get("batchFindings") or ()),
            closure=closure if isinstance(closure, Mapping) else None,
            batch_closed=bool(data.get("batchClosed", False)),
        )


@dataclass(frozen=True)
class RiskState:
    """One risk as the ledger leaves it."""

    risk: str
    finding: str
    batch: str
    run: str
    head: str  # where it was (last) opened
    evidence: str
    claim: Mapping[str, Any]
    batch_findings: tuple[str, ...]
    active: bool
    repairs: tuple[str, ...] = ()  # heads the repairs produced while it was active


@dataclass(frozen=True)
class Refusal:
    """An event the authority refuses; `code` is `risk-refused:<family>`."""

    family: str
    message: str

    @property
    def code(self) -> str:
        """The typed refusal code."""
        return f"risk-refused:{self.family}"

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


Check = Literal["accept", "replay"] | Refusal


def fold_risks(ledger: Sequence[RiskEvent]) -> dict[str, RiskState]:
    """Every risk the ledger knows, in its state after the last event (accepted events only)."""
    risks: dict[str, RiskState] = {}
    for event in ledger:
        known = risks.get(event.risk)
        if event.action in ("opened", "reopened"):
            claim = event.claim if event.claim is not None else (known.claim if known else {})
            findings = event.batch_findings or (known.batch_findings if known else ())
            risks[event.risk] = RiskState(
                risk=event.risk,
                finding=event.finding,
                batch=event.batch,
                run=event.run,
                head=event.head,
                evidence=event.evidence,
                claim=claim,
                batch_findings=findings,
                active=True,
            )
        elif known is not None and event.action == "repaired":
            risks[event.risk] = _with(known, repairs=(*known.repairs, event.head))
        elif known is not None and event.action == "discharged":
            risks[event.risk] = _with(known, active=False, repairs=())
    return risks


def _with(state: RiskState, **changes: Any) -> RiskState:
    return replace(state, **changes)


def active_risks(ledger: Sequence[RiskEvent]) -> dict[str, RiskState]:
    """The active matrix: derived from the ledger, never stored."""
    return {rid: s for rid, s in fold_risks(ledger).items() if s.active}


def counters(ledger: Sequence[RiskEvent]) -> dict[str, int]:
    """The four derived counters; active and historical views kept apart."""
    actions = [e.action for e in ledger]
    return {
        "invalidatedRemediations": actions.count("opened") + actions.count("reopened"),
        "regressionRepairs": actions.count("repaired"),
        "activeRegressionRisks": len(active_risks(ledger)),
        "dischargedRegressionRisks": actions.count("discharged"),
    }


def check_event(ledger: Sequence[RiskEvent], event: RiskEvent) -> Check:
    """The one authority: is `event` a valid next entry of `ledger`, a replay, or refused?"""
    if event in ledger:
        return "replay"  # a restart wrote it already: a no-op, never a second transition
    if event.seq != len(ledger):
        return Refusal(
            "stale-writer",
            f"{event.action} of {event.risk} was computed against {event.seq} ledger "
            f"entries; the ledger holds {len(ledger)}",
        )
    if event.risk != risk_id(event.subject, event.finding, event.batch):
        return Refusal(
            "payload-mismatch",
            f"risk id {event.risk} is not derived from {event.subject}, finding "
            f"{event.finding} and batch {event.batch}",
        )
    if ledger and any(e.run != event.run for e in ledger):
        other = next(e.run for e in ledger if e.run != event.run)
        return Refusal("wrong-binding", f"{event.risk} is bound to run {other}, not {event.run}")
    wanted: Actor = "fix" if event.action == "repaired" else "review"
    if event.by != wanted:
        return Refusal(
            "wrong-actor",
            f"only a {wanted} may write {event.action} for {event.risk}; a {event.by} can "
            "neither waive nor discharge a regression risk",
        )
    known = fold_risks(ledger).get(event.risk)
    return _transition_problem(known, event) or "accept"


def _transition_problem(known: RiskState | None, event: RiskEvent) -> Refusal | None:
    if event.action == "opened":
        if known is not None:
            state = "active" if known.active else "discharged (a reintroduction reopens it)"
            return Refusal("no-predecessor", f"{event.risk} is already {state}")
        return _open_shape(event)
    if known is None:
        return Refusal("no-predecessor", f"{event.action} of {event.risk}, which was never opened")
    if known.evidence != event.evidence:
        return Refusal(
            "evidence-mutated",
            f"{event.risk} was opened with evidence {known.evidence[:12]}; this {event.action} "
            f"carries {event.evidence[:12]}",
        )
    if event.action == "reopened":
        if known.active:
            return Refusal(
                "no-predecessor", f"{event.risk} is active; only a discharged risk reopens"
            )
        return _open_shape(event)
    if not known.active:
        return Refusal("no-predecessor", f"{event.action} of {event.risk}, which is not active")
    if event.action == "repaired":
        if not event.repair or event.head == known.head:
            return Refusal(
                "payload-mismatch",
                f"a repair of {event.risk} names its batch and a head other than the failing "
                f"one ({known.head[:12]})",
            )
        return None
    return _discharge_problem(known, event)


def _open_shape(event: RiskEvent) -> Refusal | None:
    if event.transition not in ACTIVE_TRANSITIONS or not event.blocking:
        return Refusal(
            "payload-mismatch",
            f"finding {event.finding} opens {event.risk} but is {event.transition}"
            f"{'' if event.blocking else ', not blocking'}; an active risk is an open, "
            "blocking finding",
        )
    if event.claim is None or evidence_digest(event.claim) != event.evidence:
        return Refusal(
            "evidence-mutated", f"{event.risk}'s evidence digest does not match its claim"
        )
    return None


def _discharge_problem(known: RiskState, event: RiskEvent) -> Refusal | None:
    if event.head not in known.repairs:
        repairs = ", ".join(h[:12] for h in known.repairs) or "none yet"
        return Refusal(
            "missing-repair",
            f"{event.risk} can be discharged only by a review of a head a repair produced "
            f"(repaired heads: {repairs}); this review is of {event.head[:12]}",
        )
    if event.transition != "resolved":
        return Refusal(
            "payload-mismatch",
            f"finding {event.finding} discharges {event.risk} but is {event.transition}, "
            "not resolved",
        )
    closure = event.closure or {}
    if closure.get("head") != event.head:
        return Refusal(
            "wrong-binding",
            f"the closure of {event.risk} is bound to {str(closure.get('head'))[:12]}, not the "
            f"reviewed head {event.head[:12]}",
        )
    gaps = _closure_gaps(known.claim, closure)
    if not event.batch_closed:
        gaps.append(f"the findings batch {known.batch} remediated are not all closed")
    if gaps:
        return Refusal("payload-mismatch", f"{event.risk} cannot be discharged: {'; '.join(gaps)}")
    return None


def _closure_gaps(claim: Mapping[str, Any], closure: Mapping[str, Any]) -> list[str]:
    gaps = []
    executed = set(closure.get("assertions") or ())
    missing = [a for a in claim.get("closureAssertions") or () if a not in executed]
    if missing:
        gaps.append(f"closure assertions not executed: {', '.join(missing)}")
    if closure.get("obligationPassing") is not True:
        gaps.append(f"obligation {claim.get('obligation')} not shown passing")
    retested = set(closure.get("boundaries") or ())
    untested = [b for b in claim.get("boundaries") or () if b not in retested]
    if untested:
        gaps.append(f"boundaries not re-tested: {', '.join(untested)}")
    return gaps


@dataclass
class LedgerWriter:
    """Events planned against one ledger snapshot, each checked by `check_event` in turn."""

    ledger: list[RiskEvent]
    planned: list[RiskEvent] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def propose(self, event: RiskEvent) -> None:
        """Check `event` against the ledger plus what is planned; keep it or its refusal."""
        current = [*self.ledger, *self.planned]
        verdict = check_event(current, event)
        if isinstance(verdict, Refusal):
            self.refusals.append(verdict)
        elif verdict == "accept":
            self.planned.append(event)

    @property
    def seq(self) -> int:
        """The ledger length the next event is computed against."""
        return len(self.ledger) + len(self.planned)


@dataclass(frozen=True)
class ReviewFacts:
    """What a review is judged against: the card, the run, the head, the remediations so far."""

    subject: str
    run: str
    head: str  # the head the review reviewed
    remediations: Mapping[str, str]  # `fix-<round>` -> the head it produced
    reviewed_heads: frozenset[str]  # heads earlier reviews reviewed
    remediated: Mapping[str, tuple[str, ...]]  # `fix-<round>` -> the findings it remediated


def plan_review(
    ledger: Sequence[RiskEvent], report: FindingsReport, facts: ReviewFacts
) -> tuple[list[RiskEvent], list[str]]:
    """The ledger events a review writes, and every problem (which fails it closed).

    A finding with an admissible claim opens (or reopens) its risk; a finding whose risk is
    active and that the review closes must carry the closure, and discharges it. A claim
    missing part of the tuple is an ordinary finding (nothing is recorded); a complete claim
    whose provenance the run's records contradict is refused.
    """
    writer = LedgerWriter(list(ledger))
    problems: list[str] = []
    risks = fold_risks(ledger)
    by_finding = {s.finding: s for s in risks.values() if s.active}
    for finding in report.findings:
        claim = finding.regression_risk
        if claim is not None and finding.active and not claim.missing():
            problems += _provenance(claim, facts)
            if problems:
                continue
            recorded = claim.model_dump(by_alias=True)
            batch = claim.introduced_by
            rid = risk_id(facts.subject, finding.id, batch)
            known = risks.get(rid)
            if known is not None and known.active:
                continue  # observed again: the same risk, nothing new
            writer.propose(
                RiskEvent(
                    action="reopened" if known is not None else "opened",
                    risk=rid,
                    subject=facts.subject,
                    finding=finding.id,
                    batch=batch,
                    run=facts.run,
                    head=facts.head,
                    evidence=evidence_digest(recorded),
                    seq=writer.seq,
                    transition=finding.transition,
                    blocking=finding.blocking,
                    claim=recorded,
                    batch_findings=tuple(
                        f for f in facts.remediated.get(batch, ()) if f != finding.id
                    ),
                )
            )
            continue
        state = by_finding.get(finding.id)
        if state is None or finding.active:
            continue
        if finding.closure is None:
            problems.append(
                f"finding {finding.id} carries the active regression risk {state.risk}; only "
                "a review that executes its closure assertions closes it (add `closure`: "
                "head, assertions, obligationPassing, boundaries)"
            )
            continue
        closed = {f.id for f in report.findings if not f.active}
        writer.propose(
            RiskEvent(
                action="discharged",
                risk=state.risk,
                subject=facts.subject,
                finding=finding.id,
                batch=state.batch,
                run=facts.run,
                head=facts.head,
                evidence=state.evidence,
                seq=writer.seq,
                transition=finding.transition,
                blocking=finding.blocking,
                closure=finding.closure.model_dump(by_alias=True),
                batch_closed=all(f in closed for f in state.batch_findings),
            )
        )
    problems += [str(r) for r in writer.refusals]
    return writer.planned, problems


def _provenance(claim: RegressionClaim, facts: ReviewFacts) -> list[str]:
    batch = claim.introduced_by
    produced = facts.remediations.get(batch)
    if produced is None:
        known = ", ".join(sorted(facts.remediations)) or "none yet"
        return [
            f"regression-provenance: {batch} is not a remediation batch of this run "
            f"(recorded: {known})"
        ]
    problems = []
    if produced != claim.failing_head:
        owner = [b for b, h in facts.remediations.items() if h == claim.failing_head]
        said = f" (it is {owner[0]}'s)" if owner else ""
        problems.append(
            f"regression-provenance: failing head {claim.failing_head[:12]} was not produced "
            f"by {batch}, which produced {produced[:12]}{said}"
        )
    if claim.passing_head not in facts.reviewed_heads:
        problems.append(
            f"regression-provenance: passing head {claim.passing_head[:12]} is not a head an "
            "earlier review of this run reviewed"
        )
    return problems


def plan_repairs(
    ledger: Sequence[RiskEvent], *, subject: str, run: str, repair: str, head: str
) -> list[RiskEvent]:
    """A fix that produced `head` repairs every active risk (each checked by the authority)."""
    writer = LedgerWriter(list(ledger))
    for state in active_risks(ledger).values():
        writer.propose(
            RiskEvent(
                action="repaired",
                risk=state.risk,
                subject=subject,
                finding=state.finding,
                batch=state.batch,
                run=run,
                head=head,
                evidence=state.evidence,
                seq=writer.seq,
                by="fix",
                repair=repair,
            )
        )
    return writer.planned
