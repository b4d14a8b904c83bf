"""A card's contract path in the cycle: findings routed by kind, and the custody of its seals.

    route_of(state, tree)          where the last (blocking) review sends the card
                                   (`app.domain.review.routing`, from the card's journal)
    record_route(state, routing)   the `routed` entry, once per review and route
    custody_breach(state, head)    the custody check before a fix or a verify: what is wrong
                                   with the sealed tests at `head` (empty: custody holds)
    hold(state, transition, why)   park the card for a person (escalate, custody, needs-input)

`app.cycle.card_step` routes and `app.cycle.agent_step` checks custody; what a seal is and how a
contract is judged is `app.domain.review.seal`, its sealing `app.cycle.sealing`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from app.cycle import worktree as wt
from app.cycle.sealing import blob_at
from app.cycle.state import CardState, last_review_findings
from app.domain.review.red_verdict import CONTRACT_PARK
from app.domain.review.routing import Routing, RoutingFacts, plan_acs, route_findings
from app.domain.review.seal import ac_groups, current_seals, custody_problems
from app.engine.runstate import Park, ParkState, read_parks, write_parks
from app.engine.step import iso_now, journal_event

# The park transitions the contract path writes, and the status each stands for
# (`app.cycle.state.park_status`).
ESCALATE: Final = "escalate"
CUSTODY: Final = "custody"
CONTRACT: Final = CONTRACT_PARK  # the red verifier refused red's contract three times in a row
QUESTION: Final = "verify"  # a question answered re-runs the review


def _plan_text(tree: Path, key: str) -> str:
    plan = tree / ".pair" / "changes" / key / "plan.md"
    return plan.read_text(encoding="utf-8", errors="replace") if plan.is_file() else ""


def current_seal_name(state: CardState) -> str | None:
    """The newest seal of the card (the one a green-fix works on), None before any."""
    return state.rec.seals[-1].name if state.rec.seals else None


def _green_fixes(state: CardState, review_round: int) -> int:
    """Green-fix rounds already taken on the current seal, by earlier reviews (a green-fix of
    this same review sent back and run again is still the one)."""
    seal = current_seal_name(state)
    rounds = {
        r.get("round")
        for r in state.rec.routes
        if r.get("route") == "green-fix" and r.get("seal") == seal
    }
    rounds.discard(review_round)
    return len(rounds)


def _human_word(state: CardState) -> bool:
    """Whether a person answered or retried after the last accepted review."""
    last = -1
    mine = [r for r in state.records if r.get("key") == state.key]
    for index, record in enumerate(mine):
        if (
            record.get("kind") == "outcome"
            and record.get("transition") == "verify"
            and record.get("state") in ("advanced", "awaiting-approval")
        ):
            last = index
    return any(r.get("kind") in ("answer", "retry") for r in mine[last + 1 :])


def route_of(state: CardState, tree: Path) -> Routing:
    """Where the last review sends the card (see `app.domain.review.routing`)."""
    review_round = state.history.accepted_count("verify")
    facts = RoutingFacts(
        findings=last_review_findings(state.history),
        plan_acs=plan_acs(_plan_text(tree, state.key)),
        groups=ac_groups(state.rec.seals),
        green_fixes=_green_fixes(state, review_round),
        human_word=_human_word(state),
    )
    return route_findings(facts)


def record_route(state: CardState, routing: Routing) -> None:
    """Journal where the review sent the card, once per review round and route."""
    review_round = state.history.accepted_count("verify")
    if any(
        r.get("round") == review_round and r.get("route") == routing.route for r in state.rec.routes
    ):
        return
    data = {
        "event": "routed",
        "route": routing.route,
        "findings": list(routing.findings),
        "round": review_round,
        "seal": current_seal_name(state),
    }
    journal_event(state.locus, state.env.deps.clock, kind="cycle", key=state.key, data=data)
    state.rec.routes = (*state.rec.routes, data)


def custody_breach(state: CardState, path: Path, head: str) -> list[str]:
    """The custody check at `head`: every current seal's commit an ancestor of it, every sealed
    test file as sealed. Read-only: nothing is reset, whatever it finds."""
    seals = list(current_seals(state.rec.seals).values())
    if not seals:
        return []
    ancestors = {
        s.commit: wt.git(path, "merge-base", s.commit, head, check=False) == s.commit for s in seals
    }
    blobs: dict[str, str | None] = {}
    for seal in seals:
        for sealed in seal.blobs:
            blobs[sealed] = blob_at(path, head, sealed)
    return custody_problems(seals, head, ancestors=ancestors, blobs_at_head=blobs)


def hold(state: CardState, park_state: ParkState, transition: str, reason: str) -> None:
    """Park the card for a person; `/pair retry` (or `/pair answer`) clears it."""
    parks = read_parks(state.locus)
    parks[state.key] = Park(
        state=park_state, transition=transition, reason=reason, at=iso_now(state.env.deps.clock)
    )
    write_parks(state.locus, parks, state.held)
    state.parks = parks
