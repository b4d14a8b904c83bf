"""The cycle metrics a reduction of a card's journal produces (`app.domain.reports.metrics`),
as values: each figure with its coverage, the steps, the findings and the scope proposals, and
their JSON shape (`CycleMetrics.to_json`, schema SCHEMA_VERSION). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from app.domain.review.regression import COUNTERS

SCHEMA_VERSION = 1
Coverage = Literal["known", "partial", "unknown"]
Completeness = Literal["complete", "partial"]
Origin = Literal["preexisting-missed", "introduced-by-remediation", "unknown"]
Quality = Literal["converged", "not-converged", "unknown", "unreviewed"]
ORIGINS: tuple[Origin, ...] = ("preexisting-missed", "introduced-by-remediation", "unknown")


@dataclass(frozen=True)
class Quantity:
    """A summed figure with its coverage: `reported` of `total` steps contributed to `value`."""

    value: int | float | None
    coverage: Coverage
    reported: int
    total: int

    @property
    def unreported(self) -> int:
        """Steps that should have reported this figure and did not."""
        return self.total - self.reported

    def to_json(self) -> dict[str, Any]:
        """`{"value", "coverage", "reported", "of"}`; value null when unknown."""
        return {
            "value": self.value,
            "coverage": self.coverage,
            "reported": self.reported,
            "of": self.total,
        }


@dataclass(frozen=True)
class RoleUsage:
    """Tokens and cost of a group of agent steps (one role's, or the shared overhead)."""

    steps: int
    input_tokens: Quantity
    output_tokens: Quantity
    tokens: Quantity
    cost_usd: Quantity

    def to_json(self) -> dict[str, Any]:
        """`{"steps", "inputTokens", "outputTokens", "tokens", "costUsd"}`."""
        return {
            "steps": self.steps,
            "inputTokens": self.input_tokens.to_json(),
            "outputTokens": self.output_tokens.to_json(),
            "tokens": self.tokens.to_json(),
            "costUsd": self.cost_usd.to_json(),
        }


_NOTHING = Quantity(value=None, coverage="unknown", reported=0, total=0)
NO_USAGE = RoleUsage(
    steps=0, input_tokens=_NOTHING, output_tokens=_NOTHING, tokens=_NOTHING, cost_usd=_NOTHING
)


@dataclass(frozen=True)
class StepMetrics:
    """One step execution: its end state (None if interrupted), wall time and usage."""

    key: str
    transition: str
    state: str | None
    started_at: str | None
    ended_at: str | None
    seconds: float | None
    agent: bool
    observed_start: bool = True
    observed_end: bool = True
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @property
    def interrupted(self) -> bool:
        """Started, never ended."""
        return not self.observed_end

    @property
    def orphaned(self) -> bool:
        """Ended with no observed start."""
        return not self.observed_start

    @property
    def tokens(self) -> int | None:
        """Input plus output, only when both were reported."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class LateDefect:
    """A finding first seen after review round 1, and where it most likely came from."""

    id: str
    kind: str
    first_round: int
    origin: Origin


@dataclass(frozen=True)
class ScopeProposal:
    """A scope proposal as last reported, with the maintainer's decision if known."""

    id: str
    type: str
    affected_ac: str | None
    decision: str | None


@dataclass(frozen=True)
class FindingMetrics:
    """Distinct findings across every review of the card."""

    total: int = 0
    blocking: int = 0  # distinct ids ever reported blocking
    open_blocking: int = 0  # blocking and still active in the last review
    by_kind: Mapping[str, int] = field(default_factory=dict)
    late: tuple[LateDefect, ...] = ()

    @property
    def late_by_origin(self) -> dict[str, int]:
        """Late defects counted per origin, every origin present (0 is a real count here)."""
        return {origin: sum(1 for d in self.late if d.origin == origin) for origin in ORIGINS}


@dataclass(frozen=True)
class CycleMetrics:
    """The reduced figures of one card's cycle; `to_json` is the schema-1 object."""

    as_of: str
    source_digest: str
    records: int
    completeness: Completeness
    quality: Quality
    cycles: int
    review_executions: int
    retries: int
    interrupted: int
    orphaned: int
    steps_by_transition: Mapping[str, int]
    input_tokens: Quantity
    output_tokens: Quantity
    tokens: Quantity
    cost_usd: Quantity
    wall_seconds: Quantity
    steps: tuple[StepMetrics, ...]
    findings: FindingMetrics
    scope: tuple[ScopeProposal, ...]
    regression: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    # Seed 004's `usage.byRole` / `usage.sharedOverhead` (app.domain.reports.usage_roles).
    by_role: Mapping[str, RoleUsage] = field(default_factory=dict)
    shared_overhead: RoleUsage = NO_USAGE

    def to_json(self, *, metrics_revision: int | None = None) -> dict[str, Any]:
        """The compact schema-1 object (nulls for unknowns); key order is fixed."""
        head: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "sourceDigest": self.source_digest,
            "asOf": self.as_of,
        }
        if metrics_revision is not None:
            head["metricsRevision"] = metrics_revision
        return {
            **head,
            "completeness": self.completeness,
            "records": self.records,
            "quality": self.quality,
            "cycles": self.cycles,
            "reviewExecutions": self.review_executions,
            "retries": self.retries,
            "interrupted": self.interrupted,
            "orphaned": self.orphaned,
            "steps": dict(sorted(self.steps_by_transition.items())),
            "usage": {
                "inputTokens": self.input_tokens.to_json(),
                "outputTokens": self.output_tokens.to_json(),
                "tokens": self.tokens.to_json(),
                "costUsd": self.cost_usd.to_json(),
                "byRole": {role: usage.to_json() for role, usage in sorted(self.by_role.items())},
                "sharedOverhead": self.shared_overhead.to_json(),
            },
            "time": {"wallSeconds": self.wall_seconds.to_json()},
            "findings": {
                "total": self.findings.total,
                "blocking": self.findings.blocking,
                "openBlocking": self.findings.open_blocking,
                "byKind": dict(sorted(self.findings.by_kind.items())),
                "lateByOrigin": self.findings.late_by_origin,
            },
            "scope": [
                {"id": s.id, "type": s.type, "affectedAc": s.affected_ac, "decision": s.decision}
                for s in self.scope
            ],
            "regressionRisks": {
                "active": {"activeRegressionRisks": self.regression["activeRegressionRisks"]},
                "history": {
                    name: self.regression[name]
                    for name in COUNTERS
                    if name != "activeRegressionRisks"
                },
            },
        }
