"""What a hostile 64 KB comment costs next to a plain one of the same size.

    python benchmarks/hostile_comment.py              every shape, median of 5
    python benchmarks/hostile_comment.py --repeats 1  one pass each

Each body is about 64 KB and addresses pairbot (`/pair status` on its last line), so the cheap
"is pairbot addressed at all?" scan lets it through and the whole path runs: the command
grammar (`app.domain.intake.comment_commands.parse_commands`: the raw-line checks, the size cap, the
Markdown/HTML reading of `app.domain.text.sanitize.visible_lines`) and the text the agent would be
given (`app.domain.text.sanitize.reader_text`); beside them, as "others", the two other readings
of untrusted text (`html_paragraphs` of an Azure work-item comment, `visible_code` for a scope
decision). The shapes are the ones that made the old regex
loops quadratic or that stress a Markdown parser: nested HTML comments (`<!-<!-…-->->`), deep lists
and quotes, one long line, nested brackets, links and images, nested emphasis, backtick runs,
nested raw HTML and a stack of bidi controls, and the hidden-text shapes of issue #27 (invisible
characters spelled as entities, %XX-escaped ones in link targets, styles that hide text, nested
relative font sizes, a decision fence in an HTML comment); "emphasis at limit" holds as many
`*` and `_` as the sanitizer reads before it calls a text too complex (more are refused
unparsed). They
are timed side by side with a plain comment (prose paragraphs, lists, code, links) in the same
run, and the ratio is printed.

The goal: every hostile shape under 50 ms on the reference machine (2 shared cores). Nothing
here touches the network or the disk.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

if __package__ in (None, ""):
    # `python benchmarks/hostile_comment.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.domain.intake.comment_commands import parse_commands
from app.domain.text.sanitize import MAX_DELIMITERS, html_paragraphs, reader_text, visible_code

SIZE = 64 * 1024
GOAL_MS = 50.0
TAIL = "\n\n/pair status\n"


def _fill(unit: str, head: str = "", tail: str = "") -> str:
    count = max(1, (SIZE - len(head) - len(tail) - len(TAIL)) // len(unit))
    return head + unit * count + tail


def _nested(opener: str, middle: str, closer: str) -> str:
    count = max(1, (SIZE - len(middle) - len(TAIL)) // (len(opener) + len(closer)))
    return opener * count + middle + closer * count


def plain() -> str:
    paragraph = (
        "The login form should lock an account after five failed attempts within ten "
        "minutes, and say so in the error message. See [the spec](https://example.com/spec) "
        "and `auth/lockout.py`; the **current** behaviour is *wrong* for SSO users.\n\n"
        "- first point of the plan\n- second point, with a longer explanation of why\n"
        "  it matters for the rollout\n\n```python\ndef lockout(user):\n"
        "    return user.failed >= 5\n```\n\n"
    )
    return _fill(paragraph) + TAIL


SHAPES: dict[str, Callable[[], str]] = {
    "plain": plain,
    "nested comments": lambda: _nested("<!-", "<!-- x -->", "->") + TAIL,
    "open comments": lambda: _fill("<!-- ") + TAIL,
    "deep list": lambda: _fill("- ") + "x" + TAIL,
    "deep list lines": lambda: (
        "".join("  " * depth + "- item\n" for depth in range(SIZE // 400)) + TAIL
    ),
    "deep quote": lambda: _fill("> ") + "x" + TAIL,
    "long line": lambda: _fill("word ") + TAIL,
    "nested brackets": lambda: _nested("[", "x", "]") + TAIL,
    "open brackets": lambda: _fill("[a](") + TAIL,
    "nested images": lambda: _nested("![", "x", "](y)") + TAIL,
    "nested emphasis": lambda: _nested("*a _b ", "c", " d_ e*") + TAIL,
    "open emphasis": lambda: _fill("*_") + TAIL,
    "emphasis at limit": lambda: (
        "*_" * (MAX_DELIMITERS // 2 - 8) + "\n\n" + "word " * ((SIZE - MAX_DELIMITERS) // 5) + TAIL
    ),
    "backtick runs": lambda: "".join("`" * (n % 60 + 1) + " " for n in range(SIZE // 32)) + TAIL,
    "nested html": lambda: "<div>\n" + _nested("<span hidden>", "x", "</span>") + TAIL,
    "bidi stack": lambda: _fill("\u202e\u2066") + TAIL,
    "zero width": lambda: _fill("\u200b/\u200bpair ") + TAIL,
    "entity tags": lambda: _fill("&#xE0053;&#x202E;&#x200B;&#xFE0F;x ") + TAIL,
    "entity bidi tokens": lambda: _fill("<b>&#x202E;</b>a&#x2066;") + TAIL,
    "encoded links": lambda: _fill("[a](https://x.example/%F3%A0%81%93%E2%80%8B%25) ") + TAIL,
    "hiding styles": lambda: (
        _fill('<span style="color:#fefefe;font-size:1px;/* x */transform:scale(0) !important">a')
        + TAIL
    ),
    "nested font sizes": lambda: (
        "<div>\n" + _nested('<span style="font-size:99%">', "x", "</span>") + TAIL
    ),
    "long style": lambda: '<span style="' + "color:#000;" * (SIZE // 11 - 4) + '">x</span>' + TAIL,
    "commented fences": lambda: _fill("<!--\n```json\n{}\n```\n-->\n") + TAIL,
    "many fences": lambda: _fill("```json\n{}\n```\n") + TAIL,
}


@dataclass(frozen=True)
class Row:
    """One shape: its size, the median times of the command grammar, of the agent's text and
    of the other two readings (`_others`), and the first two's ratio to the plain comment's."""

    shape: str
    chars: int
    commands_ms: float
    reader_ms: float
    ratio: float
    others_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        return self.commands_ms + self.reader_ms


def _median_ms(call: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _others(body: str) -> None:
    """The other two readings of untrusted text: an Azure work-item comment's paragraphs and
    the code blocks a scope decision is read from."""
    html_paragraphs(body)
    visible_code(body)


def main(
    shapes: Sequence[str] | None = None,
    repeats: int = 5,
    out: Callable[[str], None] = print,
) -> list[Row]:
    """Time each shape (plain first, always), print a table and return its rows."""
    names = ["plain", *(s for s in (shapes or SHAPES) if s != "plain")]
    rows: list[Row] = []
    for name in names:
        body = SHAPES[name]()
        commands = _median_ms(partial(parse_commands, body), repeats)
        reader = _median_ms(partial(reader_text, body), repeats)
        others = _median_ms(partial(_others, body), repeats)
        base = rows[0].total_ms if rows else commands + reader
        rows.append(Row(name, len(body), commands, reader, (commands + reader) / base, others))
    out(
        f"{'shape':<18} {'chars':>7} {'commands ms':>12} {'reader ms':>10} {'x plain':>8} "
        f"{'others ms':>10}"
    )
    for row in rows:
        out(
            f"{row.shape:<18} {row.chars:>7} {row.commands_ms:>12.2f} {row.reader_ms:>10.2f} "
            f"{row.ratio:>8.2f} {row.others_ms:>10.2f}"
        )
    worst = max(rows, key=lambda r: r.total_ms)
    verdict = "met" if worst.total_ms < GOAL_MS else "NOT met"
    slowest = max(rows, key=lambda r: r.others_ms)
    out(
        f"goal: commands + reader under {GOAL_MS:.0f} ms for every shape; worst {worst.shape} "
        f"{worst.total_ms:.2f} ms: {verdict}; others (Azure paragraphs + decision code) "
        f"worst {slowest.shape} {slowest.others_ms:.2f} ms"
    )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("shapes", nargs="*", choices=[*SHAPES, []], default=None)
    args = parser.parse_args()
    main(args.shapes or None, repeats=args.repeats)
