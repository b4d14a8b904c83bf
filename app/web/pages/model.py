"""The status pages' view-model: pure functions from run-state and store rows to dataclasses.

    card_view(repo, key, records, parks, ...) -> CardView   one card's row and its cycle
    job_views(jobs, now) -> list[JobView]                    the operator's queue, failed first
    overview(cards, jobs, viewer, repo=, state=) -> Overview  filtered and sorted by attention

The HTML pages and the JSON API (`/api/v1/…`) are both built from these values, so they never
disagree. Nothing here reads a file, the clock or the store: the shell (`app.web.pages.routes`)
reads the journals and jobs and passes them in. A card's status, next step and reason are what
its tracking comment says (`app.cycle.card_status`); the gate, the budget and the commands a
person can use come from the `/pair status` explanation (`app.domain.reports.explain`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, get_args

from app.cycle.card_status import card_status
from app.cycle.records import fold_cycle
from app.domain.reports.explain import CardFacts, NextStep, explain
from app.engine.runstate import Park
from app.store.base import JobRecord
from app.web.viewer import Viewer

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
    "interrupted": 2,
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
    **dict.fromkeys(("needs-input", "blocked", "interrupted"), "alert"),
    **dict.fromkeys(
        ("awaiting-approval", "awaiting-scope-decision", "awaiting-human", "escalated"), "wait"
    ),
    **{s: "alert" for s in ATTENTION if s.startswith("failed-")},
    **dict.fromkeys(("ready-for-merge", "merged"), "good"),
    **dict.fromkeys(("in-progress", "awaiting-verify", "ready"), "busy"),
}
_ACCEPTED = frozenset({"advanced", "awaiting-approval"})
_GITHUB_PULL = re.compile(r"^(?P<repo>https://[^\s/]+/[^\s/]+/[^\s/]+)/pull/\d+$")


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


# ---------------------------------------------------------------- helpers


def stamp(seconds: float) -> str:
    """A store timestamp as ISO 8601 UTC, seconds precision (beyond the calendar: the number)."""
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return f"{seconds:.0f} s after the epoch"


def _parse(at: str) -> datetime | None:
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return None


def _duration(start: str, end: str) -> float | None:
    began, ended = _parse(start), _parse(end)
    if began is None or ended is None:
        return None
    return round((ended - began).total_seconds(), 3)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage()
    total = raw.get("totalTokens")
    if not isinstance(total, int):
        parts = (raw.get("inputTokens"), raw.get("outputTokens"))
        total = parts[0] + parts[1] if all(isinstance(p, int) for p in parts) else None  # type: ignore[operator]
    cost = raw.get("costUsd")
    return Usage(tokens=total, cost_usd=float(cost) if isinstance(cost, int | float) else None)


def _findings(raw: Any, before: Mapping[str, Finding]) -> tuple[Finding, ...]:
    """A verify outcome's findings, each marked new or still open against the last round, and
    the last round's that are gone marked resolved."""
    items = raw.get("findings") if isinstance(raw, Mapping) else None
    seen: list[Finding] = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping):
            continue
        ident = str(item.get("id") or f"#{index + 1}")
        text = item.get("title") or item.get("summary") or item.get("message") or ""
        seen.append(
            Finding(
                id=ident,
                severity=str(item.get("severity") or ""),
                text=str(text),
                transition=_finding_state(item.get("transition"), carried=ident in before),
            )
        )
    ids = {f.id for f in seen}
    gone = [
        Finding(f.id, f.severity, f.text, "resolved")
        for f in before.values()
        if f.id not in ids and f.transition not in CLOSED
    ]
    return (*seen, *gone)


def _finding_state(declared: object, *, carried: bool) -> str:
    """What became of a finding this round: the reviewer's own transition when it closed the
    finding (a finding carried forward as `resolved` is not still open), else new or still
    open against the last round."""
    if declared in ("resolved", "superseded"):
        return str(declared)
    if declared == "human":
        return "needs a person"
    return "still open" if carried else "new"


