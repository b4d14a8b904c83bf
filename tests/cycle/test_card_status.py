"""The pure parts of the status vocabulary: what a journal and its parks say about a card.

`card_status` (every view's status), `park_status` (a failed step's `failed-<stage>`),
`dangling_step` (a dead run's unfinished step), the fold of a new cycle, and the cycle end's
next step."""

from __future__ import annotations

from typing import Any

import pytest

from app.cycle.card_status import CardStatus, card_status, read_card_status
from app.cycle.records import fold_cycle
from app.cycle.state import dangling_step, park_status
from app.domain.card.cycle_end import next_end_step
from app.domain.reports.explain import CardFacts, explain
from app.engine.runstate import Park
from hosts.labels import PrState

KEY = "card-7"
SHA = "a" * 40


def cycle(event: str, **data: Any) -> dict[str, Any]:
    return {"kind": "cycle", "key": KEY, "at": "t", "data": {"event": event, **data}}


def started(session: str, transition: str = "apply") -> dict[str, Any]:
    record = {"kind": "step-started", "key": KEY, "at": "t", "session": session}
    return {**record, "transition": transition}


def outcome(state: str, transition: str = "apply", session: str = "s1") -> dict[str, Any]:
    return {
        "kind": "outcome",
        "key": KEY,
        "at": "t",
        "session": session,
        "transition": transition,
        "state": state,
    }


def blocked(transition: str = "apply", reason: str = "it broke") -> Park:
    return Park(state="blocked", transition=transition, reason=reason, at="t")


# ---------------------------------------------------------------- park_status


@pytest.mark.parametrize(
    ("transition", "state", "expected"),
    [
        ("propose", "failed", PrState.FAILED_PREPARATION),
        ("apply", "failed", PrState.FAILED_IMPLEMENT),
        ("verify", "failed", PrState.FAILED_VERIFY),
        ("red", "failed", PrState.BLOCKED),  # a crash is not a spent fix loop
        ("apply", "blocked", PrState.BLOCKED),  # the agent's own blocker
    ],
)
def test_a_failed_step_parks_under_its_stage(
    transition: str, state: str, expected: PrState
) -> None:
    records = [started("s1", transition), outcome(state, transition)]
    assert park_status(blocked(transition), records, KEY) is expected


def test_a_park_for_another_step_than_the_failed_outcome_is_blocked() -> None:
    records = [started("s1", "apply"), outcome("failed", "apply")]
    assert park_status(blocked("merge"), records, KEY) is PrState.BLOCKED
    assert park_status(blocked("apply"), [], KEY) is PrState.BLOCKED
    needs = Park(state="needs-input", transition="apply", reason="?", at="t")
    assert park_status(needs, records, KEY) is PrState.NEEDS_INPUT


# ---------------------------------------------------------------- dangling_step


def test_a_step_without_an_outcome_dangles_until_it_is_recorded_as_interrupted() -> None:
    assert dangling_step([], KEY) is None
    assert dangling_step([started("s1"), outcome("advanced")], KEY) is None
    records = [started("s1"), outcome("advanced"), started("s2", "verify")]
    assert dangling_step(records, KEY) == records[-1]
    other = {**started("s9"), "key": "card-8"}
    assert dangling_step([*records, other], KEY) == records[-1]
    seen = [*records, cycle("interrupted", transition="verify", session="s2")]
    assert dangling_step(seen, KEY) is None
    another = [*records, cycle("interrupted", transition="verify", session="s1")]
    assert dangling_step(another, KEY) == records[-1]
    raised = [*records, cycle("step-raised", transition="verify", error="HostError")]
    assert dangling_step(raised, KEY) is None
    # A person already said to go on: `/pair implement`, `/pair retry`.
    assert dangling_step([*records, cycle("bound", card=7, run="r1")], KEY) is None
    assert dangling_step([*records, {"kind": "retry", "key": KEY, "at": "t"}], KEY) is None


