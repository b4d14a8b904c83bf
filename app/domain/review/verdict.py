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

The coordinator re-checks what the verifier says about each finding (every problem fails the
verification closed, with a message naming the finding):

    floor_problems          `blocking` must equal what the severity and the project's floor
                            (`review.severityFloor`) give; a finding without a severity must be
                            blocking (an unknown severity is never below the floor), except a
                            `question`, whose own `blocking` stands
    severity_problems       a finding that keeps its id but changes severity carries a non-empty
                            `severityEvidence`
    history_rewrite_ids     findings typed `humanDecisionKind: history-rewrite`: the card goes to
                            a human, and no review of the same head may close them
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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
# From the most to the least severe: a finding blocks when its severity is at or above the floor.
SEVERITIES: tuple[Severity, ...] = ("critical", "major", "minor", "info")
DEFAULT_FLOOR: Severity = "major"
HumanDecisionKind = Literal["history-rewrite"]
ACTIVE_TRANSITIONS: frozenset[str] = frozenset({"open", "human"})
SHA_PATTERN = r"^[0-9a-f]{40}$"


class RegressionClaim(StrictModel):
    """The claim that a remediation introduced this defect: the admissibility tuple.

    Every part is required (the approved obligation it violates, an executable reproducer, the
    head where the reproducer passes and the one where it fails, the remediation batch that
    produced the failing head, closure assertions, affected boundary references); a claim
    missing one is not a regression risk, only an ordinary finding of unknown origin.
    """

    obligation: str = ""
    reproducer: str = ""
    passing_head: str = ""
    failing_head: str = ""
    introduced_by: str = ""  # the remediation batch, `fix-<round>`
    closure_assertions: list[str] = Field(default_factory=list)
    boundaries: list[str] = Field(default_factory=list)

    def missing(self) -> list[str]:
        """The parts of the tuple this claim lacks (empty: admissible in shape)."""
        parts = {
            "obligation": self.obligation.strip(),
            "reproducer": self.reproducer.strip(),
            "passingHead": self.passing_head.strip(),
            "failingHead": self.failing_head.strip(),
            "introducedBy": self.introduced_by.strip(),
            "closureAssertions": [a for a in self.closure_assertions if a.strip()],
            "boundaries": [b for b in self.boundaries if b.strip()],
        }
        return [name for name, value in parts.items() if not value]


class RiskClosure(StrictModel):
    """What the review that discharges a regression risk shows, on the exact head it reviewed."""

    head: str = Field(pattern=SHA_PATTERN)
    assertions: list[str] = Field(default_factory=list)  # the closure assertions it executed
    obligation_passing: Annotated[bool, Field(strict=True)] = False
    boundaries: list[str] = Field(default_factory=list)  # the boundaries it re-tested


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
    severity_evidence: str | None = None  # why a carried finding's severity changed
    human_decision_kind: HumanDecisionKind | None = None
    regression_risk: RegressionClaim | None = None
    closure: RiskClosure | None = None  # the discharge of this finding's regression risk
    required_finding: str | None = None  # the card's required finding this one re-proves

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


class RequiredProof(StrictModel):
    """The verifier's re-proof of one of the card's required findings on the reviewed head."""

    id: str = Field(min_length=1)
    head: str = Field(pattern=SHA_PATTERN)
    reproduced: Annotated[bool, Field(strict=True)]
    observed: str = Field(min_length=1)


class FindingsReport(StrictModel):
    """The verifier's `--findings FILE`: per-AC proving tests, findings, scope proposals."""

    ac_tests: dict[str, str] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    scope_changes: list[ScopeChange] = Field(default_factory=list)
    required_proofs: list[RequiredProof] = Field(default_factory=list)

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
    """Converged means no active blocking finding and no active finding a human must decide
    (a history rewrite blocks whatever its severity); scope proposals never block."""
    blocking = sum(1 for f in report.findings if f.active and (f.blocking or f.human_decision_kind))
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


def blocking_for(severity: Severity | None, floor: Severity) -> bool:
    """Whether a finding of `severity` blocks under `floor`; no severity always blocks."""
    if severity is None:
        return True
    return SEVERITIES.index(severity) <= SEVERITIES.index(floor)


