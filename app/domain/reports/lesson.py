"""Lessons: what a finished card's run struggled with, for later proposals on the same files. Pure.

When a card's cycle finishes (merged, or abandoned after it pushed work), the bookkeeper
(`app.cycle.lesson_files`) calls `distill(records, ...)` over the card's journal and writes the
result as `.pair/lessons/card-<n>-<run>.md`. Distilling is deterministic — the same journal
gives the same lesson, it costs no agent call, and a test can say exactly what it must hold —
rather than an agent step: everything worth passing on is already recorded, and an agent
summarising it would add cost and a second place where untrusted text becomes instructions.

A lesson holds, each as short one-line items:

    sent back      the engine's reasons for refusing an iteration (`sent-back` outcomes)
    recurring      findings still open in a later review round than the one that first
                   reported them (id, kind, the reviewer's summary, the rounds)
    scope          scope proposals the reviews raised, with the maintainer's decision
    failovers      steps a fallback agent took over, and why
    blockers       what an agent reported it could not get past (`blocker` reports)

A run that struggled with none of these teaches nothing: `distill` returns None and no file
is written. The front matter names the card, its run, how it ended, the files the card
touched and the date of the journal's last record (never the clock).

Later, `select_lessons(lessons, files, budget)` picks the lessons whose files overlap the
files a new proposal touches (most shared files first, then newest), within a byte budget;
`app.engine.instructions` quotes them as data, attributed to their card and date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import yaml

from app.domain.card.agent_failures import failover_lines
from app.domain.text import mdtext

Ending = Literal["merged", "abandoned"]
LESSON_DIR: Final = ".pair/lessons"
ITEM_CHARS: Final = 240  # one item's line, at most
MAX_ITEMS: Final = 8  # per section: a run that was sent back 40 times needs the pattern, not 40
MAX_FILES: Final = 200
DEFAULT_BUDGET: Final = 4_000  # bytes of lesson text one proposal receives, at most
_SECTIONS: Final = (
    ("sent_back", "Sent back by the engine"),
    ("recurring", "Findings that recurred across review rounds"),
    ("scope", "Scope changes"),
    ("failovers", "Failovers"),
    ("blockers", "Blockers the agent reported"),
)
_ACTIVE: Final = frozenset({"open", "human"})
_FRONT = re.compile(r"\A---\n(?P<front>.*?)\n---\n(?P<body>.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class Lesson:
    """One finished card run's lesson."""

    card: int
    run: str
    ending: Ending
    date: str  # YYYY-MM-DD, from the journal
    files: tuple[str, ...]
    sent_back: tuple[str, ...] = ()
    recurring: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    failovers: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()
    body: str | None = None  # as read back from a file; `render_body` otherwise

    @property
    def name(self) -> str:
        """Its file name under `.pair/lessons/`."""
        return f"card-{self.card}-{self.run}.md"

    def render_body(self) -> str:
        """The Markdown below the front matter."""
        if self.body is not None:
            return self.body
        lines = [f"# Lesson from card #{self.card} ({self.ending}, {self.date})"]
        for attribute, heading in _SECTIONS:
            items: tuple[str, ...] = getattr(self, attribute)
            if items:
                lines += ["", f"## {heading}", ""]
                lines += [f"- {item}" for item in items]
        return "\n".join(lines) + "\n"


def _item(text: str) -> str:
    return mdtext.one_line(text, ITEM_CHARS)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    seen = dict.fromkeys(item for item in items if item)
    return tuple(seen)[:MAX_ITEMS]


def _date(records: Sequence[Mapping[str, Any]]) -> str:
    for record in reversed(records):
        stamp = record.get("at")
        if isinstance(stamp, str) and re.match(r"^\d{4}-\d{2}-\d{2}", stamp):
            return stamp[:10]
    return "unknown"


