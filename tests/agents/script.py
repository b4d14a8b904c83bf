"""What a scripted model does in the agent matrix (tests/agents/matrix.py), for any vendor.

A real model reads its instructions and acts on them; the scripted servers do the same two
things, in order, with the CLI's own tools:

    1. edit: write `Step.target` with `Step.content` (the CLI's file-writing tool)
    2. report: run the prompt's own `… batch report --complete "…"` line (the CLI's shell tool),
       pairbot named exactly as the prompt's "How to report" block names it (a verifier
       appends its findings file: `--findings review.json`)
    3. then end the turn with a short text

`stage` says which of these a request is at, from the tool results the conversation carries;
`report_command` copies the report line out of the prompt, as a model would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

SUMMARY = "wrote the plan"
FINAL_TEXT = "Done: the plan is written and reported."
# app/engine/instructions.py `_report_block`: `  <pairbot> batch report --complete "<…>"`.
_REPORT_LINE = re.compile(
    r"^\s*(?P<run>\S.*? batch report) --complete \"<one-line summary>\"", re.MULTILINE
)


def strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON request body."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def report_command(body: Any, *, summary: str = SUMMARY, findings: str | None = None) -> str:
    """The completion report the prompt in `body` asks for, as a shell command line; a
    verifier's carries its verdict as `summary` and its findings file (`--findings`)."""
    for text in strings(body):
        match = _REPORT_LINE.search(text)
        if match:
            line = f'{match["run"]} --complete "{summary}"'
            return f"{line} --findings {findings}" if findings else line
    raise AssertionError("the request carries no 'How to report' block")


def stage(tool_results: int) -> str:
    """`edit`, `report` or `end`, from how many tool results the conversation already holds."""
    return ("edit", "report")[tool_results] if tool_results < 2 else "end"
