"""The one escalation comment of a run: why pairbot stopped for a person, and what they do.

    render_escalation(Escalation) -> str   the owned body (no marker): same input, same text

A `when …` gate whose condition fires does not park silently: the card carries
`pr-state:escalated` and one comment on it (marker `escalation #<card> run:<run>`, so a second
escalation in the same run edits it rather than adding another) names the gate, the conditions
that fired and the commands that go on. The review's own escalations use the same one comment:
`review` (a finding handed to a person: `pr-state:escalate`) and `history-rewrite` (a finding
only a rewrite of the branch's history fixes); their "conditions" are the finding ids. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.domain.text import mdtext

Stage = Literal["prepare", "merge", "review", "history-rewrite"]
REVIEW_STAGES: tuple[Stage, ...] = ("review", "history-rewrite")

_AFTER: dict[Stage, str] = {
    "prepare": "after its plan was proposed, before any code",
    "merge": "at the merge of its review-approved pull request",
    "review": "after a review handed a finding to a person, before any red, seal or fix",
    "history-rewrite": "after a review found what only a rewrite of the branch's Git history "
    "fixes, before any red, seal or fix",
}
_GOES_ON: dict[Stage, str] = {
    "prepare": "Comment `/{t} approve` to build the plan as proposed, or "
    "`/{t} feedback <what to change>` to revise it.",
    "merge": "Comment `/{t} approve` to merge the reviewed head, or merge it yourself.",
    "review": "Decide, then comment `/{t} retry`: the next review reads your word.",
    "history-rewrite": "Rewrite the branch's history and push it, then comment `/{t} retry`: "
    "the new head is reviewed afresh. No command waives it.",
}


@dataclass(frozen=True)
class Escalation:
    """What stopped the card: the gate as written, the conditions that fired, the trigger."""

    card: int
    stage: Stage
    gate: str
    conditions: tuple[str, ...]
    trigger: str = "pair"


def render_escalation(e: Escalation) -> str:
    """The comment's owned body (see the module docstring)."""
    fired = ", ".join(mdtext.code(c) for c in e.conditions) or "none recorded"
    goes_on = _GOES_ON[e.stage].format(t=e.trigger)
    if e.stage in REVIEW_STAGES:
        why = f"pairbot stopped {_AFTER[e.stage]}: finding {fired} — {mdtext.inline(e.gate)}"
    else:
        why = (
            f"pairbot stopped {_AFTER[e.stage]}: the `{e.stage}` gate "
            f"{mdtext.code(e.gate)} needs a person when one of its conditions holds, and "
            f"{fired} did."
        )
    return "\n".join([f"### pairbot escalated card #{e.card}", "", why, "", goes_on])