def _event_text(data: Mapping[str, Any]) -> str | None:
    """A cycle event worth a line on the card's page; None for the bookkeeping ones."""
    event = data.get("event")
    if event == "pushed":
        return f"pushed {str(data.get('sha', ''))[:12]} ({data.get('transition') or 'a step'})"
    if event == "pr":
        return f"opened PR #{data.get('number')}"
    if event == "reviewed":
        verdict = "converged" if data.get("converged") else "not converged"
        return (
            f"review round {data.get('round')} read back on {str(data.get('head', ''))[:12]}: "
            f"{verdict}, {data.get('blocking', 0)} blocking"
        )
    if event == "review-published":
        return f"review comment and status published on {str(data.get('head', ''))[:12]}"
    if event == "label":
        return f"label set: {data.get('state')}"
    if event == "tracking":
        return f"tracking comment: {data.get('status')} — {data.get('why') or ''}".rstrip(" —")
    if event == "synthesis":
        return f"synthesis comment published on {str(data.get('head', ''))[:12]}"
    if event == "merged":
        return f"merged as {str(data.get('sha', ''))[:12]}"
    if event == "abandoned":
        return "abandoned"
    if isinstance(event, str) and event.startswith("scope"):
        details = ", ".join(
            f"{k}: {v}" for k, v in data.items() if k != "event" and isinstance(v, str | int)
        )
        return f"{event}" + (f" ({details})" if details else "")
    return None


# ---------------------------------------------------------------- comments and scope

# The cycle events that say pairbot wrote one of its marker-keyed comments: the comment's kind
# (its marker's) and where it lives when the journal predates recording it.
_COMMENT_EVENTS: Mapping[str, tuple[str, str]] = {
    "tracking": ("tracking", "card"),
    "review-published": ("review", "pull"),
    "scope-packet": ("scope-packet", "pull"),
    "synthesis": ("synthesis", "pull"),
}
_COMMENT_NAMES: Mapping[str, str] = {
    "tracking": "tracking comment",
    "review": "review comment",
    "scope-packet": "scope-decision packet",
    "synthesis": "synthesis comment",
    "scope-refusal": "scope decision refused",
    "help": "usage reply",
}
_SCOPE_OUTCOMES: Mapping[str, str] = {
    "ignore": "declined: not part of this card",
    "new-card": "deferred to a card of its own",
    "extend-current-card": "approved: this card's scope is extended",
}


def _comment_of(
    data: Mapping[str, Any], card: int, pr: int | None
) -> tuple[str, str, int | None, str, str] | None:
    """(kind, target, number, id, url) of the comment a cycle event says was written."""
    event = str(data.get("event") or "")
    if event == "comment":
        kind, target = str(data.get("kind") or "reply"), "card"
    elif event in _COMMENT_EVENTS:
        kind, target = _COMMENT_EVENTS[event]
    else:
        return None
    raw = data.get("comment")
    kept: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if kept.get("target") in ("card", "pull"):
        target = str(kept["target"])
    number = kept.get("number")
    if not isinstance(number, int):
        number = card if target == "card" else pr
    return kind, target, number, str(kept.get("id") or ""), str(kept.get("url") or "")


def kept_comments(
    records: Sequence[Mapping[str, Any]], key: str, card: int
) -> tuple[KeptComment, ...]:
    """Every comment pairbot keeps for the card, once each, in the order first written, with
    its last-known web address. A journal written before comment ids were recorded still
    names each comment (by its kind and place), without a link."""
    found: dict[tuple[str, str, int | None, str], KeptComment] = {}
    pr: int | None = None
    for ref, record in enumerate(records):
        if record.get("key") != key or record.get("kind") != "cycle":
            continue
        raw = record.get("data")
        data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if data.get("event") == "pr" and isinstance(data.get("number"), int):
            pr = data["number"]
        written = _comment_of(data, card, pr)
        if written is None:
            continue
        kind, target, number, ident, url = written
        place = (kind, target, number)
        # One entry per comment: by its id once recorded; an entry from before ids were
        # recorded is the same comment as the first one with an id in the same place.
        anonymous = (*place, "")
        identity = (*place, ident)
        if ident and anonymous in found and not any(k[:3] == place and k[3] for k in found):
            found[identity] = found.pop(anonymous)
        elif not ident:
            named = [k for k in found if k[:3] == place and k[3]]
            identity = named[-1] if named else anonymous
        before = found.get(identity)
        where = "the card" if target == "card" else f"PR #{number}"
        found[identity] = KeptComment(
            kind=kind,
            label=f"{_COMMENT_NAMES.get(kind, kind)} on {where}",
            target=target,
            number=number,
            id=ident or (before.id if before else ""),
            url=url or (before.url if before else ""),
            at=str(record.get("at", "")),
            journal_ref=ref,
        )
    return tuple(found.values())


