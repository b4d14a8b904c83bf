"""A review's verdict, read from the reviewer's completion and held to the findings rules.

    verify_verdict     a lone reviewer: its verdict, and every problem with its findings (ids
                       dropped or invented, blocking under the severity floor, a severity
                       changed without evidence); any problem fails the verification closed
    reviewer_verdict   one reviewer of a panel: the same, with the panel's id rules
    open_findings      the blocking findings the last review left open, for a red, the red
                       verifier or a fix
    red_contract_verdict  the red verifier's contract verdict (`verify-red`), read strictly:
                       none, or one that does not validate, is a problem (never an accept)

Pure: it takes the journal entries and the change's folded history and returns values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app.domain.review.panel import panel_id_problems
from app.domain.review.red_verdict import parse_red_verdict
from app.domain.review.verdict import (
    DEFAULT_FLOOR,
    FindingsReport,
    Severity,
    Verdict,
    finding_id_problems,
    floor_problems,
    severity_problems,
    verdict_from_findings,
    verdict_from_message,
)
from app.engine.journal import JournalEntry, KeyHistory


@dataclass(frozen=True)
class _Earlier:
    """What earlier reviews of the change reported: the last review's active finding ids,
    every id any review reported, and each id's last reported severity."""

    active: list[str]
    known: set[str]
    severities: dict[str, str | None]


def _earlier_findings(history: KeyHistory) -> _Earlier:
    active: list[str] = []
    known: set[str] = set()
    severities: dict[str, str | None] = {}
    for accepted in history.accepted:
        if accepted.transition == "verify" and accepted.findings:
            reported = accepted.findings.get("findings", [])
            known.update(str(f.get("id")) for f in reported)
            severities.update({str(f.get("id")): f.get("severity") for f in reported})
            active = [
                str(f.get("id"))
                for f in reported
                if f.get("transition", "open") in ("open", "human")
            ]
    return _Earlier(active, known, severities)


def _read_review(
    entries: Sequence[JournalEntry],
) -> tuple[Verdict | None, list[str], FindingsReport | None, Mapping[str, Any] | None]:
    """A reviewer's completion: a verdict line's verdict, or its findings file validated (the
    problem when it does not validate), and the findings as reported."""
    completion = next((e for e in reversed(entries) if e.kind == "completion"), None)
    if completion is None:
        return None, [], None, None
    if completion.findings is None:
        return verdict_from_message(completion.message), [], None, None
    try:
        report = FindingsReport.model_validate(completion.findings)
    except ValidationError as err:
        return None, [f"findings do not validate: {err.errors()[0]['msg']}"], None, None
    return verdict_from_findings(report), [], report, completion.findings


def _judged(report: FindingsReport, earlier: _Earlier, floor: Severity) -> list[str]:
    """The rules every review's findings answer to, a panel reviewer's too: blocking against
    the severity floor, and no severity changed without evidence."""
    return [*floor_problems(report, floor), *severity_problems(earlier.severities, report)]


def verify_verdict(
    entries: Sequence[JournalEntry],
    history: KeyHistory,
    review_round: int,
    floor: Severity = DEFAULT_FLOOR,
) -> tuple[Verdict | None, list[str], Mapping[str, Any] | None]:
    """The verify verdict from the completion, and every problem with its findings: ids
    (dropped, invented), blocking against the severity floor, a severity changed without
    evidence. Any problem fails the verification closed."""
    verdict, problems, report, reported = _read_review(entries)
    if report is None:
        return verdict, problems, None
    earlier = _earlier_findings(history)
    problems = [
        *finding_id_problems(earlier.active, report, review_round, earlier.known),
        *_judged(report, earlier, floor),
    ]
    return verdict, problems, reported


def reviewer_verdict(
    entries: Sequence[JournalEntry],
    slug: str,
    slugs: Sequence[str],
    history: KeyHistory,
    review_round: int,
    *,
    floor: Severity = DEFAULT_FLOOR,
) -> tuple[Verdict | None, list[str], FindingsReport | None]:
    """One panel reviewer's verdict, its problems (ids by the panel's rules, the floor,
    severity evidence), and its report (None: a verdict line)."""
    verdict, problems, report, _reported = _read_review(entries)
    if report is None:
        return verdict, problems, None
    earlier = _earlier_findings(history)
    problems = [
        *panel_id_problems(
            slug,
            slugs,
            earlier_active=earlier.active,
            report=report,
            round_no=review_round,
            earlier_known=sorted(earlier.known),
        ),
        *_judged(report, earlier, floor),
    ]
    return verdict, problems, report


def open_findings(history: KeyHistory) -> list[Mapping[str, Any]]:
    """The blocking findings the last accepted review left open (or for a human), for a
    `red` or `fix` to address."""
    for accepted in reversed(history.accepted):
        if accepted.transition == "verify" and accepted.findings:
            return [
                f
                for f in accepted.findings.get("findings", [])
                if f.get("blocking") and f.get("transition", "open") in ("open", "human")
            ]
    return []


def red_contract_verdict(
    entries: Sequence[JournalEntry],
) -> tuple[Verdict | None, list[str], Mapping[str, Any] | None]:
    """The red verifier's verdict on red's contract: converged when it accepts it, its
    blocking count the rows it refuses; the report as validated. A completion without a
    report, or with one that does not validate, is a problem that fails the step: it is never
    read as an acceptance. Whether it judged every row of the contract is the card's vet's."""
    completion = next((e for e in reversed(entries) if e.kind == "completion"), None)
    if completion is None:
        return None, [], None
    read = parse_red_verdict(completion.findings)
    if isinstance(read, str):
        return None, [read], None
    refused = sum(1 for row in read.rows if row.verdict == "refuse")
    verdict = Verdict(converged=read.accepted, blocking=refused, source="findings")
    return verdict, [], read.model_dump(by_alias=True)