def test_the_interruption_is_cleared_by_a_step_a_retry_or_an_implement() -> None:
    dead = [started("s1"), cycle("interrupted", transition="apply", session="s1")]
    assert fold_cycle(dead, KEY).interrupted == {
        "event": "interrupted",
        "transition": "apply",
        "session": "s1",
    }
    assert fold_cycle([*dead, cycle("resumed")], KEY).interrupted is None
    retry = {"kind": "retry", "key": KEY, "at": "t"}
    assert fold_cycle([*dead, retry], KEY).interrupted is None
    assert fold_cycle([*dead, started("s2")], KEY).interrupted is None
    assert fold_cycle([*dead, cycle("bound", card=7, run="r1")], KEY).interrupted is None


# ---------------------------------------------------------------- a new cycle


def test_a_bound_with_another_run_id_starts_a_new_cycle() -> None:
    first = [
        cycle("bound", card=7, run="r1", until="merged"),
        cycle("hosts", binding={"version": 1, "pm": "local", "code": "local"}),
        cycle("pr", number=3, url="u"),
        cycle("reviewed", head=SHA, converged=True, blocking=0),
        cycle("review-published", head=SHA),
        cycle("synthesis", head=SHA, confirmed=True),
        cycle("scope-applied", ref="c1", dispositions=[{"id": "sc-1"}], scopeEpoch=1),
        cycle("command", verb="implement", delivery="d1"),
        cycle("abandoned"),
        cycle("pr-closed", number=3),
    ]
    rec = fold_cycle(first, KEY)
    assert (rec.run_id, rec.cycles, rec.pr, rec.pr_closed, rec.finished) == ("r1", 1, 3, True, True)
    same = fold_cycle([*first, cycle("bound", card=7, run="r1")], KEY)
    assert (same.run_id, same.pr, same.cycles) == ("r1", 3, 1)  # the same cycle goes on
    rec = fold_cycle([*first, cycle("bound", card=7, run="r2")], KEY)
    assert (rec.run_id, rec.cycles, rec.pr, rec.pr_closed, rec.abandoned) == (
        "r2",
        2,
        None,
        False,
        False,
    )
    assert (rec.reviewed_head, rec.review_published, rec.synthesis_head, rec.until) == (
        None,
        None,
        None,
        None,
    )
    # What outlives a cycle: the card, its binding, its scope decisions, applied commands.
    assert rec.card == 7 and rec.binding is not None
    assert rec.applied_refs == ("c1",) and rec.scope_epoch == 1
    assert rec.deliveries == {"d1"}
    merged = fold_cycle([cycle("bound", card=7, run="r1"), cycle("merged", sha=SHA)], KEY)
    assert merged.finished


# ---------------------------------------------------------------- the next step


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"reviewed_head": None}, "verify"),
        ({}, "publish"),
        ({"synthesis_confirmed": True}, None),
        ({"synthesis_confirmed": True, "until": "merged"}, "merge"),
        ({"pending_scope": 1}, None),
        ({"merged": True}, None),
    ],
)
def test_the_cycle_end_names_its_next_step(facts: dict[str, Any], expected: str | None) -> None:
    base: dict[str, Any] = {
        "pending_scope": 0,
        "reviewed_head": SHA,
        "synthesis_confirmed": False,
        "until": "ready-for-merge",
        "merged": False,
    }
    assert next_end_step(**{**base, **facts}) == expected


# ---------------------------------------------------------------- card_status


def shown(status: str, nxt: str | None, why: str) -> dict[str, Any]:
    return cycle("tracking", digest="d", status=status, next=nxt, why=why)


def test_every_view_reads_what_the_tracking_comment_last_said() -> None:
    records = [cycle("bound", card=7, run="r1"), shown("in-progress", "publish", "go")]
    assert card_status(records, KEY, {}) == CardStatus(7, "in-progress", "publish", "go")
    # A forgotten digest (another writer) keeps what was shown.
    forgotten = [*records, cycle("tracking", digest=None)]
    assert card_status(forgotten, KEY, {}) == CardStatus(7, "in-progress", "publish", "go")


