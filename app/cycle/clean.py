"""`pairbot clean`: reclaim the cards' worktrees and their branches, and set a run aside.

Seed 003's `clean` (per-run worktrees and their branches), with seed 004's rule that unknown
dirty state in a worktree is reported, never cleaned. For each batch it is given (every batch
with a worktree when none is named), under the batch's step lock — a batch whose lock a live
step holds refuses the whole command (exit 3) and nothing is removed:

    worktree   `.pair/worktrees/<batch>` and git's registration of it (`git worktree remove`);
               a worktree with uncommitted or untracked files is kept and named `dirty`
    branch     the local card branch `pair/card-<n>` once its worktree is gone, only when its
               tip is on the remote (the fetched tip `refs/pairbot/tips/…`, a remote-tracking
               branch) or merged into the base; otherwise kept, `unpushed`
    tip ref    `refs/pairbot/tips/pair/card-<n>`, the private copy of the remote's branch
               that a step fetches again
    run        with `archive_run` (one named batch): the run directory `run/` is moved to
               `archive/run-<k>/` beside it, journal and books and all, so the next command
               starts a fresh run — the way on after an incompatible run-state

`dry_run` changes nothing and says what would be done. The journal is never deleted.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from app.cycle import worktree as wt
from app.cycle.batch import card_branch
from app.cycle.schedule import card_of
from app.engine import lock
from app.engine.manifest import batches_dir, list_batches
from app.engine.runstate import RunLocus
from app.errors import UnknownBatchError, UserError

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Action:
    """One thing clean did (or would do, or kept): what, where, and why it was kept."""

    batch: str
    what: str  # worktree | branch | tip ref | run
    where: str
    kept: str | None = None  # why it stays; None when it goes

    def line(self, dry_run: bool) -> str:
        """`removed worktree …`, `would remove …`, `kept worktree … (dirty: …)`."""
        if self.kept is not None:
            return f"kept {self.what} {self.where} ({self.batch}): {self.kept}"
        verb = "archive" if self.what == "run" else "remove"
        done = f"would {verb}" if dry_run else ("archived" if verb == "archive" else "removed")
        return f"{done} {self.what} {self.where} ({self.batch})"


def targets(root: Path, batch: str | None) -> list[str]:
    """The batches to clean: `batch` (which must exist), else every one with a worktree."""
    worktrees = root / wt.WORKTREES
    with_tree = sorted(p.name for p in worktrees.iterdir()) if worktrees.is_dir() else []
    if batch is None:
        return [name for name in with_tree if _SAFE.match(name)]
    known = list_batches(root)
    if not _SAFE.match(batch) or (batch not in known and batch not in with_tree):
        listed = ", ".join(sorted({*known, *with_tree})) or "none"
        raise UnknownBatchError(
            f"no batch {batch!r} under {batches_dir(root)} and no worktree of it "
            f"(batches: {listed})"
        )
    return [batch]


@contextlib.contextmanager
def _locked(root: Path, batches: Sequence[str], now: datetime) -> Iterator[None]:
    """Every batch's step lock for the block; one a live step holds refuses them all."""
    proofs: list[lock.LockProof] = []
    try:
        for name in batches:
            locus = RunLocus.for_batch(root, name)
            if locus.directory.is_dir():
                proofs.append(lock.acquire(locus.lock, now=now))
        yield
    finally:
        for proof in proofs:
            lock.release(proof)


def _dirty(path: Path) -> str | None:
    out = wt.git(path, "status", "--porcelain", "--untracked-files=all", strip=False)
    changed = [line for line in out.splitlines() if line.strip()]
    if not changed:
        return None
    return (
        f"dirty: {len(changed)} uncommitted or untracked path(s); look with "
        f"`git -C {path} status`, commit or discard them, then clean again"
    )


def _ref(root: Path, ref: str) -> str | None:
    out = wt.git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return out or None


