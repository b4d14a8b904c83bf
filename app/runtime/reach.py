"""Can another OS user get to a file? The kernel's permission walk, for `pairbot doctor`.

An isolated agent runs as `pairbot-agent`, so every program it starts (pairbot's interpreter
for `pairbot batch report`, the agent CLI, their script interpreters) must be reachable by that
user: every directory on the way searchable, the file itself executable (and readable, when it
is a script). As root, a venv under /root (0700) is not, and every isolated step fails.

    trace(path)                 I/O: the directories the kernel searches on the way to `path`
                                (symbolic links followed) and the file itself, as stat facts
    account(name)               I/O: the user's uid and groups, or "does not exist yet"
    blocked(who, trace, need)   pure: None when `who` gets there, else where and why not
    closed(who, trace)          pure: the directories above a workspace `who` cannot search

The pure side applies the POSIX ACL access check (owner, named user masked, owning and named
groups masked, other) to `Node`s, so it is testable without users, and a user that does not
exist yet is judged by the "other" bits alone (which is all a fresh `useradd` gets).
"""

from __future__ import annotations

import os
import pwd
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

__all__ = [
    "EXEC",
    "READ",
    "SEARCH",
    "AclEntry",
    "Blocked",
    "Node",
    "Trace",
    "Who",
    "account",
    "allows",
    "blocked",
    "closed",
    "describe",
    "parse_acl",
    "trace",
]

READ: Final = 0o4
SEARCH: Final = 0o1  # on a directory
EXEC: Final = 0o1  # on a file

# Tags of a Linux POSIX ACL entry (include/uapi/linux/posix_acl.h).
ACL_USER_OBJ: Final = 0x01
ACL_USER: Final = 0x02
ACL_GROUP_OBJ: Final = 0x04
ACL_GROUP: Final = 0x08
ACL_MASK: Final = 0x10
ACL_OTHER: Final = 0x20
_ACL_XATTR: Final = "system.posix_acl_access"
_ACL_VERSION: Final = 2
_MAX_LINKS: Final = 40  # the kernel's limit (ELOOP)


@dataclass(frozen=True)
class AclEntry:
    """One entry of a file's access ACL: tag (ACL_USER, ACL_GROUP, ACL_MASK, …), id, rwx bits."""

    tag: int
    id: int
    perm: int


@dataclass(frozen=True)
class Node:
    """The stat facts of one directory or file: `mode` is st_mode, `acl` its extended access ACL
    (empty when it has none)."""

    path: str
    mode: int
    uid: int
    gid: int
    acl: tuple[AclEntry, ...] = ()


@dataclass(frozen=True)
class Trace:
    """The way to `path`: each directory searched, in order, then `target` (None: `missing`
    names the component that does not exist or cannot be looked at). `shebang` is a script's
    `#!` line split (interpreter first); None for a binary or a directory."""

    path: str
    dirs: tuple[Node, ...]
    target: Node | None
    missing: str | None = None
    shebang: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Who:
    """An OS user as the kernel sees it; `uid` None: the user does not exist yet."""

    name: str
    uid: int | None
    gids: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Blocked:
    """Where `who` is stopped: the node (None when missing) and what it cannot do there."""

    path: str
    what: Literal["search", "execute", "read", "missing"]
    node: Node | None


# ---------------------------------------------------------------- pure


def allows(who: Who, node: Node, want: int) -> bool:
    """Whether `who` has every bit of `want` (rwx, 0-7) on `node`: POSIX.1e's access check."""
    if who.uid == 0:
        # Root passes every directory; it executes a file only if someone may.
        return not (want & EXEC) or stat.S_ISDIR(node.mode) or bool(node.mode & 0o111)
    if who.uid is not None and who.uid == node.uid:
        return (node.mode >> 6) & want == want
    entries = node.acl
    mask = next((e.perm for e in entries if e.tag == ACL_MASK), 0o7)
    named = next(
        (e for e in entries if e.tag == ACL_USER and who.uid is not None and e.id == who.uid),
        None,
    )
    if named is not None:
        return named.perm & mask & want == want
    owning = next((e.perm for e in entries if e.tag == ACL_GROUP_OBJ), (node.mode >> 3) & 0o7)
    groups = [owning & mask] if node.gid in who.gids else []
    groups += [e.perm & mask for e in entries if e.tag == ACL_GROUP and e.id in who.gids]
    if groups:
        # A matching group entry that grants wins; matching only ones that do not, denies.
        return any(perm & want == want for perm in groups)
    return node.mode & want == want