def test_what_the_cycle_recorded_since_the_comment_counts() -> None:
    base = [cycle("bound", card=7, run="r1"), shown("in-progress", "apply", "go")]
    failed = [*base, started("s1"), outcome("failed")]
    assert card_status(failed, KEY, {KEY: blocked()}) == CardStatus(
        7, "failed-implement", None, "it broke"
    )
    seen = [*failed, shown("failed-implement", None, "implementing failed")]
    assert card_status(seen, KEY, {KEY: blocked()}).why == "implementing failed"
    dead = [*base, started("s1"), cycle("interrupted", transition="apply", session="s1")]
    assert card_status(dead, KEY, {}).status == "interrupted"
    assert "`apply`" in card_status(dead, KEY, {}).why
    told = [*dead, shown("interrupted", None, "the run stopped")]
    assert card_status(told, KEY, {}) == CardStatus(7, "interrupted", None, "the run stopped")
    gone = [*base, cycle("abandoned")]
    assert card_status(gone, KEY, {KEY: blocked()}) == CardStatus(
        7, "abandoned", None, "the cycle was abandoned"
    )
    said = [*gone, shown("abandoned", None, "PR #3 was closed")]
    assert card_status(said, KEY, {}).why == "PR #3 was closed"


def test_an_older_journal_falls_back_to_its_label_and_a_new_card_is_ready() -> None:
    labelled = [cycle("bound", card=7, run="r1"), cycle("label", state="pr-state:merged")]
    assert card_status(labelled, KEY, {}) == CardStatus(7, "merged", None, "")
    assert card_status([], KEY, {}).status == "ready"
    with pytest.raises(ValueError, match="not a card batch"):
        card_status([], "plain", {})


def test_the_card_status_renders_for_people_and_as_the_batch_status_shape() -> None:
    status = CardStatus(7, "in-progress", "publish", "converged")
    assert status.to_text() == (
        "card #7: in-progress (pr-state:in-progress)\n"
        "next: publish: publish the synthesis comment and read it back\n"
        "why: converged"
    )
    data = status.to_json()
    assert data["next"] == {
        "kind": "change",
        "phase": "card",
        "change": KEY,
        "transition": "publish",
    }
    assert (data["done"], data["why"], data["card"]["label"]) == (
        False,
        "converged",
        "pr-state:in-progress",
    )
    quiet = CardStatus(7, "ready-for-merge", None, "")
    assert quiet.done and quiet.next_text == "none" and quiet.to_json()["next"] is None
    assert quiet.to_text() == "card #7: ready-for-merge (pr-state:ready-for-merge)\nnext: none"
    assert "reason" not in quiet.to_json()["changes"][KEY]


def test_a_plain_batch_has_no_card_status(tmp_path: Any) -> None:
    assert read_card_status(tmp_path, "demo") is None
    assert read_card_status(tmp_path, KEY) == CardStatus(7, "ready", None, "nothing has run yet")


# ---------------------------------------------------------------- explain


@pytest.mark.parametrize("status", ["failed-preparation", "failed-implement", "failed-verify"])
def test_a_failed_step_says_what_failed_and_offers_retry(status: str) -> None:
    told = explain(CardFacts(card=7, status=status, park_reason="Apply agent failed (exit 3)"))
    assert told.why.endswith(": Apply agent failed (exit 3)")
    assert told.what_you_can_do == ("/pair retry", "/pair feedback <text>", "/pair abandon")
    assert explain(CardFacts(card=7, status=status)).why


def test_an_interrupted_run_offers_retry_and_a_closed_pr_reopen() -> None:
    dead = explain(CardFacts(card=7, status="interrupted", park_reason="the run stopped"))
    assert dead.what_you_can_do == ("/pair retry", "/pair abandon")
    closed = explain(CardFacts(card=7, status="interrupted", pr=3))
    assert closed.what_you_can_do[0] == "reopen PR #3, then /pair implement"
    gone = explain(CardFacts(card=7, status="abandoned", pr=3, pr_closed=True))
    assert "PR #3 was closed" in gone.why