def _web_addresses(comments: Sequence[KeptComment], card_url: str) -> tuple[KeptComment, ...]:
    """Azure DevOps gives a work item's comment only its REST address (`…/_apis/wit/…`), which
    a browser cannot show: such a comment links to the work item's page, where it is, when
    that is known (else it is shown as a plain label)."""
    return tuple(
        replace(c, url=card_url) if c.target == "card" and "/_apis/" in c.url else c
        for c in comments
    )


def _decision(
    item: Mapping[str, Any], data: Mapping[str, Any], at: str, ref: int
) -> ScopeDecisionView:
    action = str(item.get("action") or "")
    return ScopeDecisionView(
        action=action,
        outcome=_SCOPE_OUTCOMES.get(action, action),
        by=str(data.get("by") or ""),
        at=at,
        ref=str(item.get("ref") or data.get("ref") or ""),
        url=str(data.get("url") or ""),
        ac=str(item.get("ac") or ""),
        journal_ref=ref,
    )


def scope_proposals(
    records: Sequence[Mapping[str, Any]], key: str
) -> tuple[tuple[ScopeProposal, ...], str]:
    """The scope proposals the card's reviews made (the latest wording of each), each with
    the maintainer's decision once applied; and when the decision packet was last posted."""
    proposals: dict[str, ScopeProposal] = {}
    split: dict[str, int] = {}  # proposal id -> the card a `new-card` decision created
    reviews = 0
    packet_at = ""
    for ref, record in enumerate(records):
        if record.get("key") != key:
            continue
        kind, at = record.get("kind"), str(record.get("at", ""))
        if kind == "outcome" and record.get("transition") == "verify":
            if record.get("state") not in _ACCEPTED:
                continue
            reviews += 1
            raw = record.get("findings")
            changes = raw.get("scopeChanges") if isinstance(raw, Mapping) else None
            for item in changes if isinstance(changes, list) else []:
                if not isinstance(item, Mapping) or not item.get("id"):
                    continue
                ident = str(item["id"])
                before = proposals.get(ident)
                proposals[ident] = ScopeProposal(
                    id=ident,
                    type=str(item.get("type") or ""),
                    evidence=str(item.get("evidence") or ""),
                    affected_ac=str(item.get("affectedAc") or item.get("affected_ac") or ""),
                    review_round=reviews,
                    proposed_at=before.proposed_at if before else at,
                    journal_ref=ref,
                    decision=before.decision if before else None,
                )
            continue
        raw_data = record.get("data") if kind == "cycle" else None
        data: Mapping[str, Any] = raw_data if isinstance(raw_data, Mapping) else {}
        event = data.get("event")
        if event == "scope-packet":
            packet_at = at
        elif event == "scope-applied" and isinstance(data.get("dispositions"), list):
            for item in data["dispositions"]:
                if not isinstance(item, Mapping) or not item.get("id"):
                    continue
                ident = str(item["id"])
                decided = _decision(item, data, at, ref)
                base = proposals.get(ident) or ScopeProposal(
                    id=ident, type=str(item.get("type") or ""), evidence=""
                )
                if base.decision is None:  # a replayed decision is a no-op in the cycle too
                    proposals[ident] = replace(base, decision=decided)
        elif event == "scope-card" and isinstance(data.get("number"), int):
            # Journaled just before the decision it belongs to: attached at the end.
            split.setdefault(str(data.get("proposal")), data["number"])
    for ident, number in split.items():
        split_off = proposals.get(ident)
        if split_off is not None and split_off.decision is not None:
            decision = replace(split_off.decision, new_card=number)
            proposals[ident] = replace(split_off, decision=decision)
    return tuple(proposals.values()), packet_at


# ---------------------------------------------------------------- a card


def _issue_url(pr_url: str, card: int) -> str:
    """The card's issue on GitHub, beside its pull request (`…/pull/2` → `…/issues/7`); ""
    elsewhere (an Azure DevOps work item lives in its project, not its repository)."""
    match = _GITHUB_PULL.match(pr_url)
    return f"{match.group('repo')}/issues/{card}" if match else ""


