"""`fold_journal`: the one pass from journal entries to per-key histories and proof records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from app.engine.journal import Accepted, JournalEntry, JournalIndex, KeyHistory, fold_journal


def outcome(
    key: str,
    transition: str,
    state: str | None = "advanced",
    verdict: Mapping[str, Any] | None = None,
) -> JournalEntry:
    return JournalEntry(
        kind="outcome", key=key, at="t", transition=transition, state=state, verdict=verdict
    )


def human(kind: str, key: str, message: str, transition: str | None = None) -> JournalEntry:
    return JournalEntry(kind=kind, key=key, at="t", transition=transition, message=message)


def report(kind: str, key: str, message: str = "") -> JournalEntry:
    return JournalEntry(kind=kind, key=key, at="t", message=message)


def proof(phase: str, passed: bool, policy: str = "hard-gate") -> JournalEntry:
    record = {
        "phase": phase,
        "passed": passed,
        "gatePassed": passed or policy == "warn",
        "policy": policy,
    }
    return JournalEntry(kind="proof-of-work", key=phase, at="t", proof=record)


def invalidated(phase: str) -> JournalEntry:
    return JournalEntry(kind="proof-of-work-invalidated", key=phase, at="t")


def fold(*entries: JournalEntry) -> JournalIndex:
    return fold_journal(list(entries))


# ---------------------------------------------------------------- accepted vs blocked


@pytest.mark.parametrize(
    ("state", "accepted"),
    [
        pytest.param("advanced", True, id="advanced"),
        pytest.param("awaiting-approval", True, id="awaiting-approval"),
        pytest.param("blocked", False, id="blocked"),
        pytest.param("failed", False, id="failed"),
        pytest.param("nothing-ready", False, id="nothing-ready"),
        pytest.param(None, False, id="no-state"),
    ],
)
def test_only_advanced_and_awaiting_approval_outcomes_are_accepted(
    state: str | None, accepted: bool
) -> None:
    history = fold(outcome("a", "apply", state=state)).history("a")
    assert history.accepted == ([Accepted("apply", 0)] if accepted else [])
    assert history.last_outcome == 0
    assert history.last_outcome_state == state


@pytest.mark.parametrize(
    ("verdict", "converged"),
    [
        pytest.param({"converged": True}, True, id="converged"),
        pytest.param({"converged": False}, False, id="blocks"),
        pytest.param({"converged": 1}, True, id="truthy-coerced"),
        pytest.param({"blocking": 2}, None, id="no-converged-key"),
        pytest.param(None, None, id="no-verdict"),
        pytest.param({}, None, id="empty-verdict"),
    ],
)
def test_verify_verdict_is_carried_on_the_accepted_record(
    verdict: Mapping[str, Any] | None, converged: bool | None
) -> None:
    history = fold(outcome("a", "verify", verdict=verdict)).history("a")
    assert history.accepted == [Accepted("verify", 0, converged=converged)]


def test_findings_are_carried_on_the_accepted_record() -> None:
    findings = {"findings": [{"id": "r1-1", "kind": "defect", "blocking": True}]}
    entry = JournalEntry(
        kind="outcome",
        key="a",
        at="t",
        transition="verify",
        state="advanced",
        verdict={"converged": False},
        findings=findings,
    )
    assert fold(entry).history("a").accepted == [
        Accepted("verify", 0, converged=False, findings=findings)
    ]


def test_an_outcome_without_a_transition_is_not_accepted() -> None:
    history = fold(JournalEntry(kind="outcome", key="a", at="t", state="advanced")).history("a")
    assert history.accepted == []
    assert history.last_outcome_state == "advanced"


def test_accepted_records_keep_order_and_indices_per_key() -> None:
    index = fold(
        outcome("a", "propose"),
        outcome("b", "propose"),
        outcome("a", "apply", state="blocked"),
        outcome("a", "apply"),
        outcome("a", "verify", state="awaiting-approval", verdict={"converged": True}),
    )
    a = index.history("a")
    assert a.accepted == [
        Accepted("propose", 0),
        Accepted("apply", 3),
        Accepted("verify", 4, converged=True),
    ]
    assert a.last_outcome == 4
    assert a.entries == 4
    assert a.accepted_count("apply") == 1
    assert a.accepted_count("fix") == 0
    assert index.history("b").accepted == [Accepted("propose", 1)]
    assert index.size == 5


# ---------------------------------------------------------------- feedback and answers


@pytest.mark.parametrize(
    ("entries", "feedback", "answers"),
    [
        pytest.param([], None, [], id="nothing"),
        pytest.param(
            [human("feedback", "a", "redo it", "apply")], ("apply", "redo it"), [], id="feedback"
        ),
        pytest.param(
            [human("feedback", "a", "first", "apply"), human("feedback", "a", "second", "verify")],
            ("verify", "second"),
            [],
            id="latest-feedback-wins",
        ),
        pytest.param(
            [human("feedback", "a", "no transition")], None, [], id="feedback-needs-a-transition"
        ),
        pytest.param(
            [human("feedback", "a", "redo", "apply"), outcome("a", "apply", "blocked")],
            None,
            [],
            id="feedback-reset-by-a-blocked-outcome",
        ),
        pytest.param(
            [human("feedback", "a", "redo", "apply"), outcome("a", "apply")],
            None,
            [],
            id="feedback-reset-by-an-accepted-outcome",
        ),
        pytest.param(
            [
                human("feedback", "a", "redo", "apply"),
                JournalEntry(kind="step-started", key="a", at="t", transition="apply"),
                report("progress", "a", "halfway"),
            ],
            ("apply", "redo"),
            [],
            id="feedback-survives-non-outcome-entries",
        ),
        pytest.param(
            [human("answer", "a", "postgres"), human("answer", "a", "v16")],
            None,
            ["postgres", "v16"],
            id="answers-accumulate",
        ),
        pytest.param(
            [human("answer", "a", "postgres"), outcome("a", "propose", "blocked")],
            None,
            [],
            id="answers-reset-by-the-next-outcome",
        ),
        pytest.param(
            [outcome("a", "propose", "blocked"), human("answer", "a", "v16")],
            None,
            ["v16"],
            id="answers-after-the-outcome-kept",
        ),
        pytest.param(
            [human("answer", "b", "other key"), human("feedback", "b", "x", "apply")],
            None,
            [],
            id="other-keys-do-not-leak",
        ),
    ],
)
def test_feedback_and_answers_since_the_last_outcome(
    entries: list[JournalEntry], feedback: tuple[str, str] | None, answers: list[str]
) -> None:
    history = fold_journal(entries).history("a")
    assert history.feedback == feedback
    assert history.answers == answers


# ---------------------------------------------------------------- proof records


@pytest.mark.parametrize(
    ("entries", "recorded"),
    [
        pytest.param([], {}, id="none"),
        pytest.param([proof("p1", True)], {"p1": True}, id="passed"),
        pytest.param([proof("p1", False)], {"p1": False}, id="failed"),
        pytest.param([proof("p1", False, "warn")], {"p1": True}, id="warn-failure-opens"),
        pytest.param([proof("p1", False), invalidated("p1")], {}, id="invalidated"),
        pytest.param(
            [proof("p1", False), invalidated("p1"), proof("p1", True)],
            {"p1": True},
            id="rerun-after-invalidation",
        ),
        pytest.param([proof("p1", True), proof("p1", False)], {"p1": False}, id="latest-wins"),
        pytest.param(
            [proof("p1", True), proof("p2", False), invalidated("p2")],
            {"p1": True},
            id="invalidation-removes-only-its-phase",
        ),
        pytest.param([invalidated("p1")], {}, id="invalidation-without-record"),
        pytest.param(
            [JournalEntry(kind="proof-of-work", key="p1", at="t")], {}, id="entry-without-record"
        ),
    ],
)
def test_proof_records(entries: list[JournalEntry], recorded: dict[str, bool]) -> None:
    index = fold_journal(entries)
    assert {phase: record["gatePassed"] for phase, record in index.proofs.items()} == recorded


def test_proof_entries_are_not_key_history() -> None:
    index = fold(proof("p1", True), invalidated("p1"))
    assert "p1" not in index.keys
    assert index.history("p1") == KeyHistory()
    assert index.size == 2


# ---------------------------------------------------------------- accepted keys


@pytest.mark.parametrize(
    ("entries", "transition", "keys"),
    [
        pytest.param([], "pr", frozenset(), id="empty"),
        pytest.param([outcome("pr:b", "pr")], "pr", frozenset({"pr:b"}), id="opened"),
        pytest.param([outcome("pr:b", "pr", "blocked")], "pr", frozenset(), id="blocked-open"),
        pytest.param(
            [outcome("pr:b:a", "pr", "blocked"), outcome("pr:b:a", "pr")],
            "pr",
            frozenset({"pr:b:a"}),
            id="retried-open",
        ),
        pytest.param(
            [outcome("pr:b:a", "pr"), outcome("pr:b:c", "pr"), outcome("x", "propose")],
            "pr",
            frozenset({"pr:b:a", "pr:b:c"}),
            id="several-groups",
        ),
        pytest.param(
            [outcome("x", "propose"), outcome("y", "propose", "awaiting-approval")],
            "propose",
            frozenset({"x", "y"}),
            id="any-transition",
        ),
    ],
)
def test_accepted_keys(entries: list[JournalEntry], transition: str, keys: frozenset[str]) -> None:
    assert fold_journal(entries).accepted_keys(transition) == keys


def test_unknown_key_has_an_empty_history() -> None:
    assert fold().history("nobody") == KeyHistory()


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(report("progress", "a"), id="minimal"),
        pytest.param(
            JournalEntry(
                kind="outcome",
                key="a",
                at="2026-01-01T00:00:00Z",
                transition="verify",
                message="Ready for archive",
                session="s1",
                state="advanced",
                verdict={"converged": True},
                findings={"findings": []},
                proof=None,
                usage={"tokens": 3},
            ),
            id="every-field",
        ),
        pytest.param(proof("p1", False), id="proof"),
    ],
)
def test_record_round_trip(entry: JournalEntry) -> None:
    record = entry.to_record()
    assert all(value is not None for value in record.values())
    assert JournalEntry.from_record(record) == entry


def test_from_record_ignores_unknown_keys_and_bad_shapes() -> None:
    entry = JournalEntry.from_record(
        {"kind": "outcome", "key": "a", "at": "t", "future": 1, "verdict": "not a map"}
    )
    assert entry == JournalEntry(kind="outcome", key="a", at="t")