def floor_problems(report: FindingsReport, floor: Severity) -> list[str]:
    """Every finding whose reported `blocking` disagrees with its severity and the floor.

    Refused rather than corrected: a verifier that reports it wrong has misread the rules, and
    its other judgments are not trusted either.
    """
    problems = []
    for finding in report.findings:
        if finding.severity is None and finding.kind == "question":
            continue  # a question with no severity is no defect: its own `blocking` stands
        expected = blocking_for(finding.severity, floor)
        if finding.blocking == expected:
            continue
        if finding.severity is None:
            problems.append(
                f"finding {finding.id} has no severity and says blocking: false; a finding "
                f"without a severity blocks (give it one of {', '.join(SEVERITIES)})"
            )
        else:
            problems.append(
                f"finding {finding.id} is {finding.severity} and the severity floor is {floor}: "
                f"blocking must be {str(expected).lower()}, not {str(finding.blocking).lower()}"
            )
    return problems


def severity_problems(earlier: Mapping[str, str | None], report: FindingsReport) -> list[str]:
    """A finding that keeps its id (`earlier`: id -> its last reported severity) but changes
    severity must say why in `severityEvidence`."""
    problems = []
    for finding in report.findings:
        if finding.id not in earlier or earlier[finding.id] == finding.severity:
            continue
        if not (finding.severity_evidence or "").strip():
            problems.append(
                f"finding {finding.id} changed severity from {earlier[finding.id] or 'none'} to "
                f"{finding.severity or 'none'} without severityEvidence; a severity change must "
                "carry the evidence for it"
            )
    return problems


def history_rewrite_ids(findings: Iterable[Mapping[str, object]]) -> list[str]:
    """The active findings (as recorded) only a history rewrite can fix: a human decides."""
    return [
        str(f.get("id"))
        for f in findings
        if f.get("humanDecisionKind") == "history-rewrite"
        and f.get("transition", "open") in ACTIVE_TRANSITIONS
    ]


def rewrite_closure_problems(
    escalated: Iterable[str], report: FindingsReport, *, same_head: bool
) -> list[str]:
    """A review of the head a history-rewrite finding was raised on cannot close it: only a
    new review of a new head (after the human rewrote the history) can."""
    if not same_head:
        return []
    wanted = set(escalated)
    return [
        f"finding {f.id} needs a history rewrite and the head is unchanged; it cannot be "
        f"{f.transition} on the head it was raised on (a human rewrites the history, then "
        "`/pair retry` reviews the new head)"
        for f in report.findings
        if f.id in wanted and not f.active
    ]


def required_problems(
    required: Iterable[tuple[str, str]], report: FindingsReport, head: str
) -> list[str]:
    """Re-proof of the card's required findings (`required`: id, observedHead) on `head`.

    Evidence observed at another head is refused, never carried: it would turn an old
    observation into a new specification. On the same head the verifier re-proves each one
    (`requiredProofs`), and one still present is an active finding of kind `regression` that
    names it (`requiredFinding`).
    """
    proofs = {p.id: p for p in report.required_proofs}
    problems = []
    for ident, observed in required:
        if observed != head:
            problems.append(
                f"required finding {ident} was observed at {observed[:12]}, not at the reviewed "
                f"head {head[:12]}; evidence for another head is never re-proved or carried "
                "(observe it again at this head, or remove it)"
            )
            continue
        proof = proofs.get(ident)
        if proof is None:
            problems.append(
                f"required finding {ident} was not re-proved: add a requiredProofs entry "
                "{id, head, reproduced, observed}"
            )
        elif proof.head != head:
            problems.append(
                f"required finding {ident} was re-proved at {proof.head[:12]}, not at the "
                f"reviewed head {head[:12]}"
            )
        elif proof.reproduced and not any(
            f.required_finding == ident and f.kind == "regression" and f.active
            for f in report.findings
        ):
            problems.append(
                f"required finding {ident} is still present: report it as an open finding of "
                f'kind "regression" with requiredFinding: "{ident}"'
            )
    return problems
