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

Lendings overlap: the App's worker runs several steps at once in one process, and several
pairbots of one OS user run side by side. Each lending, take-back and sweep runs under the
ledger's lock (lending_ledger.py), and what one of them leaves lent because another live
lending still needs it — a shared tree, a held directory, a way through a closed one — is
decided by lending_shared.py: the last lending of a directory gives it back.

Every lending is written to the ledger before anything changes, and removed once taken back.
A pairbot killed mid-step leaves its record, and the kernel drops the lock that said it was
alive; the next pairbot of the same user that lends or starts (`sweep`) takes the files back,
so a checkout is never left owned by the agent user.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from app.errors import UserError
from app.runtime import lending_ledger
from app.runtime.isolation import AgentAccount, run_tool
from app.runtime.lending_record import HELD, KEPT_FROM_AGENT, GitEntry, Lending
from app.runtime.lending_shared import Sharing, held_modes, sharing

__all__ = ["KEPT_FROM_AGENT", "GitEntry", "Lending", "escaping_link", "lend", "sweep", "take_back"]


def lend(
    account: AgentAccount, root: Path, writable: Sequence[Path], home: Path | None = None
) -> Lending:
    """Hand `root` (less what is kept) and `writable` to the agent user; undone on failure."""
    uid, gid = account.ensure()
    if not root.is_dir():
        raise UserError(f"agent isolation: cannot lend {root} to the agent: not a directory")
    with lending_ledger.locked() as ledger:
        _sweep(ledger)
        others = _live(ledger)
        modes = held_modes(others)
        # A directory another lending holds already lets the agent write: no search-only entry.
        account.open_way([root, *writable], skip=frozenset(modes))
        setfacl = account.setfacl()
        held = tuple(
            (path, modes.get(path, path.stat().st_mode & 0o7777))
            for path in (root / name if name else root for name in HELD)
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
            started=lending_ledger.process_start(os.getpid()) or "",
            key=secrets.token_hex(8),
        )
        ledger.write(lending)
        try:
            _hand_over(account, lending, f"{uid}:{gid}", setfacl, others)
        except BaseException:
            # Undo what was lent; the failure that stopped the lending is the one to report.
            unknown = GitEntry(lending.git.path, None, None)  # no gitfile to put back
            with contextlib.suppress(UserError):
                _reclaim(dataclasses.replace(lending, git=unknown), sharing(lending, others))
            ledger.forget(lending)
            raise
    return lending


def take_back(lending: Lending) -> str | None:
    """Take back what no other live lending needs, and forget the lending; None, or why
    pairbot must not run git in its root any more."""
    with lending_ledger.locked() as ledger:
        try:
            others = [other for other in _live(ledger) if other.key != lending.key]
            return _reclaim(lending, sharing(lending, others))
        finally:
            ledger.forget(lending)


def sweep() -> list[str]:
    """Take back every lending of a pairbot (of this user) that is no longer running; what it
    found wrong with each tree, if anything."""
    with lending_ledger.locked() as ledger:
        return _sweep(ledger)


def _sweep(ledger: lending_ledger.Ledger) -> list[str]:
    problems: list[str] = []
    for lending in _records(ledger):
        if ledger.alive(lending):
            continue  # still running: its own step takes back what it lent
        # What the dead lending shared with any other record (live, or dead and still to be
        # swept) stays until the last of them is taken back.
        others = [other for other in _records(ledger) if other.key != lending.key]
        try:
            problem = _reclaim(lending, sharing(lending, others))
        except (UserError, OSError) as err:  # a sweep never stops the run that found it
            problem = str(err)
        finally:
            ledger.forget(lending)
        if problem is not None:
            problems.append(problem)
    ledger.drop_orphans()
    return problems


