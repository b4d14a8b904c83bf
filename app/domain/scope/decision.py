"""The maintainer's scope decision: check the comment, then apply it mechanically. Pure.

Once a review converges with scope proposals (`sc-<n>`) still pending, the card parks at
`awaiting-scope-decision` and the packet asks the maintainer to answer in a PR comment holding
exactly one fenced ```json object (docs/cycle.md; "Scope proposals are
never defects")::

    {"schemaVersion": 1,
     "scopeBaselineHash": "sha256:…",            # scope_baseline_hash(pending), from the packet
     "decisions": [
       {"id": "sc-1", "action": "ignore", "rationale": "out of scope"},
       {"id": "sc-2", "action": "new-card", "targetIssueUrl": "https://…/issues/9"},
       {"id": "sc-3", "action": "extend-current-card",
        "approvedDelta": {"ac": "AC-2", "text": "Locked accounts see the lockout notice."}}]}

- `action` is one of `ignore | new-card | extend-current-card`.
- `rationale` (optional, text) is recorded with the disposition.
- `targetIssueUrl` (optional, http(s) URL, `new-card` only) names a card the maintainer already
  filed; no card is created then. Without it `new-card` creates one (effect `NewCard`).
- `approvedDelta` (required for `extend-current-card`, refused for the other actions) is
  `{"ac": "AC-<n>", "text": "<the approved criterion text>"}`: the AC to rewrite in place in the
  card body and its new text (one line for colon / checkbox criteria; Given/When/Then clause
  lines for a Given/When/Then criterion — see `app.domain.scope.acceptance`).
- Unknown keys are refused at every level; decisions need not cover every pending proposal
  (the rest stay pending).

`scope_baseline_hash` covers the pending proposals' ids and types only, sorted, never their
wording: a reviewer re-authoring the evidence text does not stale a standing decision.

`validate_decision` returns a `ScopeDecision` or the first `Refusal` (`app.domain.scope.refusal`)
in this order (the JSON itself is read by `app.domain.scope.decision_json`); every
refusal is user-facing (rendered into the reply) and names what was wrong and what is allowed:

    maintainer-unresolved       no `maintainer` in config and not exactly one code-host assignee
    author-is-bot               the comment is a bot's (a login ending in `[bot]` counts)
    not-maintainer              the author is not the maintainer (logins compared ignoring case)
    no-decision                 no ```json fence a reader of the comment sees: quoted `> `
                                lines, HTML comments (`<!-- ```json … ``` -->`), hidden
                                elements (`<div hidden>`, a hiding style; `<details>` is
                                seen) and fences spelled with entities do not count
    malformed-json              more than one json fence, an unclosed fence, text that is not
                                JSON, a duplicate key, JSON that is not an object (with lines),
                                or arrays and objects nested deeper than `MAX_JSON_DEPTH`
                                (checked by one linear scan before `json.loads`, whose
                                recursion a stranger's 100,000 `[` would otherwise exhaust)
    unsupported-schema-version  schemaVersion is not 1
    invalid-decision            a missing, mistyped or unknown field
    unknown-action              an action outside ignore | new-card | extend-current-card
    duplicate-id                one proposal decided twice
    stale-baseline              scopeBaselineHash is not the hash of what is pending now
    unknown-proposal            an id that is not pending
    conflicting-delta           two extend-current-card decisions rewrite the same AC

The decision is applied in two pure steps, before any write:

1. `rewrite_card(body, decision)`: every approved delta rewritten into the card's ACTUAL body,
   or the acceptance refusal (`unsupported-card-format`, `ac-id-unresolvable`,
   `ambiguous-ac-id`, …) — a refused rewrite changes nothing: no edit, no epoch bump.
2. `apply_decisions(state, decision)`: the state transition and the effects for the shell
   (`NewCard`, `ExtendCard`, `OpenRemediationRound`). `extend-current-card` bumps `scope_epoch`
   exactly once per decision, however many ACs it extends. A decision is keyed by its comment
   id (`decision_ref`): replaying it is a no-op — no effects, no epoch bump. An edited comment
   keeps its id, so a corrected decision is a new comment.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from app.domain.review.verdict import ScopeChange
from app.domain.scope.acceptance import AcceptanceError, ac_number, parse_ac_id, rewrite_criterion
from app.domain.scope.decision_json import parse_json
from app.domain.scope.refusal import Refusal
from app.domain.text.sanitize import visible_code
from hosts.models import Author, Comment

SCHEMA_VERSION: Final = 1
ScopeAction = Literal["ignore", "new-card", "extend-current-card"]
SCOPE_ACTIONS: Final[tuple[ScopeAction, ...]] = get_args(ScopeAction)

_TOP_KEYS: Final = ("schemaVersion", "scopeBaselineHash", "decisions")
_ITEM_KEYS: Final = ("id", "action", "rationale", "targetIssueUrl", "approvedDelta")
_DELTA_KEYS: Final = ("ac", "text")
_URL = re.compile(r"^https?://\S+$")
_ALLOWED_ACTIONS = " | ".join(SCOPE_ACTIONS)
_TITLE_MAX = 80


@dataclass(frozen=True)
class ApprovedDelta:
    """The AC an `extend-current-card` decision rewrites, and its approved text."""

    ac: str
    text: str


@dataclass(frozen=True)
class DecisionItem:
    """The maintainer's answer for one proposal."""

    id: str
    action: ScopeAction
    rationale: str | None = None
    target_issue_url: str | None = None
    approved_delta: ApprovedDelta | None = None


