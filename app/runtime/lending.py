"""Lending a step's files to the isolated agent user, and taking them back — even after a crash.

    lend(account, root, writable, home)   record the lending, then hand the tree over
    take_back(lending)                    all pairbot's again; None, or why the tree is unsafe
    sweep()                               take back what a pairbot that died mid-step had lent

What is lent: the working tree (`root`) and the files outside it the agent writes (its journal),
by ownership (`chown -h`, links themselves, never their targets). What is never lent
(`KEPT_FROM_AGENT`): the git directory, and pairbot's own state in a checkout — the App's
private directory, the local forge, every batch's and card's run-state. The directories holding
those (`root` itself and `.pair`) stay pairbot's so another pairbot working on the same checkout
meanwhile (a card command while a plain batch's step runs there) still owns what git and its
locks look at; the agent gets write access to them through one ACL entry for its user, and the
sticky bit so it cannot rename or remove what it was not lent. Without setfacl they are handed
over like the rest (the older behaviour; concurrent pairbots then fail until the step ends).

Every lending is written to a ledger before anything changes (`/tmp/pairbot-lendings-<uid>`,
0700, pairbot's user only), and removed once taken back. A pairbot killed mid-step leaves its
record; the next pairbot of the same user that lends or starts (`sweep`) finds the recorded
process gone and takes the files back, so a checkout is never left owned by the agent user.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app.errors import UserError
from app.runtime.isolation import AgentAccount, run_tool

__all__ = ["KEPT_FROM_AGENT", "GitEntry", "Lending", "escaping_link", "lend", "sweep", "take_back"]

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
_HELD: Final = ("", ".pair")
_LEDGER_PREFIX: Final = "pairbot-lendings-"


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
    held: tuple[tuple[Path, int], ...]  # directories lent by ACL, with their original mode
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


def lend(
    account: AgentAccount, root: Path, writable: Sequence[Path], home: Path | None = None
) -> Lending:
    """Hand `root` (less what is kept) and `writable` to the agent user; undone on failure."""
    uid, gid = account.ensure()
    if not root.is_dir():
        raise UserError(f"agent isolation: cannot lend {root} to the agent: not a directory")
    sweep()
    account.open_way([root, *writable])
    setfacl = account.setfacl()
    held = tuple(
        (path, path.stat().st_mode & 0o7777)
        for path in (root / name if name else root for name in _HELD)
        if setfacl is not None and path.is_dir() and not path.is_symlink()
    )
    lending = Lending(
        user=account.switch.user,
        admin=account.switch.admin(),
        root=root,
        writable=tuple(writable),
        git=_git_entry(root / ".git"),
        held=held,
        home=home,
        pid=os.getpid(),
        started=_process_start(os.getpid()) or "",
        key=secrets.token_hex(8),
    )
    record = _record(lending)
    try:
        _hand_over(account, lending, f"{uid}:{gid}", setfacl)
    except BaseException:
        # Undo what was lent; the failure that stopped the lending is the one to report.
        unknown = GitEntry(lending.git.path, None, None)  # no gitfile to put back
        with contextlib.suppress(UserError):
            _reclaim(dataclasses.replace(lending, git=unknown))
        if record is not None:
            record.unlink(missing_ok=True)
        raise
    return lending


def take_back(lending: Lending) -> str | None:
    """Take everything back and forget the lending; None, or why pairbot must not run git in
    its root any more."""
    try:
        return _reclaim(lending)
    finally:
        path = _ledger_path(lending)
        if path is not None:
            path.unlink(missing_ok=True)


def sweep() -> list[str]:
    """Take back every lending of a pairbot (of this user) that is no longer running; what it
    found wrong with each tree, if anything."""
    ledger = _ledger(create=False)
    if ledger is None:
        return []
    problems: list[str] = []
    for path in sorted(ledger.glob("*.json")):
        try:
            lending = Lending.from_json(path.read_text())
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            path.unlink(missing_ok=True)
            continue
        if _alive(lending):
            continue  # still running: its own step takes back what it lent
        claimed = path.with_suffix(f".sweeping-{os.getpid()}")
        try:
            path.rename(claimed)  # one sweeper per record
        except FileNotFoundError:
            continue
        try:
            problem = _reclaim(lending)
        except (UserError, OSError) as err:  # a sweep never stops the run that found it
            problem = str(err)
        finally:
            claimed.unlink(missing_ok=True)
        if problem is not None:
            problems.append(problem)
    return problems


def _hand_over(account: AgentAccount, lending: Lending, owner: str, setfacl: str | None) -> None:
    root, admin = lending.root, lending.admin
    held = [path for path, _ in lending.held]
    for path in held:
        # Sticky: the agent may add and change its own entries here, never rename or remove
        # the kept ones (rename needs only write access to the directory).
        try:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_ISVTX)
        except OSError as exc:  # a directory pairbot's user does not own
            raise UserError(
                f"agent isolation: cannot lend {path} to {lending.user}: {exc.strerror or exc}; "
                "pairbot's user must own the checkout"
            ) from None
    if held and setfacl is not None:
        run_tool(
            [*admin, setfacl, "-m", f"u:{lending.user}:rwx", "--", *map(str, held)],
            f"let {lending.user} write in {held[0]}",
        )
    run_tool(_chown_tree(lending, owner, lend=True), f"hand {root} to {lending.user}")
    account.chown([p for p in lending.writable if p.exists()], *map(int, owner.split(":")))


def _chown_tree(lending: Lending, owner: str, *, lend: bool) -> list[str]:
    """`find` handing the lent tree to `owner`: a kept path and everything under it is left
    out (a card's worktree under `.git`, another card's journal lent to its own step meanwhile),
    and so is each held directory itself when lending. Taking back without held directories
    (no setfacl), the agent owned `.pair` and could have put anything under it: all of it but
    `.git` comes back. -path takes a pattern, so the names are escaped."""
    root = lending.root
    kept = list(KEPT_FROM_AGENT) if lend or lending.held else [".git"]
    argv = [*lending.admin, "find", str(root), *_any_path([str(root / k) for k in kept])]
    argv += ["-prune", "-o"]
    if lend and lending.held:
        argv += [*_any_path([str(p) for p, _ in lending.held]), "-o"]
    return [*argv, "-exec", "chown", "-h", owner, "{}", "+"]


def _any_path(paths: Sequence[str]) -> list[str]:
    expression = ["("]
    for index, path in enumerate(paths):
        expression += [*(["-o"] if index else []), "-path", _glob_escape(path)]
    return [*expression, ")"]


def _reclaim(lending: Lending) -> str | None:
    admin, mine = lending.admin, f"{os.geteuid()}:{os.getegid()}"
    # A worktree's gitfile the agent may have replaced (by a directory) comes back whole; a
    # repository's .git directory was never the agent's.
    gitfile = [lending.git.path] if lending.git.text is not None else []
    present = [p for p in (*lending.writable, *gitfile) if p.exists() or p.is_symlink()]
    try:
        if lending.root.is_dir():
            run_tool(
                _chown_tree(lending, mine, lend=False),
                f"take {lending.root} back from {lending.user}",
            )
        if present:
            run_tool(
                [*admin, "chown", "-hR", mine, "--", *map(str, present)],
                f"take {present[0]} back from {lending.user}",
            )
        held = [(p, mode) for p, mode in lending.held if p.is_dir() and not p.is_symlink()]
        tool = shutil.which("setfacl")
        if held and tool is not None:
            run_tool(
                [*admin, tool, "-x", f"u:{lending.user}", "--", *(str(p) for p, _ in held)],
                f"take {held[0][0]} back from {lending.user}",
            )
        for path, mode in held:
            if stat.S_IMODE(path.stat().st_mode) != mode:  # a failed lending may not have
                path.chmod(mode)
    finally:
        if lending.home is not None:
            with contextlib.suppress(UserError):
                run_tool([*admin, "rm", "-rf", "--", str(lending.home)], f"remove {lending.home}")
    return _restore_git_entry(lending.git) or escaping_link(lending.root)


def _ledger(*, create: bool) -> Path | None:
    """pairbot's user's ledger directory, or None when it is missing or not safely ours."""
    # /tmp, not TMPDIR: every pairbot of this user must find the same ledger.
    path = Path("/tmp") / f"{_LEDGER_PREFIX}{os.geteuid()}"  # noqa: S108  # checked below
    if create:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    # Another user could have made it first in a shared /tmp: only our own 0700 directory.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None
    return path


def _ledger_path(lending: Lending) -> Path | None:
    ledger = _ledger(create=False)
    if ledger is None:
        return None
    return ledger / f"{lending.pid}-{lending.key}.json"


def _record(lending: Lending) -> Path | None:
    if _ledger(create=True) is None:
        return None
    path = _ledger_path(lending)
    if path is None:
        return None
    temporary = path.with_suffix(".tmp")
    temporary.write_text(lending.to_json())
    temporary.replace(path)
    return path


def _alive(lending: Lending) -> bool:
    """Whether the pairbot that lent is still running (the same process, not a reused pid)."""
    if lending.started:
        return _process_start(lending.pid) == lending.started
    try:  # no start time was readable: the pid alone, erring on the side of alive
        os.kill(lending.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name in parentheses may hold spaces; the fields after it are plain.
    fields = text.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _glob_escape(path: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", path)


def _git_entry(git: Path) -> GitEntry:
    try:
        info = git.lstat()
    except FileNotFoundError:
        return GitEntry(git, None, None)
    if git.is_symlink() or not (git.is_file() or git.is_dir()):
        return GitEntry(git, None, None)
    if git.is_file():
        return GitEntry(git, git.read_text(), None)
    return GitEntry(git, None, (info.st_dev, info.st_ino))


def escaping_link(root: Path) -> str | None:
    """A symbolic link under `root` (outside .git) that leads out of it, if any.

    pairbot reads and publishes files of the worktree with its own rights once the agent is
    done; a link to /proc/self/environ or to a key file would make it read them for the agent.
    """
    top = root.resolve()
    kept = {root / name for name in KEPT_FROM_AGENT}  # never the agent's: no link of its
    for here, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if Path(here) / name not in kept]
        for name in [*dirs, *files]:
            path = Path(here) / name
            if not path.is_symlink():
                continue
            target = path.resolve()
            if target != top and top not in target.parents:
                return (
                    f"the agent left a symbolic link {path} pointing outside its worktree "
                    f"({path.readlink()}); remove it and retry"
                )
    return None


def _restore_git_entry(entry: GitEntry) -> str | None:
    """The agent owned the directory holding `.git`: a gitfile it rewrote is put back (it could
    point pairbot's git at a repository with hooks of the agent's); a replaced .git directory
    cannot be, so the step fails."""
    git = entry.path
    if entry.text is not None:
        if git.is_symlink() or not git.is_file() or git.read_text() != entry.text:
            if git.is_dir() and not git.is_symlink():
                shutil.rmtree(git)
            elif git.exists() or git.is_symlink():
                git.unlink()
            git.write_text(entry.text)
        return None
    if entry.inode is not None:
        try:
            info = git.lstat()
        except FileNotFoundError:
            info = None
        if info is None or git.is_symlink() or (info.st_dev, info.st_ino) != entry.inode:
            return (
                f"the agent replaced {git}; pairbot will not run git in a repository the agent "
                "controls. Restore the checkout and retry."
            )
    return None