def _records(ledger: lending_ledger.Ledger) -> list[Lending]:
    """Every lending the ledger knows: this process's own, then the records of the others."""
    own = [record for record in ledger.own() if isinstance(record, Lending)]
    seen = {record.key for record in own}
    found: list[Lending] = []
    for path in ledger.names():
        try:
            record = Lending.from_json(path.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            path.unlink(missing_ok=True)  # never a record of ours: written whole, then renamed
            continue
        if record.key not in seen:
            found.append(record)
    return [*own, *found]


def _live(ledger: lending_ledger.Ledger) -> list[Lending]:
    return [record for record in _records(ledger) if ledger.alive(record)]


def _hand_over(
    account: AgentAccount,
    lending: Lending,
    owner: str,
    setfacl: str | None,
    others: Sequence[Lending],
) -> None:
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
    # Every directory a lending holds stays pairbot's, another lending's inside this tree too.
    holding = [*held, *(path for path in held_modes(others) if path not in held)]
    run_tool(_chown_tree(lending, owner, lend=True, held=holding), f"hand {root} to {lending.user}")
    account.chown([p for p in lending.writable if p.exists()], *map(int, owner.split(":")))


def _chown_tree(
    lending: Lending,
    owner: str,
    *,
    lend: bool,
    held: Sequence[Path] = (),
    prune: Sequence[Path] = (),
) -> list[str]:
    """`find` handing the lent tree to `owner`: a kept path and everything under it is left
    out (a card's worktree under `.git`, another card's journal lent to its own step meanwhile),
    and so is what another live lending still has (`prune`) and each held directory itself
    (`held`: when lending). Taking back without held directories (no setfacl), the agent owned
    `.pair` and could have put anything under it: all of it but `.git` comes back. -path takes
    a pattern, so the names are escaped."""
    root = lending.root
    kept = [root / k for k in (KEPT_FROM_AGENT if lend or lending.held else (".git",))]
    argv = [*lending.admin, "find", str(root), *_any_path([*map(str, kept), *map(str, prune)])]
    argv += ["-prune", "-o"]
    if lend and held:
        argv += [*_any_path([str(p) for p in held]), "-o"]
    return [*argv, "-exec", "chown", "-h", owner, "{}", "+"]


def _any_path(paths: Sequence[str]) -> list[str]:
    expression = ["("]
    for index, path in enumerate(paths):
        expression += [*(["-o"] if index else []), "-path", _glob_escape(path)]
    return [*expression, ")"]


def _reclaim(lending: Lending, shared: Sharing) -> str | None:
    """Take back what `shared` does not leave to another lending; then the HOME, the git entry
    and the links are checked as every take-back checks them."""
    admin, mine = lending.admin, f"{os.geteuid()}:{os.getegid()}"
    # A worktree's gitfile the agent may have replaced (by a directory) comes back whole; a
    # repository's .git directory was never the agent's.
    gitfile = [lending.git.path] if lending.git.text is not None else []
    present = [
        p
        for p in (*lending.writable, *gitfile)
        if (p.exists() or p.is_symlink()) and p not in shared.writable
    ]
    try:
        if lending.root.is_dir() and not shared.tree:
            run_tool(
                _chown_tree(lending, mine, lend=False, prune=shared.prune),
                f"take {lending.root} back from {lending.user}",
            )
        if present:
            run_tool(
                [*admin, "chown", "-hR", mine, "--", *map(str, present)],
                f"take {present[0]} back from {lending.user}",
            )
        _release_held(lending, shared)
    finally:
        if lending.home is not None:
            with contextlib.suppress(UserError):
                run_tool([*admin, "rm", "-rf", "--", str(lending.home)], f"remove {lending.home}")
    return _restore_git_entry(lending.git) or escaping_link(lending.root)


def _release_held(lending: Lending, shared: Sharing) -> None:
    """The ACL entry and mode of each held directory no other lending holds: a way through,
    search only, where another agent still needs one; else nothing, and the mode it had."""
    held = [
        (p, mode)
        for p, mode in lending.held
        if p.is_dir() and not p.is_symlink() and p not in shared.held
    ]
    tool = shutil.which("setfacl")
    if held and tool is not None:
        admin, user = lending.admin, lending.user
        passing = [str(p) for p, _ in held if p in shared.passage]
        removed = [str(p) for p, _ in held if p not in shared.passage]
        if passing:
            run_tool(
                [*admin, tool, "-m", f"u:{user}:x", "--", *passing],
                f"leave {user} only a way through {passing[0]}",
            )
        if removed:
            run_tool(
                [*admin, tool, "-x", f"u:{user}", "--", *removed],
                f"take {removed[0]} back from {user}",
            )
    for path, mode in held:
        if stat.S_IMODE(path.stat().st_mode) != mode:  # a failed lending may not have
            path.chmod(mode)


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
