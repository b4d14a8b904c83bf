"""The `/pair status` explanation of one card: status, next step, blocking gate and why, budget.

docs/cycle.md ("Commands"): `status` replies with the card's status, the next step, which gate
blocks it and why, and the budget left. The same `Explanation` feeds the tracking comment
(`app.domain.reports.tracking`), the Action's job summary and the CLI, so all of them say the same
thing. `explain(CardFacts) -> Explanation` is pure: the shell gathers the facts (journal,
run-state, host) and renders the result with `to_markdown`, `to_text` or `to_json`.

Which gate holds a card, unless the facts name one (`CardFacts.gate`):

    awaiting-approval         prepare         the plan waits for `/pair approve`
    awaiting-human, escalated merge           the reviewed head waits for `/pair approve`
    awaiting-scope-decision   scope-decision  the maintainer's scope-decision comment on the PR

`what_you_can_do` lists the exact commands (with the configured trigger word) that move the
card on from where it is; an entry that is not a command (a scope decision is a PR comment,
a closed PR must be reopened) says what to do instead.

Budget figures keep their coverage: an unknown token count reads "unknown (0 of 3 steps
reported)", never 0 (docs/cycle.md). Text that a person or an agent wrote (the title, a park reason)
is stripped of hidden content here and escaped where it is rendered as Markdown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, get_args

from app.domain.reports.metrics import reduce_metrics
from app.domain.reports.metrics_model import Quantity
from app.domain.text import mdtext
from hosts.labels import PrState
from hosts.vocabulary import GITHUB, Vocabulary

NextStep = Literal["propose", "apply", "verify", "red", "verify-red", "fix", "publish", "merge"]
GateKind = Literal["prepare", "merge", "batch-gate", "scope-decision"]
Until = Literal["ready-for-merge", "merged"]

_SHA: Final = re.compile(r"[0-9a-fA-F]{40}")
_TRIGGER: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")  # as `.pair/config.yaml` allows
_REASON_LIMIT: Final = 500

NEXT_TEXT: Final[Mapping[str, str]] = {
    "propose": "refine the card into acceptance criteria and a plan",
    "apply": "implement the plan test-first on the card's branch",
    "verify": "an independent review of the pushed head",
    "red": "write failing tests for the blocking findings",
    "verify-red": "an independent agent accepts or refuses red's contract, row by row",
    "fix": "make the sealed failing tests pass",
    "publish": "publish the synthesis comment and read it back",
    "merge": "merge the reviewed head (the merge gate decides)",
}
GATE_TEXT: Final[Mapping[str, str]] = {
    "prepare": "the prepare gate",
    "merge": "the merge gate",
    "batch-gate": "the batch gate",
    "scope-decision": "the scope decision",
}


# A step that failed (its agent crashed, its result was refused until it gave up, its review
# could not be trusted) parks the card under one of these; `/pair retry` runs it again.
FAILED_WHY: Final[Mapping[str, str]] = {
    "failed-preparation": "refining the card into criteria and a plan failed",
    "failed-implement": "implementing the plan failed",
    "failed-verify": "the review could not be completed or trusted",
    "failed-contract": "the red tests did not make a complete contract for the findings, "
    "three times in a row (red's own checks, or the red contract verifier's refusals)",
    "failed-seal": "the contract could not be sealed",
}

# The contract and seal path's other stops (docs/cycle.md, "The contract and its seal"): what
# each means; none is cleared by running the same step again unchanged.
HELD_WHY: Final[Mapping[str, str]] = {
    "failed-custody": "the sealed tests are not what was sealed on the branch's head; the "
    "trusted snapshot is kept and nothing was reset",
    "failed-resume": "the run-state of this card cannot be resumed",
    "incompatible": "the run-state was written by a workflow this pairbot cannot resume",
    "escalate": "the review handed a decision to a person",
    "target-ready": "the command's target is reached: the plan is ready",
}


def _check_sha(name: str, value: str | None) -> None:
    if value is not None and _SHA.fullmatch(value) is None:
        raise ValueError(f"{name} must be a 40-hex commit SHA, got {value!r}")


@dataclass(frozen=True)
class CardFacts:
    """What the shell knows about one card; validated on construction.

    `status` is a `pr-state` status name (`awaiting-approval`); `next_step` the step that runs
    when nothing holds the card. `tokens` / `cost` are the cycle's usage with coverage; when
    absent they are reduced from `records` (the card's journal records), else unknown.
    An empty `pr_url` means unknown.
    """

    card: int
    status: str
    next_step: str | None = None
    title: str = ""
    park_reason: str | None = None
    gate: GateKind | None = None
    gate_why: str | None = None
    fix_rounds_used: int = 0
    max_fix_rounds: int = 3
    review_round: int = 0  # reviews run so far
    open_blocking: int = 0
    pending_scope: int = 0
    pr: int | None = None
    pr_url: str | None = None
    pr_closed: bool = False  # `/pair abandon` closed the PR
    reviewed_head: str | None = None
    current_head: str | None = None
    until: Until = "ready-for-merge"
    merge_gate: str = "always"
    prepare_gate: str = "always"
    tokens: Quantity | None = None
    cost: Quantity | None = None
    records: tuple[Mapping[str, Any], ...] = ()
    trigger: str = "pair"

    def __post_init__(self) -> None:
        PrState.of(self.status)  # ValueError naming the allowed statuses
        if self.next_step is not None and self.next_step not in get_args(NextStep):
            allowed = ", ".join(get_args(NextStep))
            raise ValueError(f"next_step must be one of {allowed} or None, got {self.next_step!r}")
        if self.gate is not None and self.gate not in get_args(GateKind):
            raise ValueError(f"gate must be one of {get_args(GateKind)}, got {self.gate!r}")
        if self.until not in get_args(Until):
            raise ValueError(f"until must be one of {get_args(Until)}, got {self.until!r}")
        _check_sha("reviewed_head", self.reviewed_head)
        _check_sha("current_head", self.current_head)
        for name in ("fix_rounds_used", "max_fix_rounds", "review_round", "open_blocking"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.pending_scope < 0:
            raise ValueError(f"pending_scope must be >= 0, got {self.pending_scope}")
        if not _TRIGGER.fullmatch(self.trigger):
            raise ValueError(f"trigger must be a word like 'pair', got {self.trigger!r}")


@dataclass(frozen=True)
class Explanation:
    """Why a card is where it is and what moves it on. Render with `to_*`."""

    card: int
    title: str
    status: str
    label: str  # the `pr-state:*` label
    next: str | None
    gate: GateKind | None
    why: str
    budget: str
    what_you_can_do: tuple[str, ...]
    pr: int | None = None
    pr_url: str | None = None
    reviewed_head: str | None = None
    fix_rounds_used: int = 0
    max_fix_rounds: int = 0
    tokens: Quantity | None = None
    cost: Quantity | None = None

    @property
    def next_text(self) -> str:
        """The next step with what it does (`verify: an independent review …`), or "none"."""
        if self.next is None:
            return "none"
        return f"{self.next}: {NEXT_TEXT[self.next]}"

    @property
    def gate_text(self) -> str:
        """Which gate holds the card, or "nothing blocks"."""
        return GATE_TEXT[self.gate] if self.gate is not None else "nothing blocks"

    def _heading(self) -> str:
        title = f" — {self.title}" if self.title else ""
        pr = f" (PR #{self.pr})" if self.pr is not None else ""
        return f"Card #{self.card}{title}{pr}"

    def to_text(self) -> str:
        """Plain text for a terminal or a log (hidden content already stripped)."""
        lines = [
            self._heading(),
            f"status: {self.status} ({self.label})",
            f"next: {self.next_text}",
            f"gate: {self.gate_text}",
            f"why: {self.why}",
            f"budget: {self.budget}",
        ]
        if self.what_you_can_do:
            lines.append("what you can do: " + "; ".join(self.what_you_can_do))
        return "\n".join(lines)

    def to_markdown(self, words: Vocabulary = GITHUB) -> str:
        """A Markdown section: every piece of user or agent text escaped."""
        heading = f"**Card #{self.card}**"
        if self.title:
            heading += f" — {mdtext.inline(self.title, 200)}"
        if self.pr is not None:
            heading += " · " + mdtext.link(f"PR #{self.pr}", self.pr_url)
        actions = ", ".join(
            mdtext.code(item, in_table=False) if item.startswith("/") else mdtext.inline(item)
            for item in self.what_you_can_do
        )
        lines = [
            heading,
            "",
            f"- **Status:** `{self.status}` ({words.label} `{self.label}`)",
            f"- **Next step:** {mdtext.inline(self.next_text)}",
            f"- **Blocked by:** {mdtext.inline(self.gate_text)}",
            f"- **Why:** {mdtext.inline(self.why)}",
            f"- **Budget:** {mdtext.inline(self.budget)}",
            f"- **What you can do:** {actions or 'nothing: the cycle is over'}",
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (camelCase keys; unknown usage figures carry their coverage)."""
        return {
            "card": self.card,
            "title": self.title,
            "status": self.status,
            "label": self.label,
            "next": self.next,
            "gate": self.gate,
            "why": self.why,
            "budget": self.budget,
            "whatYouCanDo": list(self.what_you_can_do),
            "pr": self.pr,
            "prUrl": self.pr_url,
            "reviewedHead": self.reviewed_head,
            "fixRounds": {"used": self.fix_rounds_used, "max": self.max_fix_rounds},
            "tokens": self.tokens.to_json() if self.tokens is not None else None,
            "costUsd": self.cost.to_json() if self.cost is not None else None,
        }


# ---------------------------------------------------------------- the pieces


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _short(sha: str | None) -> str:
    return sha[:12].lower() if sha else "?"


def _figure(name: str, quantity: Quantity | None, shown: str) -> str:
    """`tokens: 12,340 (3 of 3 steps reported)`, `… at least …`, or `unknown (0 of 3 …)`."""
    if quantity is None:
        return f"{name}: unknown (not reported)"
    if quantity.total == 0:
        return f"{name}: unknown (no agent step yet)"
    of = f"{quantity.reported} of {_plural(quantity.total, 'step')} reported"
    if quantity.value is None:
        return f"{name}: unknown ({of})"
    if quantity.coverage == "partial":
        return f"{name}: at least {shown} ({of})"
    return f"{name}: {shown} ({of})"


def _usage(facts: CardFacts) -> tuple[Quantity | None, Quantity | None]:
    tokens, cost = facts.tokens, facts.cost
    if (tokens is None or cost is None) and facts.records:
        # `as_of` only labels the metrics; the figures used here do not depend on it.
        metrics = reduce_metrics(facts.records, as_of="")
        tokens = tokens if tokens is not None else metrics.tokens
        cost = cost if cost is not None else metrics.cost_usd
    return tokens, cost


def _budget(facts: CardFacts, tokens: Quantity | None, cost: Quantity | None) -> str:
    rounds = f"fix rounds: {facts.fix_rounds_used} of {facts.max_fix_rounds} used"
    if facts.max_fix_rounds and facts.fix_rounds_used >= facts.max_fix_rounds:
        rounds += " (none left)"
    token_text = f"{int(tokens.value):,}" if tokens and tokens.value is not None else ""
    cost_text = f"${cost.value:,.4f}" if cost and cost.value is not None else ""
    return "; ".join(
        [
            rounds,
            f"reviews: {facts.review_round}",
            _figure("tokens", tokens, token_text),
            _figure("cost", cost, cost_text),
        ]
    )


def _default_gate(status: str) -> GateKind | None:
    if status == "awaiting-approval":
        return "prepare"
    if status in ("awaiting-human", "escalated"):
        return "merge"
    if status == "awaiting-scope-decision":
        return "scope-decision"
    return None


def _on_pr(facts: CardFacts) -> str:
    return f"PR #{facts.pr}" if facts.pr is not None else "the card's PR"


def _gate_why(facts: CardFacts, gate: GateKind) -> str:
    if gate == "prepare":
        return (
            f'the plan waits for a maintainer\'s approval (prepare gate "{facts.prepare_gate}"); '
            "the tracking comment shows the plan"
        )
    if gate == "merge":
        head = f"reviewed head {_short(facts.reviewed_head)}"
        if facts.status == "escalated":
            return (
                f'merge gate "{facts.merge_gate}": a condition fired, so the {head} waits '
                "for a maintainer to approve the merge"
            )
        return f'merge gate "{facts.merge_gate}": the {head} waits for a maintainer to approve it'
    if gate == "scope-decision":
        return (
            "quality converged; "
            f"{_plural(facts.pending_scope, 'scope proposal')} await the maintainer's decision "
            f"on {_on_pr(facts)} (one fenced JSON comment: ignore, new-card or "
            "extend-current-card)"
        )
    return "the batch's gate holds this phase until a maintainer approves it"


def _status_why(facts: CardFacts) -> str:
    """Why a card that no gate holds is where it is."""
    status, reason = facts.status, facts.park_reason
    if status == "needs-input":
        return f"the agent needs an answer: {reason}" if reason else "the agent needs an answer"
    if status == "blocked":
        return reason or "the last step is blocked"
    if status == "failed-fix":
        return (
            f"{_plural(facts.fix_rounds_used, 'fix round')} spent (maxFixRounds "
            f"{facts.max_fix_rounds}) and the review still has "
            f"{_plural(facts.open_blocking, 'blocking finding')}"
        )
    if status == "failed-publication":
        return "the synthesis comment could not be confirmed; only its publication is retried"
    if status in HELD_WHY:
        return f"{HELD_WHY[status]}: {reason}" if reason else HELD_WHY[status]
    if status in FAILED_WHY:
        return f"{FAILED_WHY[status]}: {reason}" if reason else FAILED_WHY[status]
    if status == "ready-for-merge":
        if facts.until == "merged":
            return (
                f"converged and published at {_short(facts.reviewed_head)}; "
                "the merge gate decides next"
            )
        return (
            f"converged and review-approved at {_short(facts.reviewed_head)}; the merge is yours "
            "(until: ready-for-merge)"
        )
    if status == "merged":
        return "the PR is merged; the cycle is complete"
    if status == "abandoned":
        closed = f"; {_on_pr(facts)} was closed" if facts.pr_closed else ""
        return f"the cycle was abandoned{closed}; everything is kept for the record"
    if status == "interrupted":
        return reason or f"{_on_pr(facts)} was closed without merging"
    # ready, in-progress, awaiting-verify: nothing holds the card.
    if facts.next_step is None:
        return reason or "nothing is runnable right now"
    why = f"nothing blocks: the next step runs {facts.next_step}"
    if facts.next_step in ("red", "verify-red", "fix") and facts.open_blocking:
        why += (
            f" (the last review left {_plural(facts.open_blocking, 'blocking finding')}; "
            f"fix round {facts.fix_rounds_used + 1} of {facts.max_fix_rounds})"
        )
    return why


def _actions(facts: CardFacts, gate: GateKind | None) -> tuple[str, ...]:
    t = f"/{facts.trigger}"
    status = facts.status
    if gate in ("prepare", "batch-gate"):
        return (f"{t} approve", f"{t} feedback <text>", f"{t} abandon")
    if gate == "merge":
        return (f"{t} approve", f"{t} abandon")
    if gate == "scope-decision":
        return (
            f"reply on {_on_pr(facts)} with a scope decision (one fenced JSON object)",
            f"{t} abandon",
        )
    if status == "needs-input":
        return (f"{t} answer <text>", f"{t} abandon")
    if status == "blocked":
        return (f"{t} retry", f"{t} feedback <text>", f"{t} abandon")
    if status == "failed-publication":
        return (f"{t} retry", f"{t} abandon")
    if status == "failed-custody":
        return (f"push the sealed tests back as sealed, then {t} retry", f"{t} abandon")
    if status in ("failed-resume", "incompatible"):
        card = f"card-{facts.card}"
        return (f"pairbot clean {card} --archive-run, then {t} implement", f"{t} abandon")
    if status == "escalate":
        return (f"decide, then {t} retry (the next review reads your word)", f"{t} abandon")
    if status == "target-ready":
        return (f"{t} implement", f"{t} abandon")
    if status in FAILED_WHY:
        return (f"{t} retry", f"{t} feedback <text>", f"{t} abandon")
    if status.startswith("failed-"):
        return (f"{t} feedback <text>", f"{t} abandon")
    if status == "ready-for-merge":
        if facts.until == "merged":
            return (f"{t} abandon",)
        return (f"merge {_on_pr(facts)}", f"{t} implement until: merged")
    if status == "interrupted":
        if facts.park_reason:  # a run died mid-step (the reason says which)
            return (f"{t} retry", f"{t} abandon")
        return (f"reopen {_on_pr(facts)}, then {t} implement", f"{t} abandon")
    if status in ("merged", "abandoned"):
        return ()
    return (f"{t} implement", f"{t} abandon")


def explain(facts: CardFacts) -> Explanation:
    """The card's status, next step, blocking gate and why, budget and the commands to use."""
    # Agent or human text that is empty once hidden content and blank space are gone says
    # nothing: treat it as absent, so the built-in explanation shows instead of a blank.
    facts = replace(
        facts,
        park_reason=mdtext.one_line(facts.park_reason or "") or None,
        gate_why=mdtext.one_line(facts.gate_why or "") or None,
    )
    gate = facts.gate if facts.gate is not None else _default_gate(facts.status)
    if gate is not None:
        why = facts.gate_why or _gate_why(facts, gate)
        if facts.park_reason and gate != "scope-decision":
            why += f" — {facts.park_reason}"
    else:
        why = _status_why(facts)
    moved = (
        facts.reviewed_head is not None
        and facts.current_head is not None
        and facts.reviewed_head.lower() != facts.current_head.lower()
        and facts.status not in ("merged", "abandoned")
    )
    if moved:
        why += (
            f"; the PR head moved from the reviewed {_short(facts.reviewed_head)} to "
            f"{_short(facts.current_head)}, so the next review is a delta re-review"
        )
    tokens, cost = _usage(facts)
    next_step = None if facts.status in ("merged", "abandoned") else facts.next_step
    return Explanation(
        card=facts.card,
        title=mdtext.one_line(facts.title, 200),
        status=facts.status,
        label=PrState.of(facts.status).value,
        next=next_step,
        gate=gate,
        why=mdtext.one_line(why, _REASON_LIMIT),
        budget=_budget(facts, tokens, cost),
        what_you_can_do=_actions(facts, gate),
        pr=facts.pr,
        pr_url=mdtext.safe_url(facts.pr_url or None),
        reviewed_head=facts.reviewed_head.lower() if facts.reviewed_head else None,
        fix_rounds_used=facts.fix_rounds_used,
        max_fix_rounds=facts.max_fix_rounds,
        tokens=tokens,
        cost=cost,
    )
