"""A panel reviewer's findings answer to the same rules as a lone reviewer's: the severity
floor and severity evidence, besides the panel's own id rules."""

from __future__ import annotations

from typing import Any

from app.engine.journal import Accepted, JournalEntry, KeyHistory
from app.engine.review_verdict import reviewer_verdict, verify_verdict


def completion(*findings: dict[str, Any]) -> list[JournalEntry]:
    return [
        JournalEntry(
            kind="completion",
            key="c",
            at="2026-12-02T00:00:00+00:00",
            message="1 critical issue found",
            findings={"findings": list(findings)},
        )
    ]


def finding(ident: str, severity: str, blocking: bool, **extra: Any) -> dict[str, Any]:
    return {"id": ident, "kind": "defect", "severity": severity, "blocking": blocking, **extra}


def test_a_panel_reviewer_under_the_floor_fails_closed_like_a_lone_one() -> None:
    wrong = completion(finding("r1-claude-1", "minor", True))  # minor under the floor `major`
    _, lone, _ = verify_verdict(completion(finding("r1-1", "minor", True)), KeyHistory(), 1)
    _, panel, _ = reviewer_verdict(wrong, "claude", ["claude", "codex"], KeyHistory(), 1)
    assert lone and panel
    assert all("floor" in problem for problem in (*lone, *panel))
    _, low_floor, _ = reviewer_verdict(
        wrong, "claude", ["claude", "codex"], KeyHistory(), 1, floor="minor"
    )
    assert low_floor == []


def test_a_panel_reviewer_that_downgrades_without_evidence_fails_closed() -> None:
    earlier = {"findings": [finding("r1-claude-1", "critical", True)]}
    history = KeyHistory(accepted=[Accepted("verify", 0, converged=False, findings=earlier)])
    downgraded = completion(finding("r1-claude-1", "minor", False))
    _, problems, _ = reviewer_verdict(downgraded, "claude", ["claude"], history, 2)
    assert any("severityEvidence" in problem for problem in problems), problems
    with_evidence = completion(
        finding("r1-claude-1", "minor", False, severityEvidence="only a log line is affected")
    )
    _, problems, _ = reviewer_verdict(with_evidence, "claude", ["claude"], history, 2)
    assert problems == []
