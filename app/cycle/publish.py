"""The card cycle's writes to the hosts, each idempotent and recorded in the journal.

Every function here does one publication through the `Host` protocol and then journals a
`cycle` entry saying it is done (`app.cycle.records`), so a re-run skips what is already
there and a killed run redoes only what it had not recorded — and redoing is harmless, because
comments are upserted by marker, the review status is set on one exact head, the label is
exclusive, and a pull is opened only when none is open for the branch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.cycle.records import CycleRecord
from app.domain.review.verdict import ScopeChange
from app.domain.scope.decision import scope_baseline_hash
from app.engine.runstate import RunLocus
from app.engine.step import Clock, journal_event
from hosts.base import Host
from hosts.errors import NotFound
from hosts.labels import PrState
from hosts.markers import make_marker
from hosts.models import Pull, ReviewState, Target, Upserted, UpsertResult


@dataclass(frozen=True)
class Publisher:
    """The hosts and the journal of one card."""

    pm: Host
    code: Host
    locus: RunLocus
    clock: Clock
    card: int
    key: str
    root: Path  # the project checkout (the local forge is seeded with its base branch)

    def record(self, event: str, **data: Any) -> None:
        """Journal that a publication is done."""
        journal_event(
            self.locus, self.clock, kind="cycle", key=self.key, data={"event": event, **data}
        )

    async def ensure_pull(
        self, rec: CycleRecord, branch: str, base: str, title: str, body: str
    ) -> Pull:
        """Open the card's draft PR once (the host returns the open one for the branch)."""
        try:
            pull = await self.code.open_pull(branch, base, title, body, draft=True)
        except NotFound:
            if self.code.name != "local":
                raise
            # The local forge starts empty: it mirrors the project's base branch on first use.
            await self.code.push_branch(self.root, base)
            pull = await self.code.open_pull(branch, base, title, body, draft=True)
        if rec.pr != pull.number:
            if self.pm is self.code:
                # Where the host links a pull to its card by API (Azure DevOps' work item
                # link), once per PR: before the record, so a killed run links it again.
                await self.code.link_card(pull.number, self.card)
            self.record("pr", number=pull.number, url=pull.url)
            rec.pr, rec.pr_url = pull.number, pull.url
        return pull

    async def label(self, rec: CycleRecord, state: PrState, *, reconcile: bool = False) -> None:
        """Exactly one `pr-state:*` on the card and its PR.

        Skipped when the journal already records this label, unless `reconcile`: a step that
        ran asks the hosts anyway (a read; a write only when wrong), because a run killed after
        writing a label but before saving its journal leaves the host ahead of the record.
        Idle ticks do not reconcile, so waiting costs no request.
        """
        status = state.value
        if rec.label == status and rec.label_pr == rec.pr and not reconcile:
            return
        await self.pm.set_state_label(Target("card", self.card), state)
        if rec.pr is not None:
            await self.code.set_state_label(Target("pull", rec.pr), state)
        if rec.label != status or rec.label_pr != rec.pr:
            self.record("label", state=status, pr=rec.pr)
            rec.label, rec.label_pr = status, rec.pr

    async def tracking(
        self, rec: CycleRecord, body: str, shown: Mapping[str, Any] | None = None
    ) -> None:
        """Upsert the card's tracking comment; skipped when its body has not changed.

        `shown` (status, next, why) is journaled with it: what the comment says is what every
        other view of the card (`app.cycle.card_status`) reads back.
        """
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
        if rec.tracking_digest == digest:
            return
        target = Target("card", self.card)
        done = await self.pm.upsert_comment(target, make_marker("tracking", self.card), body)
        self.record("tracking", digest=digest, **(shown or {}), comment=kept(target, done))
        rec.tracking_digest = digest
        if shown is not None:
            rec.shown_status = str(shown.get("status") or "") or None
            rec.shown_next = str(shown["next"]) if shown.get("next") else None
            rec.shown_why = str(shown.get("why") or "")

    async def review(
        self, rec: CycleRecord, head: str, body: str, state: ReviewState, description: str
    ) -> None:
        """The review comment (one per run) and `pair-review` on exactly the reviewed head."""
        if rec.pr is None:
            return
        marker = make_marker("review", self.card, rec.pr, rec.run_id)
        target = Target("pull", rec.pr)
        done = await self.code.upsert_comment(target, marker, body)
        await self.code.set_review_status(rec.pr, head, state, description)
        self.record("review-published", head=head, comment=kept(target, done))
        rec.review_published = head

    async def scope_packet(self, rec: CycleRecord, pending: Sequence[ScopeChange]) -> None:
        """The scope-decision packet on the PR, once per pending baseline."""
        baseline = scope_baseline_hash(pending)
        if rec.pr is None or rec.scope_baseline_posted == baseline:
            return
        marker = make_marker("scope-packet", self.card, rec.pr, rec.run_id)
        target = Target("pull", rec.pr)
        done = await self.code.upsert_comment(
            target, marker, render_scope_packet(pending, baseline)
        )
        self.record("scope-packet", baseline=baseline, comment=kept(target, done))
        rec.scope_baseline_posted = baseline

    async def escalation(self, rec: CycleRecord, body: str, **data: Any) -> None:
        """The run's one escalation comment on the card, edited by a later escalation of the
        same run; journaled with what fired (`data`) when it was written or changed."""
        target = Target("card", self.card)
        marker = make_marker("escalation", self.card, None, rec.run_id)
        done = await self.pm.upsert_comment(target, marker, body)
        if done.outcome is not Upserted.UNCHANGED:
            self.record("escalated", comment=kept(target, done), **data)

    async def reply(self, target: Target, kind: str, body: str) -> None:
        """A marker-keyed reply (a refusal, help): edited in place, never posted twice."""
        pr = target.number if target.kind == "pull" else None
        done = await (self.code if target.kind == "pull" else self.pm).upsert_comment(
            target, make_marker(kind, self.card, pr), body
        )
        if done.outcome is not Upserted.UNCHANGED:  # a reply re-sent unchanged is known already
            self.record("comment", kind=kind, comment=kept(target, done))