@dataclass(frozen=True)
class ScopeDecision:
    """A validated decision; `ref` (the comment id) is what a replay is recognised by."""

    ref: str
    author: str
    baseline_hash: str
    decisions: tuple[DecisionItem, ...]
    url: str = ""


@dataclass(frozen=True)
class Disposition:
    """What became of one proposal, for the record and the synthesis's scope table."""

    id: str
    type: str
    action: ScopeAction
    decision_ref: str
    rationale: str | None = None
    target_issue_url: str | None = None
    ac: str | None = None


@dataclass(frozen=True)
class ScopeState:
    """The scope ledger of one card: what is pending, what was decided, the scope epoch."""

    pending: tuple[ScopeChange, ...] = ()
    applied_refs: tuple[str, ...] = ()
    scope_epoch: int = 0
    dispositions: tuple[Disposition, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class NewCard:
    """Create a card for a proposal split out of this one."""

    title: str
    body: str
    proposal_id: str


@dataclass(frozen=True)
class ExtendCard:
    """Rewrite `ac` in place in the card body with `text` (see `rewrite_card`)."""

    ac: str
    text: str
    proposal_id: str


@dataclass(frozen=True)
class OpenRemediationRound:
    """Run one targeted remediation round for the extended ACs, through the ordinary pipeline."""

    scope_epoch: int
    acs: tuple[str, ...]
    decision_ref: str


Effect = NewCard | ExtendCard | OpenRemediationRound


# ---------------------------------------------------------------- the baseline


def scope_baseline_hash(proposals: Sequence[ScopeChange]) -> str:
    """`sha256:<hex>` over the proposals' (id, type) pairs, sorted; the wording is left out."""
    pairs = sorted((p.id, p.type) for p in proposals)
    canonical = json.dumps(pairs, separators=(",", ":"), ensure_ascii=True)
    return f"sha256:{hashlib.sha256(canonical.encode()).hexdigest()}"


def _listing(proposals: Sequence[ScopeChange]) -> str:
    if not proposals:
        return "none is pending"
    return ", ".join(f"{p.id} ({p.type})" for p in proposals)


# ---------------------------------------------------------------- who may decide


def resolve_maintainer(maintainer: str | None, assignees: Sequence[str]) -> str | Refusal:
    """The configured `maintainer`, else the code host's only assignee."""
    configured = (maintainer or "").strip().lstrip("@")
    if configured:
        return configured
    unique: dict[str, str] = {}  # casefolded login -> the first spelling seen
    for assignee in assignees:
        login = assignee.strip().lstrip("@")
        if login:
            unique.setdefault(login.casefold(), login)
    logins = list(unique.values())
    if len(logins) == 1:
        return logins[0]
    found = "no assignee" if not logins else f"{len(logins)} assignees ({', '.join(logins)})"
    return Refusal(
        "maintainer-unresolved",
        f"no maintainer is configured and the pull request has {found}, so nobody may decide "
        "scope; set `maintainer: <login>` in .pair/config.yaml, or assign exactly one person "
        "to the pull request.",
    )


# ---------------------------------------------------------------- checking its shape


def _unknown_keys(where: str, data: Mapping[str, Any], allowed: Sequence[str]) -> list[str]:
    return [
        f"{where} has the unknown key {key!r} (allowed: {', '.join(allowed)})"
        for key in data
        if key not in allowed
    ]


def _item_problems(index: int, raw: Any) -> list[str]:
    where = f"decisions[{index}]"
    if not isinstance(raw, dict):
        return [f"{where} is a JSON {type(raw).__name__}; each decision is an object"]
    problems = _unknown_keys(where, raw, _ITEM_KEYS)
    for key in ("id", "action"):
        if key not in raw:
            problems.append(f"{where} is missing {key!r}")
        elif not isinstance(raw[key], str) or not raw[key].strip():
            problems.append(f"{where}.{key} must be a non-empty string")
    if "rationale" in raw and not isinstance(raw["rationale"], str):
        problems.append(f"{where}.rationale must be a string")
    action = raw.get("action")
    if action not in SCOPE_ACTIONS:
        return problems  # reported as unknown-action once the shape is right
    url = raw.get("targetIssueUrl")
    if url is not None:
        if action != "new-card":
            problems.append(f"{where}.targetIssueUrl belongs only to a new-card decision")
        elif not isinstance(url, str) or not _URL.match(url.strip()):
            problems.append(f"{where}.targetIssueUrl must be an http(s) URL of the card")
    delta = raw.get("approvedDelta")
    if action != "extend-current-card":
        if "approvedDelta" in raw:
            problems.append(
                f"{where}.approvedDelta belongs only to an extend-current-card decision"
            )
        return problems
    if not isinstance(delta, dict):
        what = "is missing" if "approvedDelta" not in raw else "must be an object"
        problems.append(
            f'{where}.approvedDelta {what}: extend-current-card needs {{"ac": "AC-<n>", '
            '"text": "<the approved criterion>"}'
        )
        return problems
    problems += _unknown_keys(f"{where}.approvedDelta", delta, _DELTA_KEYS)
    if not isinstance(delta.get("ac"), str) or parse_ac_id(delta["ac"]) is None:
        problems.append(f"{where}.approvedDelta.ac must name an AC as AC-<n>, e.g. AC-2")
    if not isinstance(delta.get("text"), str) or not delta["text"].strip():
        problems.append(f"{where}.approvedDelta.text must be the approved criterion text")
    return problems


def _schema_refusal(data: Mapping[str, Any]) -> Refusal | None:
    if "schemaVersion" in data and (
        type(data["schemaVersion"]) is not int or data["schemaVersion"] != SCHEMA_VERSION
    ):
        return Refusal(
            "unsupported-schema-version",
            f"schemaVersion is {json.dumps(data['schemaVersion'])}; pairbot reads schemaVersion "
            f"{SCHEMA_VERSION} only.",
        )
    problems = _unknown_keys("the decision object", data, _TOP_KEYS)
    problems += [f"the decision object is missing {key!r}" for key in _TOP_KEYS if key not in data]
    if "scopeBaselineHash" in data and (
        not isinstance(data["scopeBaselineHash"], str) or not data["scopeBaselineHash"].strip()
    ):
        problems.append("scopeBaselineHash must be the hash string from the scope packet")
    decisions = data.get("decisions")
    if "decisions" in data:
        if not isinstance(decisions, list) or not decisions:
            problems.append("decisions must be a non-empty list of decision objects")
        else:
            for index, raw in enumerate(decisions):
                problems += _item_problems(index, raw)
    if not problems:
        return None
    return Refusal(
        "invalid-decision",
        "; ".join(problems) + ". Each decision is {id, action, rationale?, targetIssueUrl?, "
        "approvedDelta?}.",
    )


def _item(raw: Mapping[str, Any]) -> DecisionItem:
    delta = raw.get("approvedDelta")
    return DecisionItem(
        id=raw["id"].strip(),
        action=raw["action"],
        rationale=raw.get("rationale"),
        target_issue_url=raw["targetIssueUrl"].strip() if "targetIssueUrl" in raw else None,
        approved_delta=(
            ApprovedDelta(ac=delta["ac"].strip(), text=delta["text"].strip())
            if isinstance(delta, dict)
            else None
        ),
    )


def _author_refusal(author: Author, principal: str) -> Refusal | None:
    """Why `author` may not decide scope for `principal`, or None when they may."""
    if author.is_bot or author.login.lower().endswith("[bot]"):
        return Refusal(
            "author-is-bot",
            f"the decision comment was written by the bot {author.login!r}; only the "
            f"maintainer ({principal}) may decide scope, in a comment of their own.",
        )
    if author.login.casefold() != principal.casefold():
        return Refusal(
            "not-maintainer",
            f"the decision comment was written by {author.login!r}, who is not the maintainer; "
            f"only {principal} may decide scope.",
        )
    return None


def _duplicate_refusal(items: Sequence[DecisionItem]) -> Refusal | None:
    """The refusal for proposals decided more than once, or None."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.id] = counts.get(item.id, 0) + 1
    duplicates = [pid for pid, count in counts.items() if count > 1]
    if not duplicates:
        return None
    return Refusal(
        "duplicate-id",
        f"{', '.join(duplicates)} decided more than once; give each proposal one decision.",
    )


def _conflict_refusal(items: Sequence[DecisionItem]) -> Refusal | None:
    """The refusal for two approved deltas rewriting the same AC, or None."""
    by_ac: dict[int, list[str]] = {}
    for item in items:
        if item.approved_delta is not None:
            by_ac.setdefault(ac_number(item.approved_delta.ac), []).append(item.id)
    clashes = [f"{' and '.join(ids)} all extend AC-{n}" for n, ids in by_ac.items() if len(ids) > 1]
    if not clashes:
        return None
    return Refusal(
        "conflicting-delta",
        f"{'; '.join(clashes)}; approve one text per AC (merge them into one "
        "extend-current-card decision and ignore the others).",
    )


def is_deciders_decision(
    comment: Comment, *, maintainer: str | None, assignees: Sequence[str]
) -> bool:
    """Whether `comment` is one the one who decides wrote, holding a decision a reader sees:
    the comment to prefer when several hold one (`hosts.decisions.scope_decision_in`), so
    nobody else's later comment, and no decision hidden from readers, shadows it."""
    principal = resolve_maintainer(maintainer, assignees)
    if isinstance(principal, Refusal) or _author_refusal(comment.author, principal) is not None:
        return False
    seen = visible_code(comment.body)
    return seen is not None and any('"schemaVersion"' in line for line in seen)


def validate_decision(
    comment: Comment,
    *,
    maintainer: str | None,
    assignees: Sequence[str],
    pending: Sequence[ScopeChange],
) -> ScopeDecision | Refusal:
    """Check who wrote the comment and what it says, against the proposals pending now."""
    principal = resolve_maintainer(maintainer, assignees)
    if isinstance(principal, Refusal):
        return principal
    author = comment.author
    refused = _author_refusal(author, principal)
    if refused is not None:
        return refused
    # Only what a reader sees decides: the code blocks of the rendered comment, at their lines.
    seen = visible_code(comment.body)
    if seen is None:
        return Refusal(
            "malformed-json",
            "the comment is too complex to read safely (too many HTML elements or emphasis "
            "delimiters); post the decision alone: one ```json object.",
        )
    data = parse_json("\n".join(seen))
    if isinstance(data, Refusal):
        return data
    schema = _schema_refusal(data)
    if schema is not None:
        return schema
    raw_items: list[dict[str, Any]] = data["decisions"]

    unknown = [
        f"{r['id']} ({r['action']!r})" for r in raw_items if r["action"] not in SCOPE_ACTIONS
    ]
    if unknown:
        return Refusal(
            "unknown-action",
            f"unknown action for {', '.join(unknown)}; the action is one of {_ALLOWED_ACTIONS}.",
        )
    items = [_item(r) for r in raw_items]

    duplicated = _duplicate_refusal(items)
    if duplicated is not None:
        return duplicated

    current = scope_baseline_hash(pending)
    if data["scopeBaselineHash"].strip().lower() != current:
        return Refusal(
            "stale-baseline",
            f"scopeBaselineHash {data['scopeBaselineHash'].strip()!r} does not match the "
            f"proposals pending now ({_listing(pending)}); decide again against them with "
            f'"scopeBaselineHash": "{current}".',
        )

    pending_ids = {p.id for p in pending}
    strangers = [i.id for i in items if i.id not in pending_ids]
    if strangers:
        return Refusal(
            "unknown-proposal",
            f"{', '.join(strangers)} {'is' if len(strangers) == 1 else 'are'} not pending; "
            f"decide only pending proposals: {_listing(pending)}.",
        )

    clash = _conflict_refusal(items)
    if clash is not None:
        return clash
    return ScopeDecision(
        ref=comment.id,
        author=author.login,
        baseline_hash=current,
        decisions=tuple(items),
        url=comment.url,
    )


# ---------------------------------------------------------------- applying it


def rewrite_card(body: str, decision: ScopeDecision) -> str | Refusal:
    """The card body with every approved delta rewritten in place, or the refusal (no edit)."""
    for item in decision.decisions:
        if item.approved_delta is None:
            continue
        try:
            body = rewrite_criterion(body, item.approved_delta.ac, item.approved_delta.text)
        except AcceptanceError as err:
            return Refusal(err.code, f"{item.id} (extend-current-card): {err.message}")
    return body


def _summary(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= _TITLE_MAX else first[: _TITLE_MAX - 1].rstrip() + "…"


def _new_card(proposal: ScopeChange, item: DecisionItem, decision: ScopeDecision) -> NewCard:
    title = _summary(proposal.evidence) or f"{proposal.type} ({proposal.id})"
    source = decision.url or f"comment {decision.ref}"
    parts = [
        f"Scope proposal `{proposal.id}` (`{proposal.type}`), split out of another card by "
        f"the maintainer's scope decision ({source}).",
    ]
    if proposal.affected_ac:
        parts.append(f"Affected acceptance criterion: {proposal.affected_ac}")
    if proposal.evidence.strip():
        quoted = "\n".join(f"> {line}" if line else ">" for line in proposal.evidence.splitlines())
        parts.append(f"Evidence:\n\n{quoted}")
    if item.rationale:
        parts.append(f"Maintainer's rationale: {item.rationale}")
    return NewCard(title=title, body="\n\n".join(parts) + "\n", proposal_id=proposal.id)


def apply_decisions(
    state: ScopeState, decision: ScopeDecision
) -> tuple[ScopeState, tuple[Effect, ...]]:
    """Disposition every decided proposal; a replayed decision changes nothing.

    Precondition: `decision` was validated against `state.pending` (every id is pending).
    """
    if decision.ref in state.applied_refs:
        return state, ()
    by_id = {p.id: p for p in state.pending}
    missing = [i.id for i in decision.decisions if i.id not in by_id]
    if missing:
        raise ValueError(
            f"decision {decision.ref} names proposals that are not pending: {', '.join(missing)}"
            " (validate it against this state first)"
        )
    effects: list[Effect] = []
    dispositions: list[Disposition] = []
    extended: list[str] = []
    for item in decision.decisions:
        proposal = by_id[item.id]
        ac = item.approved_delta.ac if item.approved_delta is not None else None
        dispositions.append(
            Disposition(
                id=proposal.id,
                type=proposal.type,
                action=item.action,
                decision_ref=decision.ref,
                rationale=item.rationale,
                target_issue_url=item.target_issue_url,
                ac=ac,
            )
        )
        if item.action == "new-card" and item.target_issue_url is None:
            effects.append(_new_card(proposal, item, decision))
        elif item.approved_delta is not None:
            effects.append(
                ExtendCard(
                    ac=item.approved_delta.ac,
                    text=item.approved_delta.text,
                    proposal_id=proposal.id,
                )
            )
            extended.append(item.approved_delta.ac)
    epoch = state.scope_epoch
    if extended:
        epoch += 1
        effects.append(
            OpenRemediationRound(scope_epoch=epoch, acs=tuple(extended), decision_ref=decision.ref)
        )
    decided = {i.id for i in decision.decisions}
    new_state = replace(
        state,
        pending=tuple(p for p in state.pending if p.id not in decided),
        applied_refs=(*state.applied_refs, decision.ref),
        scope_epoch=epoch,
        dispositions=(*state.dispositions, *dispositions),
    )
    return new_state, tuple(effects)