def card_steps(
    records: Sequence[Mapping[str, Any]], key: str
) -> tuple[tuple[Step, ...], tuple[Event, ...]]:
    """The card's steps in order, and its host-side events, from its batch journal."""
    steps: list[Step] = []
    open_steps: dict[str, int] = {}  # session -> index in steps
    events: list[Event] = []
    pushed = ""
    last_findings: dict[str, Finding] = {}
    reviews = 0
    for ref, record in enumerate(records):
        if record.get("key") != key:
            continue
        kind = record.get("kind")
        at = str(record.get("at", ""))
        session = str(record.get("session") or "")
        raw = record.get("data")
        data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if kind == "step-started":
            open_steps[session] = len(steps)
            steps.append(
                Step(
                    transition=str(record.get("transition") or ""),
                    session=session,
                    started_at=at,
                    agent=str(data.get("agent") or ""),
                    model=str(data.get("model") or ""),
                    journal_ref=ref,
                )
            )
        elif kind in ("progress", "blocker", "needs-input", "completion") and (
            session in open_steps
        ):
            index = open_steps[session]
            report = Report(at=at, kind=str(kind), message=str(record.get("message", "")))
            steps[index] = replace(steps[index], reports=(*steps[index].reports, report))
        elif kind == "outcome":
            transition = str(record.get("transition") or "")
            index_or_none = open_steps.pop(session, None)
            base = (
                steps[index_or_none]
                if index_or_none is not None
                else Step(transition=transition, session=session, started_at=at)
            )
            findings: tuple[Finding, ...] = ()
            review_round = None
            if transition == "verify" and record.get("findings") is not None:
                findings = _findings(record.get("findings"), last_findings)
                last_findings = {f.id: f for f in findings if f.transition not in CLOSED}
                if record.get("state") in _ACCEPTED:
                    reviews += 1
                    review_round = reviews
            done = replace(
                base,
                outcome=str(record.get("state") or ""),
                ended_at=at,
                duration_s=_duration(base.started_at, at),
                message=str(record.get("message", "")),
                usage=_usage(record.get("usage")),
                commit=pushed,
                journal_ref=ref,
                findings=findings,
                review_round=review_round,
            )
            if index_or_none is None:
                steps.append(done)
            else:
                steps[index_or_none] = done
            pushed = ""
        elif kind == "cycle":
            if data.get("event") == "pushed":
                pushed = str(data.get("sha") or "")
            text = _event_text(data)
            if text is not None:
                events.append(
                    Event(at=at, event=str(data.get("event")), text=text, journal_ref=ref)
                )
    return tuple(steps), tuple(events)


def card_view(
    repo: str,
    key: str,
    records: Sequence[Mapping[str, Any]],
    parks: Mapping[str, Park],
    *,
    max_fix_rounds: int = 3,
    trigger: str = "pair",
    last_command: str = "",
    live: Mapping[str, Sequence[str]] | None = None,
) -> CardView:
    """A card batch's view: the tracking comment's status, next and why; the explanation's gate,
    budget and commands; its steps and events. `live` holds the last output lines by session;
    a running step shows its own. Raises ValueError for a batch that is not a card."""
    status = card_status(records, key, parks)
    rec = fold_cycle(records, key)
    mine = tuple(r for r in records if r.get("key") == key)
    steps, events = card_steps(records, key)
    fixes = sum(1 for s in steps if s.transition == "fix" and s.outcome in _ACCEPTED)
    reviews = sum(1 for s in steps if s.transition == "verify" and s.outcome in _ACCEPTED)
    park = parks.get(key)
    next_step = status.next if status.next in get_args(NextStep) else None
    snapshot = rec.snapshot or {}
    explanation = explain(
        CardFacts(
            card=status.card,
            status=status.status,
            next_step=next_step,
            title=str(snapshot.get("title") or ""),
            park_reason=park.reason if park is not None else None,
            fix_rounds_used=fixes,
            max_fix_rounds=max(max_fix_rounds, fixes),
            review_round=reviews,
            open_blocking=rec.review_blocking,
            pr=rec.pr,
            pr_url=rec.pr_url or None,
            pr_closed=rec.pr_closed,
            reviewed_head=rec.reviewed_head,
            records=mine,
            trigger=trigger,
        )
    )
    last = steps[-1] if steps else None
    scope, packet_at = scope_proposals(records, key)
    card_url = str(snapshot.get("url") or "") or _issue_url(explanation.pr_url or "", status.card)
    view = CardView(
        repo=repo,
        number=status.card,
        title=explanation.title,
        url=card_url,
        status=status.status,
        label=status.label,
        tone=TONE.get(status.status, "busy"),
        next=status.next_text,
        why=status.why,
        gate=explanation.gate_text,
        budget=explanation.budget,
        actions=explanation.what_you_can_do,
        pr=rec.pr,
        pr_url=explanation.pr_url or "",
        reviewed_head=rec.reviewed_head or "",
        review_converged=rec.review_converged,
        fix_rounds=fixes,
        max_fix_rounds=explanation.max_fix_rounds,
        tokens=explanation.tokens.to_json() if explanation.tokens else None,
        cost_usd=explanation.cost.to_json() if explanation.cost else None,
        last_step=(f"{last.transition}: {last.outcome or 'running'}" if last is not None else ""),
        last_at=(last.ended_at or last.started_at) if last is not None else "",
        last_command=last_command,
        steps=steps,
        events=events,
        comments=_web_addresses(kept_comments(records, key, status.card), card_url),
        scope=scope,
        scope_packet_at=packet_at,
    )
    return with_live(view, live)


