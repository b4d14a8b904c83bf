"""The one fenced ```json object a scope decision comment holds, read safely. Pure.

Fences inside quoted `> ` lines do not count; more than one ```json fence, an unclosed one,
text that is not JSON, a duplicate key, JSON that is not an object, or arrays and objects nested
deeper than `MAX_JSON_DEPTH` (checked by one linear scan before `json.loads`, whose recursion a
stranger's 100,000 `[` would otherwise exhaust) is a `malformed-json` refusal; no fence at all
is `no-decision`. What the object must hold is `app.domain.scope.decision`'s to check, and it
hands this module only the lines a reader sees as code (`app.domain.text.sanitize.visible_code`),
so a fence in an HTML comment or a hidden element never reaches it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from app.domain.scope.refusal import Refusal

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^ \t`]*)(?P<rest>.*)$")


class _DuplicateKeyError(ValueError):
    pass


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# A decision is an object of a list of flat objects: depth 3. The bound leaves room for any
# honest answer and stays far below the interpreter's recursion limit, in any thread.
MAX_JSON_DEPTH: Final = 32
_JSON_STRUCTURE = re.compile(r'[\[\]{}"\\]')


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """The offset where arrays and objects in `text` nest deeper than `limit`, or None.

    One pass over the brackets, quotes and backslashes (brackets inside strings do not count),
    so its cost is linear in `text` whatever it holds; malformed JSON is `json.loads`'s to
    refuse, this only decides whether it is safe to hand it over. Pure.
    """
    depth = 0
    in_string = False
    skip_to = 0  # the character after a backslash is escaped
    for match in _JSON_STRUCTURE.finditer(text):
        at = match.start()
        if at < skip_to:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip_to = at + 2
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return at
        elif char in "]}":
            depth = max(0, depth - 1)
    return None


def _json_blocks(body: str) -> list[tuple[int, str]] | Refusal:
    """(line of the opening fence, content) for every ```json fence outside quoted lines."""
    lines = body.split("\n")
    blocks: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index].removesuffix("\r"))
        if match is None or (match.group("fence")[0] == "`" and "`" in match.group("rest")):
            index += 1
            continue
        fence, opened = match.group("fence"), index
        closing = None
        for j in range(index + 1, len(lines)):
            end = _FENCE.match(lines[j].removesuffix("\r"))
            if (
                end is not None
                and end.group("fence")[0] == fence[0]
                and len(end.group("fence")) >= len(fence)
                and not (end.group("info") + end.group("rest")).strip()
            ):
                closing = j
                break
        is_json = match.group("info").lower() == "json"
        if closing is None:
            if is_json:
                return Refusal(
                    "malformed-json",
                    f"the ```json fence opened on line {opened + 1} is never closed; close it "
                    f"with a line holding only {fence}.",
                )
            break  # an unclosed other fence runs to the end: nothing after it counts
        if is_json:
            content = "\n".join(line.removesuffix("\r") for line in lines[opened + 1 : closing])
            blocks.append((opened + 1, content))
        index = closing + 1
    return blocks


def parse_json(body: str) -> dict[str, Any] | Refusal:
    """The decision object in `body`, or why it cannot be read."""
    blocks = _json_blocks(body)
    if isinstance(blocks, Refusal):
        return blocks
    if not blocks:
        return Refusal(
            "no-decision",
            "the comment holds no fenced ```json block; answer with one ```json object "
            '{"schemaVersion": 1, "scopeBaselineHash": …, "decisions": […]}.',
        )
    if len(blocks) > 1:
        where = ", ".join(str(line) for line, _ in blocks)
        return Refusal(
            "malformed-json",
            f"the comment holds {len(blocks)} fenced ```json blocks (lines {where}); post "
            "exactly one decision object per comment.",
        )
    fence_line, content = blocks[0]
    deep = json_too_deep(content)
    if deep is not None:
        return Refusal(
            "malformed-json",
            f"the ```json block on line {fence_line + content.count(chr(10), 0, deep) + 1} "
            f"nests arrays and objects more than {MAX_JSON_DEPTH} deep; a decision is one "
            'object {"schemaVersion": 1, "scopeBaselineHash": …, "decisions": […]}.',
        )
    try:
        data = json.loads(content, object_pairs_hook=_object_pairs, parse_constant=_refuse_constant)
    except _DuplicateKeyError as err:
        return Refusal(
            "malformed-json",
            f"the ```json block on line {fence_line} repeats the key {err.args[0]!r}; give "
            "every key once.",
        )
    except json.JSONDecodeError as err:
        return Refusal(
            "malformed-json",
            f"the ```json block is not valid JSON: {err.msg} on line {fence_line + err.lineno} "
            f"(column {err.colno}); fix the JSON and post the decision again.",
        )
    except ValueError as err:
        return Refusal(
            "malformed-json",
            f"the ```json block on line {fence_line} is not valid JSON: {err}; fix the JSON "
            "and post the decision again.",
        )
    if not isinstance(data, dict):
        return Refusal(
            "malformed-json",
            f"the ```json block on line {fence_line} holds a JSON {type(data).__name__}, not "
            'an object; post one object {"schemaVersion": 1, "scopeBaselineHash": …, '
            '"decisions": […]}.',
        )
    return data