def _contained(root: Path, tip: str, refs: Sequence[str]) -> bool:
    """Whether `tip` is reachable from one of `refs` (those that exist)."""
    return any(
        _ref(root, ref) is not None and wt.git(root, "merge-base", tip, ref, check=False) == tip
        for ref in refs
    )


def _branch_actions(root: Path, batch: str, base: str | None) -> list[Action]:
    card = card_of(batch)
    if card is None:
        return []
    branch = card_branch(card)
    tip_ref = f"refs/pairbot/tips/{branch}"
    actions: list[Action] = []
    tip = _ref(root, f"refs/heads/{branch}")
    if tip is not None:
        remotes = wt.git(root, "for-each-ref", "--format=%(refname)", "refs/remotes").split()
        shelter = [tip_ref, *(r for r in remotes if r.endswith(f"/{branch}"))]
        if base is not None:
            shelter += [f"refs/heads/{base}", f"refs/pairbot/bases/{base}"]
        kept = None
        if not _contained(root, tip, shelter):
            kept = "unpushed: its tip is on no remote branch and not merged into the base"
        actions.append(Action(batch, "branch", branch, kept))
    if _ref(root, tip_ref) is not None:
        actions.append(Action(batch, "tip ref", tip_ref))
    return actions


def plan(root: Path, batch: str, base: str | None) -> list[Action]:
    """What cleaning `batch` does (nothing changed yet)."""
    path = wt.worktree_path(root, batch)
    actions: list[Action] = []
    if (path / ".git").exists():
        dirty = _dirty(path)
        actions.append(Action(batch, "worktree", str(path.relative_to(root)), dirty))
        if dirty is not None:
            return actions  # its branch is checked out there: both stay
    elif path.exists():
        actions.append(Action(batch, "worktree", str(path.relative_to(root))))
    return actions + _branch_actions(root, batch, base)


def _archive_path(locus: RunLocus) -> Path:
    archive = locus.directory.parent / "archive"
    taken = {p.name for p in archive.iterdir()} if archive.is_dir() else set()
    number = 1
    while f"run-{number}" in taken:
        number += 1
    return archive / f"run-{number}"


def _do(root: Path, action: Action) -> None:
    if action.what == "worktree":
        path = root / action.where
        if (path / ".git").exists():
            wt.git(root, "worktree", "remove", "--force", str(path))
        else:  # a directory git no longer knows: only its leftovers
            wt.git(root, "worktree", "prune")
            if path.exists() and not any(path.iterdir()):
                path.rmdir()
    elif action.what == "branch":
        wt.git(root, "branch", "-D", "--quiet", action.where)
    elif action.what == "tip ref":
        wt.git(root, "update-ref", "-d", action.where)


def clean(
    root: Path,
    batch: str | None,
    *,
    now: datetime,
    dry_run: bool = False,
    archive_run: bool = False,
    base: str | None = None,
) -> list[Action]:
    """Clean `batch` (or every batch with a worktree); the actions, done unless `dry_run`."""
    if archive_run and batch is None:
        raise UserError("--archive-run sets one run aside: name its batch (`pairbot clean card-7`)")
    names = targets(root, batch)
    actions: list[Action] = []
    with _locked(root, names, now):
        for name in names:
            actions += plan(root, name, base)
        locus = RunLocus.for_batch(root, names[0]) if archive_run else None
        archive = _archive_path(locus) if locus and locus.directory.is_dir() else None
        if locus is not None and archive is not None:
            actions.append(
                Action(locus.directory.parent.name, "run", str(archive.relative_to(root)))
            )
        if dry_run:
            return actions
        for action in actions:
            if action.kept is None and action.what != "run":
                _do(root, action)
        if locus is not None and archive is not None:
            # Under the lock: its file moves along with the run, and no step starts meanwhile.
            archive.parent.mkdir(parents=True, exist_ok=True)
            locus.directory.rename(archive)
    if archive is not None:
        (archive / "step.lock").unlink(missing_ok=True)  # this process's own lock, moved along
    return actions
