"""Reading a change's `plan.md`: its task checkboxes, which say how far `apply` has got.

A task is a Markdown list item with a checkbox: `- [ ] …` (open) or `- [x] …` / `- [X] …`
(done); `*` and `+` bullets and indentation are accepted. Checkboxes inside fenced code blocks
are examples, not tasks, and are not counted. As in CommonMark, a block ends only at a bare
fence of the same character at least as long as the one that opened it, so a `~~~` line inside
a backtick block, or a three-backtick line inside a four-backtick block, does not end it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TASK = re.compile(r"^\s*[-*+]\s+\[(?P<mark>[ xX])\]\s")
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class TaskCount:
    """How many task checkboxes a plan has, and how many are checked."""

    total: int
    complete: int


def count_tasks(plan_text: str) -> TaskCount:
    """Count `- [ ]` / `- [x]` task lines outside fenced code blocks."""
    total = complete = 0
    open_fence: str | None = None  # the fence that opened the current code block
    for line in plan_text.splitlines():
        fence = _FENCE.match(line)
        if open_fence is None:
            if fence is not None:
                open_fence = fence.group("fence")
                continue
        else:
            if (
                fence is not None
                and fence.group("fence")[0] == open_fence[0]
                and len(fence.group("fence")) >= len(open_fence)
                and not fence.group("info").strip()
            ):
                open_fence = None
            continue
        match = _TASK.match(line)
        if match:
            total += 1
            if match.group("mark") in "xX":
                complete += 1
    return TaskCount(total=total, complete=complete)