def with_live(view: CardView, live: Mapping[str, Sequence[str]] | None) -> CardView:
    """`view` with the last output lines (`live`, by session) on its running step."""
    if not live or view.running is None:
        return view
    steps = tuple(
        replace(s, live_output=tuple(live[s.session])) if s.running and s.session in live else s
        for s in view.steps
    )
    return replace(view, steps=steps)


def remote_card(job: JobRecord) -> CardView:
    """A card only the job queue knows (its run-state lives on its repository's `pair-state`
    branch, not on this machine): the last command and what became of it, no status guessed.
    A finished command says nothing about where the card is, so the status is `unknown`."""
    command = job.verb or job.kind
    return CardView(
        repo=job.repo,
        number=job.number,
        title="",
        url="",
        status="unknown",
        label="",
        tone="busy",
        next="unknown here",
        why="this card's run-state is not on this machine; its tracking comment has its status",
        gate="unknown here",
        budget="",
        actions=(),
        last_command=f"/{command}: {job.state}" + (f" ({job.result})" if job.result else ""),
        last_at=stamp(job.updated_at),
        local=False,
    )


# ---------------------------------------------------------------- lists


def overview(
    cards: Sequence[CardView], viewer: Viewer, *, repo: str = "", state: str = ""
) -> Overview:
    """The cards `viewer` may read, narrowed by the repository and state filters (exact,
    repository case-insensitive), most in need of a person first, then newest activity."""
    visible = [c for c in cards if viewer.can_read(c.repo)]
    chosen = [
        c
        for c in visible
        if (not repo or c.repo.lower() == repo.lower()) and (not state or c.status == state)
    ]
    # Newest activity first within a rank: sort by time descending, then stably by rank.
    chosen.sort(key=lambda c: c.last_at, reverse=True)
    chosen.sort(key=lambda c: c.attention)
    return Overview(
        cards=tuple(chosen),
        repos=tuple(sorted({c.repo for c in visible}, key=str.lower)),
        states=tuple(sorted({c.status for c in visible}, key=lambda s: (ATTENTION.get(s, 6), s))),
        repo=repo,
        state=state,
    )


def job_views(jobs: Sequence[JobRecord], viewer: Viewer, now: float) -> list[JobView]:
    """The jobs `viewer` may read: failed first, then running, queued and done, newest first."""
    order = {"failed": 0, "running": 1, "queued": 2, "done": 3}
    views = [
        JobView(
            id=j.id,
            repo=j.repo,
            number=j.number,
            target=j.target,
            command=j.verb or j.kind,
            state=j.state,
            stage=j.stage,
            attempts=j.attempts,
            result=j.result,
            updated_at=stamp(j.updated_at),
            retry_at=stamp(j.not_before) if j.state == "queued" and j.not_before > now else "",
        )
        for j in sorted(jobs, key=lambda j: j.updated_at, reverse=True)
        if viewer.can_read(j.repo)
    ]
    views.sort(key=lambda v: order.get(v.state, 4))
    return views