def blocked(
    who: Who, way: Trace, need: int, opened: frozenset[str] = frozenset()
) -> Blocked | None:
    """None when `who` reaches `way`'s target with `need` on it, else the first obstacle.
    `opened`: directories that will let `who` through by then (an ACL entry a step adds)."""
    for directory in way.dirs:
        if directory.path not in opened and not allows(who, directory, SEARCH):
            return Blocked(directory.path, "search", directory)
    if way.target is None:
        return Blocked(way.missing or way.path, "missing", None)
    if need & READ and not allows(who, way.target, READ):
        return Blocked(way.target.path, "read", way.target)
    if need & EXEC and not allows(who, way.target, EXEC):
        return Blocked(way.target.path, "execute", way.target)
    return None


def closed(who: Who, way: Trace) -> tuple[Node, ...]:
    """The directories on the way to a workspace that `who` cannot search (the workspace
    itself is lent to the agent for a step, so only what is above it counts)."""
    return tuple(node for node in way.dirs if not allows(who, node, SEARCH))


def describe(node: Node) -> str:
    """`drwx------ 0:0` plus `+acl` when it has one: what a reader needs to see why."""
    acl = "+acl" if node.acl else ""
    return f"{stat.filemode(node.mode)}{acl} {node.uid}:{node.gid}"


def parse_acl(raw: bytes) -> tuple[AclEntry, ...]:
    """The entries of a `system.posix_acl_access` value (version 2, little-endian); () when it is
    not one, which is read as "no ACL"."""
    if len(raw) < 4 or (len(raw) - 4) % 8 or struct.unpack_from("<I", raw)[0] != _ACL_VERSION:
        return ()
    return tuple(
        AclEntry(tag, ident, perm)
        for tag, perm, ident in struct.iter_unpack("<HHI", raw[4:])
        if tag in (ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER)
    )


# ---------------------------------------------------------------- the thin I/O


def _node(path: str, info: os.stat_result) -> Node:
    try:
        raw = os.getxattr(path, _ACL_XATTR, follow_symlinks=False)
    except OSError:  # no ACL (ENODATA), or a file system without them
        raw = b""
    return Node(path, info.st_mode, info.st_uid, info.st_gid, parse_acl(raw))


def _shebang(path: str) -> tuple[str, ...] | None:
    try:
        with open(path, "rb") as handle:  # noqa: PTH123  # a binary head, no Path needed
            head = handle.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    return tuple(words) or None


def trace(path: str) -> Trace:
    """Walk `path` as the kernel does (lstat each component, follow links): every directory
    searched on the way, and the file at the end. Never raises for a missing path."""
    if not Path(path).is_absolute():
        path = os.path.abspath(path)  # noqa: PTH100  # a str walk, not Path's resolve
    dirs: list[Node] = []
    current = "/"
    try:
        root_node = _node("/", os.lstat("/"))
    except OSError:
        return Trace(path, (), None, "/")
    dirs.append(root_node)
    pending = [part for part in path.split("/") if part]
    links = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current) or "/"  # noqa: PTH120
            continue
        here = os.path.join(current, name)  # noqa: PTH118
        try:
            info = os.lstat(here)
        except OSError:
            return Trace(path, tuple(dirs), None, here)
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > _MAX_LINKS:
                return Trace(path, tuple(dirs), None, here)
            target = str(Path(here).readlink())
            if target.startswith("/"):
                current = "/"
            pending = [part for part in target.split("/") if part] + pending
            continue
        node = _node(here, info)
        if not pending:
            script = _shebang(here) if stat.S_ISREG(info.st_mode) else None
            return Trace(path, tuple(dirs), node, None, script)
        if not stat.S_ISDIR(info.st_mode):
            return Trace(path, tuple(dirs), None, here)
        dirs.append(node)
        current = here
    # The path was "/" itself (or only links to it).
    return Trace(path, tuple(dirs[:-1]), dirs[-1], None)


def account(name: str) -> Who:
    """The user `name` with its groups; uid None when it does not exist (yet)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return Who(name, None)
    try:
        gids = frozenset(os.getgrouplist(name, entry.pw_gid))
    except OSError:
        gids = frozenset({entry.pw_gid})
    return Who(name, entry.pw_uid, gids)
