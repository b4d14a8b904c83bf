"""The card's autonomy gates: `prepare:` (after propose) and `merge:` (before merging).

Each is `always`, `never`, or `when has:<labels> lacks:<labels>` (labels comma-separated;
`;` may separate the clauses). `always` parks for a human, `never` goes on
unattended, `when …` parks (escalates) only if a condition fires: the card carries one of the
`has` labels, or lacks one of the `lacks` labels.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

_CLAUSE = re.compile(r"(?P<key>has|lacks)\s*:\s*(?P<labels>[^\s;]+)")
ALLOWED_GATE_FORMS = "always | never | when has:<labels> lacks:<labels>"


@dataclass(frozen=True)
class GateCondition:
    """A parsed `prepare:` / `merge:` value."""

    mode: Literal["always", "never", "when"]
    has: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The canonical written form, which `parse_gate_condition` reads back to this value."""
        if self.mode != "when":
            return self.mode
        clauses = [f"has:{','.join(self.has)}"] if self.has else []
        clauses += [f"lacks:{','.join(self.lacks)}"] if self.lacks else []
        return " ".join(["when", *clauses])

    def fires(self, labels: Collection[str]) -> bool:
        """Whether a human is needed: always, never, or a `when` condition that holds."""
        if self.mode != "when":
            return self.mode == "always"
        present = set(labels)
        return any(label in present for label in self.has) or any(
            label not in present for label in self.lacks
        )

    def fired(self, labels: Collection[str]) -> tuple[str, ...]:
        """The `when` conditions that hold on `labels`, as written (`has:x`, `lacks:y`)."""
        present = set(labels)
        has = tuple(f"has:{label}" for label in self.has if label in present)
        lacks = tuple(f"lacks:{label}" for label in self.lacks if label not in present)
        return has + lacks


def parse_gate_condition(text: str) -> GateCondition:
    """Parse a gate value; raise ValueError naming the allowed forms."""
    value = text.strip()
    if value in ("always", "never"):
        return GateCondition(mode=value)  # type: ignore[arg-type]  # narrowed by the test above
    if re.match(r"when(?:[\s;]|$)", value):
        rest = value[len("when") :].strip().lstrip(";").strip()
        clauses = [c.strip() for c in re.split(r"[;\s]+(?=has|lacks)", rest) if c.strip()]
        has: list[str] = []
        lacks: list[str] = []
        for clause in clauses:
            match = _CLAUSE.fullmatch(clause)
            if match is None:
                break
            labels = [part for part in match.group("labels").split(",") if part]
            (has if match.group("key") == "has" else lacks).extend(labels)
        else:
            if has or lacks:
                return GateCondition(mode="when", has=tuple(has), lacks=tuple(lacks))
    raise ValueError(f"{text!r} is not a gate; allowed: {ALLOWED_GATE_FORMS}")