def kept(target: Target, done: UpsertResult) -> dict[str, Any]:
    """What the journal keeps of a comment pairbot wrote: where it is, its id, its web URL
    ("" where the host has none, as on the local forge), so the status pages can link it."""
    return {
        "target": target.kind,
        "number": target.number,
        "id": done.comment.id,
        "url": done.comment.url,
    }


def render_scope_packet(pending: Sequence[ScopeChange], baseline: str) -> str:
    """The packet: what the reviewer proposed beyond the card, and how to answer."""
    lines = [
        "## pairbot — scope decision needed",
        "",
        "The review converged: nothing blocks. The reviewer also proposed changes to the card's "
        "scope. They are not defects; decide each one in a PR comment holding one fenced JSON "
        "object (only the maintainer's answer counts):",
        "",
        "| id | type | affected AC | evidence |",
        "|---|---|---|---|",
    ]
    for proposal in pending:
        evidence = proposal.evidence.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {proposal.id} | {proposal.type} | {proposal.affected_ac or '—'} | {evidence} |"
        )
    template: Mapping[str, Any] = {
        "schemaVersion": 1,
        "scopeBaselineHash": baseline,
        "decisions": [
            {"id": p.id, "action": "ignore | new-card | extend-current-card"} for p in pending
        ],
    }
    lines += [
        "",
        "Answer with (actions: `ignore`, `new-card`, `extend-current-card` with "
        '`"approvedDelta": {"ac": "AC-<n>", "text": "…"}`):',
        "",
        "```json",
        json.dumps(template, indent=2),
        "```",
    ]
    return "\n".join(lines)
