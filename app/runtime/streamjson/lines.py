"""How a tool call and its result read: pure formatting shared by every agent's vocabulary.

A tool call is `▸ <name> <target>` (the target the first of TARGET_FIELDS in its input); a
result is cut to RESULT_MAX_CHARS characters and RESULT_MAX_LINES lines, an error marked `✗`.
"""

from __future__ import annotations

import json
from typing import Final

__all__ = [
    "ELLIPSIS",
    "ERROR_GLYPH",
    "RESULT_GLYPH",
    "RESULT_INDENT",
    "RESULT_MAX_CHARS",
    "RESULT_MAX_LINES",
    "TARGET_FIELDS",
    "TARGET_MAX_CHARS",
    "TOOL_GLYPH",
    "compact_json",
    "result_text",
    "tool_line",
    "tool_result_lines",
    "tool_target",
]

# Keys naming what a tool acts on, in preference order. `filePath` is opencode's spelling of
# claude's `file_path` (opencode's read/edit/write tools).
TARGET_FIELDS: Final = ("file_path", "filePath", "path", "command", "pattern", "url")
RESULT_MAX_CHARS: Final = 200
RESULT_MAX_LINES: Final = 3
TARGET_MAX_CHARS: Final = 120

TOOL_GLYPH: Final = "▸"
RESULT_GLYPH: Final = "  ⎿ "
ERROR_GLYPH: Final = "  ✗ "
RESULT_INDENT: Final = "    "
ELLIPSIS: Final = "…"


def compact_json(value: object) -> str:
    """One-line JSON for a parsed value (never raises on what json.loads returns)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def tool_target(tool_input: object) -> str | None:
    """The first of TARGET_FIELDS holding a non-empty string: its first line, shortened."""
    if not isinstance(tool_input, dict):
        return None
    for key in TARGET_FIELDS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            lines = value.strip().splitlines()
            first = lines[0]
            if len(first) > TARGET_MAX_CHARS or len(lines) > 1:
                return first[:TARGET_MAX_CHARS] + ELLIPSIS
            return first
    return None


def tool_line(name: object, tool_input: object) -> str:
    """`▸ Read src/app.py`: glyph, tool name and its target when one is found."""
    label = name if isinstance(name, str) and name else "tool"
    target = tool_target(tool_input)
    return f"{TOOL_GLYPH} {label}" if target is None else f"{TOOL_GLYPH} {label} {target}"


def result_text(content: object) -> str:
    """The text of a tool result: a string, or a list of text (and image) blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for block in content:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str):
                pieces.append(text)
            elif isinstance(block, dict) and block.get("type") == "image":
                pieces.append("[image]")
            elif isinstance(block, str):
                pieces.append(block)
            else:
                pieces.append(compact_json(block))
        return "\n".join(pieces)
    return compact_json(content)


def tool_result_lines(content: object, *, is_error: bool) -> list[str]:
    """A tool result cut to RESULT_MAX_CHARS characters and RESULT_MAX_LINES lines."""
    text = result_text(content).strip("\n")
    all_lines = text.splitlines()
    lines = text[:RESULT_MAX_CHARS].splitlines()[:RESULT_MAX_LINES]
    if not lines:
        lines = ["(no output)"]
    elif len(text) > RESULT_MAX_CHARS or len(all_lines) > RESULT_MAX_LINES:
        lines[-1] += ELLIPSIS
    first = ERROR_GLYPH if is_error else RESULT_GLYPH
    return [first + lines[0]] + [RESULT_INDENT + line for line in lines[1:]]
