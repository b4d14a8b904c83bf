"""Render an agent's stream-json stdout as readable lines (docs/runtime.md).

Agents whose adapter sets `emits_stream_json` print one JSON event per stdout line: claude with
`-p --output-format stream-json --verbose --include-partial-messages`, opencode with
`run --format json`, codex with `exec --json`, gemini with `--output-format stream-json`, and
cursor with `-p --output-format stream-json` (claude's envelope plus its own `tool_call`).
`StreamJsonRenderer` reads those lines and writes polished output through a line sink; the
runtime keeps the raw lines for `AgentSpawnResult.stdout` untouched (a `str` is immutable and
the renderer only reads JSON it parsed itself), so the transcript the engine maps to an
outcome is byte-identical with or without rendering. One job per module:

    renderer.py   StreamJsonRenderer: parse a line, ask each vocabulary, else write it raw
    claude.py     claude's events (and cursor's shared envelope), its partial-message dedup
    opencode.py   opencode's events
    codex.py      codex's events
    gemini.py     gemini's events (and codex's `error`)
    cursor.py     cursor's own `tool_call`
    writer.py     the shared output: prose flushing, styled lines, the usage accumulated
    lines.py      how a tool call and its result read
    usage.py      token and cost figures: reading, summing, showing

`usage` sums every claude or gemini `result`, opencode `step_finish` and codex `turn.completed`
event; a figure never reported stays `None` (unknown), never zero: codex and gemini report no
cost, so theirs stays unknown, and an opencode step that spent tokens at a cost of exactly 0
ran a model opencode has no price for, so its cost is unknown too. Input tokens exclude cache
reads and writes, for every agent (each vocabulary's module says how it gets there).
"""

from __future__ import annotations

from app.runtime.streamjson.lines import compact_json, tool_line, tool_result_lines
from app.runtime.streamjson.renderer import StreamJsonRenderer
from app.runtime.streamjson.usage import add_usage, figures

__all__ = [
    "StreamJsonRenderer",
    "add_usage",
    "compact_json",
    "figures",
    "tool_line",
    "tool_result_lines",
]
