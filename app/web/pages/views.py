"""The status pages' view values: the dataclasses the HTML pages and the JSON API are both
rendered from (a card, its steps, events, findings, kept comments and scope proposals; a job;
the overview), the attention rank and badge tone of each status, and a store time as text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

CLOSED = frozenset({"resolved", "superseded"})  # a finding's states that are no longer open
# What needs a person first: a lower rank sorts higher on the overview.
ATTENTION: Mapping[str, int] = {
    "needs-input": 0,
    "blocked": 0,
    "awaiting-approval": 1,
    "awaiting-scope-decision": 1,
    "awaiting-human": 1,
    "escalated": 1,
    "failed-preparation": 2,
    "failed-implement": 2,
    "failed-fix": 2,
    "failed-verify": 2,
    "failed-publication": 2,
    "escalate": 1,  # the review handed a finding to a person
    "failed-contract": 2,
    "failed-seal": 2,
    "failed-custody": 2,
    "failed-resume": 2,
    "incompatible": 2,
    "target-ready": 3,  # the refine's plan is ready: `/pair implement` builds it
    "interrupted": 2,
    "unreadable": 2,  # its run-state on `pair-state` could not be read: someone should look
    "ready-for-merge": 3,
    "in-progress": 4,
    "awaiting-verify": 4,
    "ready": 5,
    "unknown": 6,
    "merged": 7,
    "abandoned": 7,
}
# The colour family of each status's badge (the badge always carries the status's text too).
TONE: Mapping[str, str] = {
    **dict.fromkeys(
        ("needs-input", "blocked", "interrupted", "unreadable", "incompatible"), "alert"
    ),
    **dict.fromkeys(
        ("awaiting-approval", "awaiting-scope-decision", "awaiting-human", "escalated", "escalate"),
        "wait",
    ),
    **{s: "alert" for s in ATTENTION if s.startswith("failed-")},
    **dict.fromkeys(("ready-for-merge", "merged", "target-ready"), "good"),
    **dict.fromkeys(("in-progress", "awaiting-verify", "ready"), "busy"),
}
# The longest answer a card's page takes (a comment holds 65,536; an answer is a few sentences).
MAX_ANSWER_CHARS = 10_000
# A step whose outcome is one of these was accepted (a fix or a review that counts).
ACCEPTED = frozenset({"advanced", "awaiting-approval"})


@dataclass(frozen=True)
class Usage:
    """What one step reported: tokens and dollars, None when the agent did not say."""

    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class Report:
    """A line an agent reported while its step ran (progress, a blocker, …)."""

    at: str
    kind: str
    message: str


@dataclass(frozen=True)
class Finding:
    """One review finding and how it moved since the previous round."""

    id: str
    severity: str
    text: str
    transition: str  # "new", "still open", "needs a person", "resolved" or "superseded"


@dataclass(frozen=True)
class Step:
    """One step of the cycle: started, and ended with an outcome unless it is still running."""

    transition: str
    session: str
    started_at: str
    agent: str = ""
    model: str = ""
    outcome: str | None = None  # None while the step runs
    ended_at: str = ""
    duration_s: float | None = None
    message: str = ""
    usage: Usage = field(default_factory=Usage)
    commit: str = ""
    journal_ref: int = 0  # the 0-based line of the outcome (or start) in the batch journal
    reports: tuple[Report, ...] = ()
    findings: tuple[Finding, ...] = ()
    review_round: int | None = None
    # The last lines the agent printed (its live log), while the step runs and the log is here.
    live_output: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        return self.outcome is None


@dataclass(frozen=True)
class Event:
    """A host-side fact of the cycle: a push, the PR, a review read back, a label, a decision."""

    at: str
    event: str
    text: str
    journal_ref: int


@dataclass(frozen=True)
class KeptComment:
    """A comment pairbot keeps for the card (upserted by its marker), as last written.

    `url` is the host's web address of the comment ("" where the host has none, as on the
    local forge, or where the journal predates recording it: the page shows a plain label)."""

    kind: str  # "tracking", "review", "scope-packet", "synthesis", or a reply's kind
    label: str  # "tracking comment on the card"
    target: str  # "card" or "pull"
    number: int | None  # the card's or the pull request's number; None when not recorded
    id: str = ""
    url: str = ""
    at: str = ""  # when pairbot last wrote it
    journal_ref: int = 0


@dataclass(frozen=True)
class ScopeDecisionView:
    """What the maintainer decided for one scope proposal, by whom and when."""

    action: str  # "ignore", "new-card" or "extend-current-card"
    outcome: str  # the action in plain words: "declined", "split out to a new card", …
    by: str = ""  # "" where the journal predates recording the author
    at: str = ""
    ref: str = ""  # the decision comment's id
    url: str = ""  # the decision comment's web address, when recorded
    ac: str = ""  # the acceptance criterion an `extend-current-card` rewrote
    new_card: int | None = None  # the card a `new-card` decision created
    journal_ref: int = 0


@dataclass(frozen=True)
class ScopeProposal:
    """A change to the card's scope a reviewer proposed (never a defect), and its decision."""

    id: str
    type: str  # what it adds or changes: "new-requirement", "removed-requirement", …
    evidence: str
    affected_ac: str = ""
    review_round: int | None = None
    proposed_at: str = ""
    journal_ref: int = 0
    decision: ScopeDecisionView | None = None  # None while it waits for the maintainer


