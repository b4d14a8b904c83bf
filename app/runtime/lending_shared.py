"""What one lending leaves lent when it ends, because another live lending still needs it. Pure.

Steps of one OS user lend at the same time: two cards' steps in two worktrees of a checkout, a
plain batch's step in the checkout itself while a card's step works in its worktree under it,
two plain batches in the same checkout, a step and the project's tests. Taking one of them back
must not take from another's agent what that agent was also lent:

    the tree         another lending's tree holds mine (the same root, or an ancestor's that
                     did not keep mine): its own take-back brings the files back, not mine
    pruned paths     another lending's root or writable inside my tree stays lent
    held directories a directory another lending holds (ACL rwx, sticky) keeps both; one that
                     another agent must only pass through, closed to other users, keeps the
                     search entry its lending's `open_way` gave it
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.runtime.lending_record import KEPT_FROM_AGENT, Lending

__all__ = ["Sharing", "covers", "held_modes", "inside", "sharing"]


@dataclass(frozen=True)
class Sharing:
    """What taking `mine` back leaves to the other live lendings."""

    tree: bool  # another lending's tree holds mine: the files stay lent
    prune: tuple[Path, ...]  # other lendings' roots and writables inside my tree
    writable: frozenset[Path]  # my writables another lending has lent too
    held: frozenset[Path]  # my held directories another lending holds: ACL and mode stay
    passage: frozenset[Path]  # my held directories another agent must pass: its search entry


def inside(path: Path, top: Path) -> bool:
    """`path` is `top` or under it (lexically: lendings record absolute paths)."""
    return path == top or top in path.parents


def covers(other: Lending, path: Path) -> bool:
    """Whether `other` lent `path` by ownership: under its root, outside what it kept."""
    if not inside(path, other.root):
        return False
    return not any(inside(path, other.root / kept) for kept in KEPT_FROM_AGENT)


def held_modes(others: Iterable[Lending]) -> dict[Path, int]:
    """Each directory a live lending holds, with its mode before the first of them held it."""
    return {path: mode for other in others for path, mode in other.held}


def sharing(mine: Lending, others: Sequence[Lending]) -> Sharing:
    """What of `mine` the `others` (live lendings, mine excluded) still need."""
    reached = [path for other in others for path in (other.root, *other.writable)]
    prune = tuple(path for path in reached if path != mine.root and inside(path, mine.root))
    held = held_modes(others)
    passage = frozenset(
        path
        for path, mode in mine.held
        if path not in held
        and not mode & 0o001  # closed to other users: open_way gave the agent a way through
        and any(path in target.parents for target in reached)
    )
    return Sharing(
        tree=any(covers(other, mine.root) for other in others),
        prune=prune,
        writable=frozenset(
            path
            for path in mine.writable
            if any(path in other.writable or covers(other, path) for other in others)
        ),
        held=frozenset(path for path, _ in mine.held if path in held),
        passage=passage,
    )
