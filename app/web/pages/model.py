"""The status pages' view-model: pure functions from run-state and store rows to dataclasses.

    card_view(repo, key, records, parks, ...) -> CardView   one card's row and its cycle
    CardSettings                                             what the repository's config
                                                             says a card's page shows
    job_views(jobs, now) -> list[JobView]                    the operator's queue, failed first
    overview(cards, jobs, viewer, repo=, state=) -> Overview  filtered and sorted by attention

Its parts: the values (app/web/pages/views.py), a card's steps and events from its journal
(steps.py), its kept comments and scope proposals (comments.py).

The HTML pages and the JSON API (`/api/v1/…`) are both built from these values, so they never
disagree. Nothing here reads a file, the clock or the store: the shell (`app.web.pages.routes`)
reads the journals and jobs and passes them in. A card's status, next step and reason are what
its tracking comment says (`app.cycle.card_status`); the gate, the budget and the commands a
person can use come from the `/pair status` explanation (`app.domain.reports.explain`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, get_args

from app.cycle.card_status import card_status
from app.cycle.records import fold_cycle
from app.domain.reports.explain import CardFacts, NextStep, explain
from app.engine.runstate import Park
from app.store.base import JobRecord
from app.web.pages.comments import issue_url, kept_comments, scope_proposals, web_addresses
from app.web.pages.steps import card_steps
from app.web.pages.views import (
    ACCEPTED,
    ATTENTION,
    TONE,
    CardView,
    JobView,
    Overview,
    stamp,
)
from app.web.viewer import Viewer


@dataclass(frozen=True)
class CardSettings:
    """What a repository's `.pair/config.yaml` says that a card's page shows: its fix-round
    budget, trigger word, and the cycle's end and human gates (`cycle.until`, `cycle.merge`,
    `cycle.prepare`). A card's own `/pair implement` arguments win over these, as in the cycle
    (`app.cycle.state.CardState.until`, `.gate`). The defaults are `ProjectConfig`'s."""

    max_fix_rounds: int = 3
    trigger: str = "pair"
    until: str = "ready-for-merge"
    merge: str = "always"
    prepare: str = "always"


DEFAULT_SETTINGS = CardSettings()


def card_view(
    repo: str,
    key: str,
    records: Sequence[Mapping[str, Any]],
    parks: Mapping[str, Park],
    *,
    settings: CardSettings = DEFAULT_SETTINGS,
    last_command: str = "",
    live: Mapping[str, Sequence[str]] | None = None,
) -> CardView:
    """A card batch's view: the tracking comment's status, next and why; the explanation's gate,
    budget and commands; its steps and events. `live` holds the last output lines by session;
    a running step shows its own; `settings` what the repository's config says (its gates and
    budget). Raises ValueError for a batch that is not a card."""
    status = card_status(records, key, parks)
    rec = fold_cycle(records, key)
    mine = tuple(r for r in records if r.get("key") == key)
    steps, events = card_steps(records, key)
    fixes = sum(1 for s in steps if s.transition == "fix" and s.outcome in ACCEPTED)
    reviews = sum(1 for s in steps if s.transition == "verify" and s.outcome in ACCEPTED)
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
            max_fix_rounds=max(settings.max_fix_rounds, fixes),
            review_round=reviews,
            open_blocking=rec.review_blocking,
            pr=rec.pr,
            pr_url=rec.pr_url or None,
            pr_closed=rec.pr_closed,
            reviewed_head=rec.reviewed_head,
            records=mine,
            trigger=settings.trigger,
            until="merged" if (rec.until or settings.until) == "merged" else "ready-for-merge",
            merge_gate=rec.merge or settings.merge,
            prepare_gate=rec.prepare or settings.prepare,
        )
    )
    last = steps[-1] if steps else None
    scope, packet_at = scope_proposals(records, key)
    card_url = str(snapshot.get("url") or "") or issue_url(explanation.pr_url or "", status.card)
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
        comments=web_addresses(kept_comments(records, key, status.card), card_url),
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
