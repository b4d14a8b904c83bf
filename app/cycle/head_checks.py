"""The card cycle's outside evidence: the checks on a head, read before a verify and recorded.

    read_head_evidence(state, head)   `Host.head_checks` on the card's PR at exactly `head`,
                                      required ones marked (`review.requiredChecks` beside the
                                      host's own), journaled as an `evidence` entry when it
                                      differs from the last one; None before the PR exists
    recorded_evidence(rec, head)      the last recorded evidence, if it is about `head`
    evidence_quotes(evidence)         the failing checks as quoted pieces for the agent: each
                                      check's name and text come from whoever reported it

What the checks mean (block, wait, mention) is `app.domain.review.evidence`'s decision.
"""

from __future__ import annotations

from app.cycle.records import CycleRecord
from app.cycle.state import CardState, read_card
from app.domain.review import evidence as ev
from app.engine.instructions import Quoted
from app.engine.step import journal_event


async def read_head_evidence(state: CardState, head: str) -> ev.Evidence | None:
    """The checks on `head` of the card's PR, recorded; None while the card has no PR."""
    rec = state.rec
    if rec.pr is None:
        return None
    checks = await state.env.hosts.code.head_checks(rec.pr, head)
    evidence = ev.of_head(head, checks, state.project.review.required_checks)
    data = {"event": "evidence", **ev.to_record(evidence)}
    if rec.evidence is None or dict(rec.evidence) != data:
        journal_event(state.locus, state.env.deps.clock, kind="cycle", key=state.key, data=data)
        state.records, state.history, state.rec = read_card(state.locus, state.key)
    return evidence


def recorded_evidence(rec: CycleRecord, head: str | None) -> ev.Evidence | None:
    """The last recorded evidence when it was read on `head`, else None."""
    if rec.evidence is None or head is None:
        return None
    evidence = ev.from_record(rec.evidence)
    return evidence if evidence.head == head else None


def evidence_quotes(evidence: ev.Evidence | None) -> tuple[Quoted, ...]:
    """Each failing check, attributed to its reporter, as data for the agent."""
    if evidence is None:
        return ()
    return tuple(
        Quoted(
            what=(
                f"{'required ' if check.required else ''}check {check.name!r} ({check.source}: "
                f"{check.state}) on {evidence.head[:12]}"
                + (f", details at {check.url}" if check.url else "")
            ),
            author=None,
            role="reported by CI or another service, not by a maintainer",
            text=check.summary or "(the check gave no text)",
        )
        for check in evidence.failing
    )
