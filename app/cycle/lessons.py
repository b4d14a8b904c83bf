"""The bookkeeper's thin shell: write a finished card's lesson, read lessons for a proposal.

    record_lesson        when a card's cycle finishes (merged, or abandoned after it pushed
                         work): distil the cycle's journal (`app.domain.lessons.distill`) and
                         write `.pair/lessons/card-<n>-<run>.md` beside the run-state; the
                         files it names are those the card's branch changed against its base
    lessons_for_proposal the lessons that share a file with what a proposal touches — paths
                         named in the card's title and body, in the change's plan, and the
                         files the card's branch already changed — capped at the configured
                         byte budget

`lessons: {where: off}` in `.pair/config.yaml` turns both off. Writing is idempotent: the same
journal gives the same bytes, and an unchanged file is not rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.cycle import worktree as wt
from app.domain.lessons import (
    LESSON_DIR,
    Ending,
    Lesson,
    distill,
    mentioned_paths,
    parse_lesson,
    render_lesson,
    select_lessons,
)
from app.engine.atomic import write_bytes_atomic
from app.engine.manifest import LessonsConfig

_RUN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_MAX_FILE_BYTES = 256_000  # a lesson is a few KB; anything bigger under .pair/lessons/ is not one


def changed_files(repo: Path, base: str, head: str) -> list[str]:
    """The paths `head` changed since it left `base` (the merge base), pairbot's own `.pair/`
    files left out; none when git cannot say (a ref that is gone).

    The base is the remote's as pairbot last fetched it (`refs/pairbot/bases/<base>`, which a
    new card branches from) when there is one: the local branch may lag behind cards merged
    on the remote since, and their changes would count as this card's.
    """
    try:
        fetched = f"refs/pairbot/bases/{base}"
        known = wt.git(
            repo, "rev-parse", "--verify", "--quiet", f"{fetched}^{{commit}}", check=False
        )
        start = fetched if known else base
        out = wt.git(repo, "diff", "--name-only", "-z", f"{start}...{head}", strip=False)
    except wt.WorktreeError:
        return []
    return sorted(p for p in out.split("\0") if p and not p.startswith(".pair/"))


def cycle_records(records: Sequence[Mapping[str, Any]], key: str, run: str) -> list[Any]:
    """The key's records from the start of cycle `run` (its first `bound` entry) on."""
    mine = [r for r in records if r.get("key") == key]
    for index, record in enumerate(mine):
        data = record.get("data")
        if (
            record.get("kind") == "cycle"
            and isinstance(data, Mapping)
            and data.get("event") == "bound"
            and data.get("run") == run
        ):
            return mine[index:]
    return mine


def record_lesson(
    root: Path,
    config: LessonsConfig,
    records: Sequence[Mapping[str, Any]],
    *,
    card: int,
    key: str,
    run: str | None,
    ending: Ending,
    files: Sequence[str],
) -> Path | None:
    """Write the finished cycle's lesson; its path, or None when lessons are off, the run has
    no usable id, or it struggled with nothing."""
    if config.where == "off" or run is None or not _RUN.match(run):
        return None
    lesson = distill(
        cycle_records(records, key, run), card=card, run=run, ending=ending, files=files
    )
    if lesson is None:
        return None
    path = root / LESSON_DIR / lesson.name
    data = render_lesson(lesson).encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return path
    write_bytes_atomic(path, data)
    return path


def read_lessons(root: Path) -> list[Lesson]:
    """Every readable lesson under `root`'s `.pair/lessons/` (others are skipped)."""
    directory = root / LESSON_DIR
    if not directory.is_dir():
        return []
    found: list[Lesson] = []
    for path in sorted(directory.glob("card-*.md")):
        if not path.is_file() or path.stat().st_size > _MAX_FILE_BYTES:
            continue
        lesson = parse_lesson(path.read_text(encoding="utf-8", errors="replace"))
        if lesson is not None:
            found.append(lesson)
    return found


def lessons_for_proposal(
    root: Path,
    config: LessonsConfig,
    *,
    card_text: str,
    tree: Path,
    key: str,
    base: str,
) -> tuple[Lesson, ...]:
    """The lessons a proposal for `key` receives (see the module docstring)."""
    if config.where == "off":
        return ()
    lessons = read_lessons(root)
    if not lessons:
        return ()
    files = mentioned_paths(card_text)
    plan = tree / ".pair" / "changes" / key / "plan.md"
    if plan.is_file():
        files |= mentioned_paths(plan.read_text(encoding="utf-8", errors="replace"))
    files.update(changed_files(tree, base, "HEAD"))
    return tuple(select_lessons(lessons, files, config.budget_bytes))
