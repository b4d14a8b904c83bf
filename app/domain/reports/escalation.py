"""The one escalation comment of a run: why pairbot stopped for a person, and what they do.

    render_escalation(Escalation) -> str   the owned body (no marker): same input, same text

A `when …` gate whose condition fires does not park silently: the card carries
`pr-state:escalated` and one comment on it (marker `escalation #<card> run:<run>`, so a second
escalation in the same run edits it rather than adding another) names the gate, the conditions
that fired and the commands that go on. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.domain.text import mdtext

Stage = Literal["prepare", "merge"]

_AFTER: dict[Stage, str] = {
    "prepare": "after its plan was proposed, before any code",
    "merge": "at the merge of its review-approved pull request",
}
_GOES_ON: dict[Stage, str] = {
    "prepare": "to build the plan as proposed, or `/{t} feedback <what to change>` to revise it",
    "merge": "to merge the reviewed head, or merge it yourself",
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
    return "\n".join(
        [
            f"### pairbot escalated card #{e.card}",
            "",
            f"pairbot stopped {_AFTER[e.stage]}: the `{e.stage}` gate "
            f"{mdtext.code(e.gate)} needs a person when one of its conditions holds, and "
            f"{fired} did.",
            "",
            f"Comment `/{e.trigger} approve` {goes_on}.",
        ]
    )
