"""`pairbot clean [BATCH] [--dry-run] [--archive-run]`: reclaim worktrees and card branches.

`app.cycle.clean` decides and does; this verb says each thing done (or, with `--dry-run`, what
would be) on a line of its own, and exits 0 — 3 when a live step holds a batch's lock (nothing
is removed then), 2 for an unknown batch.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from app.cycle import worktree as wt
from app.cycle.clean import clean


def _base(root: Path, env: Mapping[str, str]) -> str | None:
    """The base branch a card branch may be merged into (None when nothing names one)."""
    try:
        return wt.current_branch(root, env)
    except wt.WorktreeError:
        return None


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """Clean the named batch, or every batch with a worktree."""
    actions = clean(
        root,
        args.batch,
        now=datetime.now(UTC),
        dry_run=args.dry_run,
        archive_run=args.archive_run,
        base=_base(root, env),
    )
    for action in actions:
        print(action.line(args.dry_run))
    if not actions:
        print("nothing to clean" + (f" for {args.batch}" if args.batch else ""))
    return 0