@dataclass(frozen=True)
class CardView:
    """One card: its overview row and, for its own page, the cycle behind it."""

    repo: str
    number: int
    title: str
    url: str
    status: str
    label: str
    tone: str
    next: str  # "verify: an independent review …", or "none"
    why: str
    gate: str  # "the prepare gate", or "nothing blocks"
    budget: str
    actions: tuple[str, ...]
    pr: int | None = None
    pr_url: str = ""
    reviewed_head: str = ""
    review_converged: bool | None = None
    fix_rounds: int = 0
    max_fix_rounds: int = 0
    tokens: Mapping[str, Any] | None = None
    cost_usd: Mapping[str, Any] | None = None
    last_step: str = ""
    last_at: str = ""
    last_command: str = ""
    local: bool = True  # False: only the job queue knows this card (its run-state is elsewhere)
    steps: tuple[Step, ...] = ()
    events: tuple[Event, ...] = ()
    comments: tuple[KeptComment, ...] = ()
    scope: tuple[ScopeProposal, ...] = ()
    scope_packet_at: str = ""  # when the scope-decision packet was last posted; "" never

    @property
    def attention(self) -> int:
        return ATTENTION.get(self.status, 6)

    @property
    def running(self) -> Step | None:
        return next((s for s in reversed(self.steps) if s.running), None)

    def to_json(self, *, detail: bool = False) -> dict[str, Any]:
        data = asdict(self)
        data["running"] = self.running is not None
        if not detail:
            for name in ("steps", "events", "comments", "scope", "scope_packet_at"):
                del data[name]
        else:
            for step, raw in zip(self.steps, data["steps"], strict=True):
                raw["running"] = step.running
        return data


@dataclass(frozen=True)
class JobView:
    """A job of the queue as the operator view shows it."""

    id: int
    repo: str
    number: int
    target: str
    command: str
    state: str
    stage: str
    attempts: int
    result: str
    updated_at: str
    retry_at: str = ""

    @property
    def retryable(self) -> bool:
        return self.state == "failed"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "retryable": self.retryable}


@dataclass(frozen=True)
class Overview:
    """The cards a viewer may see, filtered and sorted, with the filters' choices."""

    cards: tuple[CardView, ...]
    repos: tuple[str, ...]  # every repository the viewer may see (the filter's choices)
    states: tuple[str, ...]
    repo: str = ""
    state: str = ""


def stamp(seconds: float) -> str:
    """A store timestamp as ISO 8601 UTC, seconds precision (beyond the calendar: the number)."""
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return f"{seconds:.0f} s after the epoch"
