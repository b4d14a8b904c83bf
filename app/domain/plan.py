"""Reading a change's `plan.md`: its task checkboxes, which say how far `apply` has got.

A task is a Markdown list item with a checkbox: `- [ ] …` (open) or `- [x] …` / `- [X] …`
(done); `*` and `+` bullets and indentation are accepted. Checkboxes inside fenced code blocks
are examples, not tasks, and are not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TASK = re.compile(r"^\s*[-*+]\s+\[(?P<mark>[ xX])\]\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class TaskCount:
    """How many task checkboxes a plan has, and how many are checked."""

    total: int
    complete: int

    @property
    def all_checked(self) -> bool:
        """Every task is checked, and there is at least one."""
        return self.total > 0 and self.complete == self.total


def count_tasks(plan_text: str) -> TaskCount:
    """Count `- [ ]` / `- [x]` task lines outside fenced code blocks."""
    total = complete = 0
    in_fence = False
    for line in plan_text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = _TASK.match(line)
        if match:
            total += 1
            if match.group("mark") in "xX":
                complete += 1
    return TaskCount(total=total, complete=complete)
