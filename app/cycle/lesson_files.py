"""The bookkeeper's thin shell: write a finished card's lesson, read lessons for a proposal.

    record_lesson        when a card's cycle finishes (merged, or abandoned after it pushed
                         work): distil the cycle's journal (`app.domain.reports.lesson.distill`) and
                         write `.pair/lessons/card-<n>-<run>.md` beside the run-state; the
                         files it names are those the card's branch changed against its base
    commit_lesson        with `lessons: {where: default-branch}`: the lesson committed instead
                         on its own branch `pair/lessons/card-<n>-<run>`, made from the base
                         branch in a worktree of its own; `open_lesson_pull` pushes it and
                         opens its PR
    lessons_for_proposal the lessons that share a file with what a proposal touches — paths
                         named in the card's title and body, in the change's plan, and the
                         files the card's branch already changed — capped at the configured
                         byte budget; read from the run-state's `.pair/lessons/` and from the
                         committed `.pair/lessons/` of the card's checkout (its base branch's
                         merged lessons), one copy of each file name

`lessons: {where: off}` in `.pair/config.yaml` turns both off. Writing is idempotent: the same
journal gives the same bytes, and an unchanged file is not rewritten.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.cycle import worktree as wt
from app.domain.reports.lesson import (
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
from hosts.base import Host
from hosts.models import Pull

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


def distill_lesson(
    config: LessonsConfig,
    records: Sequence[Mapping[str, Any]],
    *,
    card: int,
    key: str,
    run: str | None,
    ending: Ending,
    files: Sequence[str],
) -> Lesson | None:
    """The finished cycle's lesson; None when lessons are off, the run has no usable id, or
    it struggled with nothing."""
    if config.where == "off" or run is None or not _RUN.match(run):
        return None
    return distill(cycle_records(records, key, run), card=card, run=run, ending=ending, files=files)


def lesson_branch(lesson: Lesson) -> str:
    """The branch a lesson is proposed on when lessons go to the default branch."""
    return f"pair/lessons/{lesson.name.removesuffix('.md')}"


def commit_lesson(root: Path, lesson: Lesson, base: str, remote: str = "origin") -> str:
    """Commit `lesson` on its branch (`lesson_branch`), made from `base` in a worktree of its
    own; the branch's name. A branch that already holds the lesson file (an earlier attempt
    whose push or PR failed) keeps it as committed: no second commit.

    The file is added with `--force`: `pairbot init` lists `lessons/` in `.pair/.gitignore`
    for run-state lessons, and this one is meant to be committed.
    """
    branch = lesson_branch(lesson)
    tree = wt.prepare(root, f"lesson-card-{lesson.card}", branch, base, remote)
    rel = f"{LESSON_DIR}/{lesson.name}"
    path = tree.path / rel
    if not path.is_file():
        write_bytes_atomic(path, render_lesson(lesson).encode("utf-8"))
        wt.git(tree.path, "add", "--force", "--", rel)
        message = f"pairbot: lesson from card #{lesson.card} (run {lesson.run})"
        wt.git(tree.path, "commit", "--quiet", "--no-verify", "-m", message)
    return branch


def lesson_pr_body(lesson: Lesson) -> str:
    """What a lesson's PR says it is."""
    return (
        f"A lesson pairbot's bookkeeper distilled from the journal of card #{lesson.card} "
        f"(run `{lesson.run}`, {lesson.ending}): what that run struggled with, for later "
        f"proposals that touch the same files.\n\n"
        f"It adds `{LESSON_DIR}/{lesson.name}` and nothing else. Review it like any change: "
        "once merged, later proposals on those files receive it, quoted as data; close it "
        "unmerged and none does.\n"
    )


async def open_lesson_pull(
    host: Host, root: Path, lesson: Lesson, base: str, remote: str = "origin"
) -> Pull:
    """Commit the lesson on its branch, push it through `host` and open its PR to `base` —
    or find the one already open for the branch (the host returns it)."""
    branch = await asyncio.to_thread(commit_lesson, root, lesson, base, remote)
    await host.push_branch(root, branch)
    title = f"pairbot: lesson from card #{lesson.card}"
    return await host.open_pull(branch, base, title, lesson_pr_body(lesson), draft=False)


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
    lesson = distill_lesson(
        config, records, card=card, key=key, run=run, ending=ending, files=files
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
    return list(_read_named(root).values())


def _read_named(root: Path) -> dict[str, Lesson]:
    """`read_lessons`, keyed by file name."""
    directory = root / LESSON_DIR
    if not directory.is_dir():
        return {}
    found: dict[str, Lesson] = {}
    for path in sorted(directory.glob("card-*.md")):
        if not path.is_file() or path.stat().st_size > _MAX_FILE_BYTES:
            continue
        lesson = parse_lesson(path.read_text(encoding="utf-8", errors="replace"))
        if lesson is not None:
            found[path.name] = lesson
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
    named = _read_named(root)
    if tree.resolve() != root.resolve():
        # The base branch's merged lessons, committed in the card's checkout; a file name
        # the run-state also holds is the same lesson, read once (the run-state's copy).
        for name, lesson in _read_named(tree).items():
            named.setdefault(name, lesson)
    lessons = list(named.values())
    if not lessons:
        return ()
    files = mentioned_paths(card_text)
    plan = tree / ".pair" / "changes" / key / "plan.md"
    if plan.is_file():
        files |= mentioned_paths(plan.read_text(encoding="utf-8", errors="replace"))
    files.update(changed_files(tree, base, "HEAD"))
    return tuple(select_lessons(lessons, files, config.budget_bytes))
