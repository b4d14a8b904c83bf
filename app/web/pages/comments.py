"""What a card's page shows beside its steps: the comments pairbot kept (with their web
addresses) and the scope proposals with the decisions taken on them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.web.pages.views import ACCEPTED, KeptComment, ScopeDecisionView, ScopeProposal

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

_GITHUB_PULL = re.compile(r"^(?P<repo>https://[^\s/]+/[^\s/]+/[^\s/]+)/pull/\d+$")


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


def web_addresses(comments: Sequence[KeptComment], card_url: str) -> tuple[KeptComment, ...]:
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
            if record.get("state") not in ACCEPTED:
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


def issue_url(pr_url: str, card: int) -> str:
    """The card's issue on GitHub, beside its pull request (`…/pull/2` → `…/issues/7`); ""
    elsewhere (an Azure DevOps work item lives in its project, not its repository)."""
    match = _GITHUB_PULL.match(pr_url)
    return f"{match.group('repo')}/issues/{card}" if match else ""
