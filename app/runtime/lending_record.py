"""One lending as the ledger records it: enough for any pairbot of the same user to undo it.

lending.py makes and takes back lendings; lending_ledger.py keeps their records. What is never
lent (`KEPT_FROM_AGENT`) and which directories are lent by ACL rather than ownership (`HELD`)
are said here, beside the record that names them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["HELD", "KEPT_FROM_AGENT", "GitEntry", "Lending"]

# Never lent: the repository's git directory (or a worktree's gitfile), pairbot's private
# directory (the App's --dev webhook secret), the local forge, the run-state of every batch and
# the cards' worktrees (app/cycle/worktree.py).
KEPT_FROM_AGENT: Final = (
    ".git",
    ".pair/app",
    ".pair/forge",
    ".pair/batches",
    ".pair/worktrees",  # every card's worktree, lent to its own step only
)
# Directories holding a kept entry: the agent may write in them, never own them.
HELD: Final = ("", ".pair")


@dataclass(frozen=True)
class GitEntry:
    """What `<root>/.git` was before the agent ran: a gitfile's text, or a directory's inode."""

    path: Path
    text: str | None  # a linked worktree's `gitdir: …` file
    inode: tuple[int, int] | None  # (st_dev, st_ino) of a repository's .git directory


@dataclass(frozen=True)
class Lending:
    """One step's lending, as recorded in the ledger: enough to undo it from another process."""

    user: str
    admin: tuple[str, ...]  # the prefix that runs chown/setfacl with the needed rights
    root: Path
    writable: tuple[Path, ...]
    git: GitEntry
    # Directories lent by ACL, with their mode before any lending held them (a second lending
    # of a held directory records the first one's, never the sticky mode it found).
    held: tuple[tuple[Path, int], ...]
    home: Path | None  # the agent's fresh HOME, removed with the lending
    pid: int  # the pairbot process that lent
    started: str  # that process's start time (/proc/<pid>/stat), against pid reuse
    key: str  # names the record: one process may lend several trees at once

    def to_json(self) -> str:
        """The ledger record."""
        return json.dumps(
            {
                "user": self.user,
                "admin": list(self.admin),
                "root": str(self.root),
                "writable": [str(p) for p in self.writable],
                "git": {
                    "path": str(self.git.path),
                    "text": self.git.text,
                    "inode": list(self.git.inode) if self.git.inode else None,
                },
                "held": [[str(p), mode] for p, mode in self.held],
                "home": str(self.home) if self.home else None,
                "pid": self.pid,
                "started": self.started,
                "key": self.key,
            }
        )

    @staticmethod
    def from_json(text: str) -> Lending:
        """A ledger record read back (ValueError, KeyError or TypeError when it is not one)."""
        data: dict[str, Any] = json.loads(text)
        git = data["git"]
        inode = git["inode"]
        return Lending(
            user=str(data["user"]),
            admin=tuple(str(a) for a in data["admin"]),
            root=Path(data["root"]),
            writable=tuple(Path(p) for p in data["writable"]),
            git=GitEntry(
                Path(git["path"]),
                None if git["text"] is None else str(git["text"]),
                (int(inode[0]), int(inode[1])) if inode else None,
            ),
            held=tuple((Path(p), int(mode)) for p, mode in data["held"]),
            home=Path(data["home"]) if data["home"] else None,
            pid=int(data["pid"]),
            started=str(data["started"]),
            key=str(data["key"]),
        )
