"""A verifier's verdict: typed findings, scope proposals, and whether the review converged.

The verifier reports either a findings file (docs/cycle.md) or only a verdict
line. With a findings file, convergence is computed from the findings: zero active blocking
findings. Without one, the verdict text decides: "Ready for archive"
converges, "N critical issue(s) found" converges only when N is 0. Fail closed: a positive
count anywhere in the message blocks even beside "Ready for archive", and "not ready for
archive" is no verdict at all (the verify is then blocked for a readable verdict).

Findings keep the id the verifier that first saw them assigned (`r<round>-<n>`, optionally
`r<round>-<reviewer>-<n>`); later reviews must carry every earlier open id forward with a
transition. A dropped, duplicated or invented id fails the verification closed. Scope
proposals (`sc-<n>`) are never defects and never blocking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from app.settings import StrictModel

VERIFY_VERDICT_PATTERN = re.compile(
    r"(?<!not\s)(?<!not\syet\s)ready for archive"
    r"|\b(?P<n>\d+)\s+critical\s+issues?(?:\(s\))?\s+found",
    re.IGNORECASE,
)
FINDING_ID = re.compile(r"^r(?P<round>[1-9]\d*)-(?:[a-z0-9]+-)?(?P<n>[1-9]\d*)$")
SCOPE_ID = re.compile(r"^sc-[1-9]\d*$")

FindingKind = Literal["defect", "regression", "approved-test-failing", "contract-gap", "question"]
FindingTransition = Literal["open", "resolved", "superseded", "human"]
Severity = Literal["critical", "major", "minor", "info"]
ACTIVE_TRANSITIONS: frozenset[str] = frozenset({"open", "human"})


class Finding(StrictModel):
    """One review finding, as the verifier reports it."""

    id: str
    kind: FindingKind
    severity: Severity | None = None
    blocking: Annotated[bool, Field(strict=True)]  # "yes" is a typo, not true
    transition: FindingTransition = "open"
    ac: str | None = None
    summary: str | None = None
    reproducer: str | None = None

    @field_validator("id")
    @classmethod
    def _finding_id(cls, value: str) -> str:
        if not FINDING_ID.match(value):
            raise ValueError(f"finding id {value!r} must look like r<round>-<n>, e.g. r1-1")
        return value

    @property
    def active(self) -> bool:
        """Still needs work or a human: open, or handed to a human."""
        return self.transition in ACTIVE_TRANSITIONS


class ScopeChange(StrictModel):
    """Something new the card never asked for: a proposal for the maintainer, never a defect."""

    id: str
    type: str = Field(min_length=1)
    evidence: str = ""
    affected_ac: str | None = None

    @field_validator("id")
    @classmethod
    def _scope_id(cls, value: str) -> str:
        if not SCOPE_ID.match(value):
            raise ValueError(f"scope proposal id {value!r} must look like sc-<n>, e.g. sc-1")
        return value


class FindingsReport(StrictModel):
    """The verifier's `--findings FILE`: per-AC proving tests, findings, scope proposals."""

    ac_tests: dict[str, str] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    scope_changes: list[ScopeChange] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> FindingsReport:
        for label, ids in (
            ("finding", [f.id for f in self.findings]),
            ("scope proposal", [s.id for s in self.scope_changes]),
        ):
            seen: set[str] = set()
            for item in ids:
                if item in seen:
                    raise ValueError(f"duplicate {label} id {item!r}: each id appears once")
                seen.add(item)
        return self


@dataclass(frozen=True)
class Verdict:
    """Whether a review converged, and why."""

    converged: bool
    blocking: int
    source: Literal["findings", "message"]
    pending_scope: int = 0


def has_verdict(message: str) -> bool:
    """The completion message carries a verification verdict (presence, not polarity)."""
    return VERIFY_VERDICT_PATTERN.search(message) is not None


def verdict_from_message(message: str) -> Verdict | None:
    """Read the verdict from the verifier's completion text; None when it carries none."""
    matches = list(VERIFY_VERDICT_PATTERN.finditer(message))
    if not matches:
        return None
    # Fail closed: the largest critical count anywhere wins over a "Ready for archive".
    blocking = max(int(m.group("n")) if m.group("n") is not None else 0 for m in matches)
    return Verdict(converged=blocking == 0, blocking=blocking, source="message")


def verdict_from_findings(report: FindingsReport) -> Verdict:
    """Converged means no active blocking finding; scope proposals never block."""
    blocking = sum(1 for f in report.findings if f.blocking and f.active)
    return Verdict(
        converged=blocking == 0,
        blocking=blocking,
        source="findings",
        pending_scope=len(report.scope_changes),
    )


def finding_id_problems(
    earlier_active: Iterable[str],
    report: FindingsReport,
    round_no: int,
    earlier_known: Iterable[str] = (),
) -> list[str]:
    """Check ids across rounds; every problem fails the verification closed.

    - an id still active in an earlier round must be carried forward (not dropped);
    - an id not seen in any earlier round (`earlier_known`, which includes the active ones)
      must belong to this round (`r<round_no>-…`), not be invented for a past round.
    """
    earlier = list(dict.fromkeys(earlier_active))
    current = {f.id for f in report.findings}
    problems = [
        f"finding {fid} from an earlier round was dropped; carry it with a transition "
        "(open, resolved, superseded, human)"
        for fid in earlier
        if fid not in current
    ]
    known = set(earlier) | set(earlier_known)
    for finding in report.findings:
        if finding.id in known:
            continue
        match = FINDING_ID.match(finding.id)
        if match is not None and int(match.group("round")) != round_no:
            problems.append(
                f"finding {finding.id} is new but names round {match.group('round')}; "
                f"new findings in this review are r{round_no}-<n>"
            )
    return problems