def _recurring(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Findings an accepted review reported active in more than one round."""
    rounds: dict[str, list[int]] = {}
    about: dict[str, tuple[str, str]] = {}
    number = 0
    for record in records:
        if record.get("kind") != "outcome" or record.get("transition") != "verify":
            continue
        if record.get("state") not in ("advanced", "awaiting-approval"):
            continue
        number += 1
        report = record.get("findings")
        listed = report.get("findings") if isinstance(report, Mapping) else None
        for finding in listed if isinstance(listed, list) else []:
            if not isinstance(finding, Mapping) or not isinstance(finding.get("id"), str):
                continue
            if str(finding.get("transition") or "open") not in _ACTIVE:
                continue
            fid = finding["id"]
            rounds.setdefault(fid, []).append(number)
            summary = finding.get("summary") or finding.get("reproducer") or ""
            about[fid] = (str(finding.get("kind") or "unknown"), str(summary))
    return [
        _item(
            f"{fid} ({about[fid][0]}), open in rounds {', '.join(map(str, seen))}: {about[fid][1]}"
        )
        for fid, seen in rounds.items()
        if len(seen) > 1
    ]


def _scope(records: Sequence[Mapping[str, Any]]) -> list[str]:
    decisions: dict[str, str] = {}
    proposals: dict[str, str] = {}
    for record in records:
        data = record.get("data")
        if record.get("kind") == "cycle" and isinstance(data, Mapping):
            if data.get("event") == "scope-applied":
                for item in data.get("dispositions") or []:
                    if isinstance(item, Mapping):
                        decisions[str(item.get("id"))] = str(item.get("action"))
            continue
        report = record.get("findings")
        if record.get("kind") != "outcome" or not isinstance(report, Mapping):
            continue
        for change in report.get("scopeChanges") or []:
            if isinstance(change, Mapping) and isinstance(change.get("id"), str):
                what = change.get("evidence") or change.get("summary") or ""
                proposals[change["id"]] = f"({change.get('type') or 'unknown'}): {what}"
    return [
        _item(f"{sid} {text}; decision: {decisions.get(sid, 'none recorded')}")
        for sid, text in proposals.items()
    ]


def distill(
    records: Sequence[Mapping[str, Any]],
    *,
    card: int,
    run: str,
    ending: Ending,
    files: Sequence[str],
) -> Lesson | None:
    """The lesson of one card run's journal records (file order), None when it struggled with
    nothing worth passing on."""
    sent_back = [
        _item(f"{r.get('transition') or 'step'}: {r.get('message') or ''}")
        for r in records
        if r.get("kind") == "outcome" and r.get("state") == "sent-back"
    ]
    blockers = [
        _item(f"{r.get('transition') or 'step'}: {r.get('message') or ''}")
        for r in records
        if r.get("kind") == "blocker"
    ]
    lesson = Lesson(
        card=card,
        run=run,
        ending=ending,
        date=_date(records),
        files=tuple(sorted(dict.fromkeys(files)))[:MAX_FILES],
        sent_back=_unique(sent_back),
        recurring=_unique(_recurring(records)),
        scope=_unique(_scope(records)),
        failovers=_unique(_item(line) for line in failover_lines(records)),
        blockers=_unique(blockers),
    )
    taught = any(getattr(lesson, attribute) for attribute, _ in _SECTIONS)
    return lesson if taught else None


def render_lesson(lesson: Lesson) -> str:
    """The lesson file: YAML front matter, then the Markdown body."""
    front = {
        "card": lesson.card,
        "run": lesson.run,
        "outcome": lesson.ending,
        "date": lesson.date,
        "files": list(lesson.files),
    }
    dumped = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{dumped}---\n{lesson.render_body()}"


def parse_lesson(text: str) -> Lesson | None:
    """A lesson file read back; None for anything that is not one (a hand-edited file with
    broken front matter is skipped, never guessed at)."""
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if match is None:
        return None
    try:
        front = yaml.safe_load(match.group("front"))
    except yaml.YAMLError:
        return None
    if not isinstance(front, dict):
        return None
    card, run, ending = front.get("card"), front.get("run"), front.get("outcome")
    files = front.get("files")
    if (
        isinstance(card, bool)
        or not isinstance(card, int)
        or not isinstance(run, str)
        or ending not in ("merged", "abandoned")
        or not isinstance(files, list)
    ):
        return None
    return Lesson(
        card=card,
        run=run,
        ending=ending,
        date=str(front.get("date") or "unknown"),
        files=tuple(str(f) for f in files),
        body=match.group("body"),
    )


# Path-like words in free text: letters, digits and `._-/`, with a dot or a slash in them.
_WORD = re.compile(r"[\w./-]+")


def mentioned_paths(text: str) -> set[str]:
    """Every word of `text` that could be a repository path (`app/x.py`, `README.md`), with
    a leading `./` and trailing punctuation dropped. Generous on purpose: a candidate only
    counts when a lesson names the same path."""
    found: set[str] = set()
    for word in _WORD.findall(text):
        path = word.removeprefix("./").rstrip(".")
        if path and ("." in path or "/" in path) and not path.startswith("/"):
            found.add(path)
    return found


def select_lessons(
    lessons: Sequence[Lesson], files: Iterable[str], budget: int = DEFAULT_BUDGET
) -> list[Lesson]:
    """The lessons that share a file with `files`, most shared files first, then newest, as
    many as fit in `budget` bytes of rendered body (the first one is cut to fit when alone it
    is larger: some lesson beats none)."""
    wanted = set(files)
    scored = [(len(wanted.intersection(lesson.files)), lesson) for lesson in lessons]
    relevant = [(shared, lesson) for shared, lesson in scored if shared]
    relevant.sort(key=lambda pair: (-pair[0], _negated(pair[1].date), -pair[1].card))
    chosen: list[Lesson] = []
    used = 0
    for _, lesson in relevant:
        size = len(lesson.render_body().encode("utf-8"))
        if used + size <= budget:
            chosen.append(lesson)
            used += size
        elif not chosen:
            cut = lesson.render_body().encode("utf-8")[: max(0, budget - 40)]
            body = cut.decode("utf-8", errors="ignore") + "\n(cut to pairbot's lesson budget)\n"
            chosen.append(_with_body(lesson, body))
            break
    return chosen


def _negated(date: str) -> tuple[int, ...]:
    """Sorts newer dates first; an unknown date last."""
    digits = [int(part) for part in re.findall(r"\d+", date)[:3]]
    return tuple(-d for d in digits) if len(digits) == 3 else (1,)


def _with_body(lesson: Lesson, body: str) -> Lesson:
    return Lesson(
        card=lesson.card,
        run=lesson.run,
        ending=lesson.ending,
        date=lesson.date,
        files=lesson.files,
        body=body,
    )
