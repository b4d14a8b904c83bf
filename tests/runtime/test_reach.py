"""`app.runtime.reach`: the POSIX permission walk as a table over stat facts, and the collector on
real files (an ACL set with the real setfacl when the suite runs as root)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from app.runtime import reach
from app.runtime.reach import (
    ACL_GROUP,
    ACL_GROUP_OBJ,
    ACL_MASK,
    ACL_OTHER,
    ACL_USER,
    ACL_USER_OBJ,
    EXEC,
    READ,
    SEARCH,
    AclEntry,
    Node,
    Trace,
    Who,
)

AGENT = Who("pairbot-agent", 999, frozenset({995}))
NEW = Who("pairbot-agent", None)  # not created yet: only "other" counts
ROOT = Who("root", 0, frozenset({0}))
DIR = 0o040000
FILE = 0o100000


def acl(*entries: tuple[int, int, int], mode: int = 0) -> tuple[AclEntry, ...]:
    """The full ACL the kernel keeps: owner, owning group, other from `mode`, plus `entries`."""
    base = [
        AclEntry(ACL_USER_OBJ, 0xFFFFFFFF, (mode >> 6) & 7),
        AclEntry(ACL_GROUP_OBJ, 0xFFFFFFFF, (mode >> 3) & 7),
        AclEntry(ACL_OTHER, 0xFFFFFFFF, mode & 7),
    ]
    return (*base, *(AclEntry(*entry) for entry in entries))


@pytest.mark.parametrize(
    ("who", "node", "want", "allowed"),
    [
        pytest.param(AGENT, Node("/d", DIR | 0o755, 0, 0), SEARCH, True, id="other-x"),
        pytest.param(AGENT, Node("/root", DIR | 0o700, 0, 0), SEARCH, False, id="closed-0700"),
        pytest.param(AGENT, Node("/h", DIR | 0o750, 0, 995), SEARCH, True, id="owning-group"),
        pytest.param(AGENT, Node("/h", DIR | 0o750, 0, 100), SEARCH, False, id="other-group"),
        pytest.param(
            AGENT, Node("/h", DIR | 0o705, 0, 995), SEARCH, False, id="group-class-denies-first"
        ),
        pytest.param(AGENT, Node("/h", DIR | 0o075, 999, 0), SEARCH, False, id="owner-class-only"),
        pytest.param(AGENT, Node("/h", DIR | 0o700, 999, 0), SEARCH, True, id="owner"),
        pytest.param(
            AGENT,
            Node("/h", DIR | 0o710, 0, 0, acl((ACL_USER, 999, 1), (ACL_MASK, 0, 1), mode=0o700)),
            SEARCH,
            True,
            id="acl-named-user",
        ),
        pytest.param(
            AGENT,
            Node("/h", DIR | 0o700, 0, 0, acl((ACL_USER, 999, 1), (ACL_MASK, 0, 0), mode=0o700)),
            SEARCH,
            False,
            id="acl-named-user-masked",
        ),
        pytest.param(
            AGENT,
            Node("/h", DIR | 0o710, 0, 0, acl((ACL_USER, 123, 1), (ACL_MASK, 0, 1), mode=0o700)),
            SEARCH,
            False,
            id="acl-other-user",
        ),
        pytest.param(
            AGENT,
            Node("/h", DIR | 0o750, 0, 0, acl((ACL_GROUP, 995, 5), (ACL_MASK, 0, 5), mode=0o700)),
            SEARCH,
            True,
            id="acl-named-group",
        ),
        pytest.param(
            NEW,
            Node("/h", DIR | 0o710, 0, 0, acl((ACL_USER, 999, 1), (ACL_MASK, 0, 1), mode=0o700)),
            SEARCH,
            False,
            id="new-user-gets-no-acl-entry",
        ),
        pytest.param(NEW, Node("/d", DIR | 0o751, 0, 0), SEARCH, True, id="new-user-other-x"),
        pytest.param(NEW, Node("/f", FILE | 0o755, 999, 0), EXEC, True, id="new-user-owns-nothing"),
        pytest.param(AGENT, Node("/f", FILE | 0o750, 0, 0), EXEC, False, id="file-not-for-other"),
        pytest.param(AGENT, Node("/s", FILE | 0o711, 0, 0), READ | EXEC, False, id="script-unread"),
        pytest.param(ROOT, Node("/root", DIR | 0o700, 5, 5), SEARCH, True, id="root-any-dir"),
        pytest.param(ROOT, Node("/f", FILE | 0o644, 5, 5), EXEC, False, id="root-no-x-bit"),
    ],
)
def test_allows(who: Who, node: Node, want: int, allowed: bool) -> None:
    assert reach.allows(who, node, want) is allowed


def _trace(
    *dirs: tuple[str, int], target: Node | None, shebang: tuple[str, ...] | None = None
) -> Trace:
    nodes = tuple(Node(path, DIR | mode, 0, 0) for path, mode in dirs)
    return Trace("/x", nodes, target, None if target else "/x", shebang)


@pytest.mark.parametrize(
    ("way", "need", "opened", "expected"),
    [
        pytest.param(
            _trace(("/", 0o755), ("/usr", 0o755), target=Node("/usr/p", FILE | 0o755, 0, 0)),
            EXEC,
            frozenset(),
            None,
            id="reachable",
        ),
        pytest.param(
            _trace(("/", 0o755), ("/root", 0o700), target=Node("/root/p", FILE | 0o755, 0, 0)),
            EXEC,
            frozenset(),
            ("/root", "search"),
            id="closed-parent",
        ),
        pytest.param(
            _trace(("/", 0o755), ("/root", 0o700), target=Node("/root/p", FILE | 0o755, 0, 0)),
            EXEC,
            frozenset({"/root"}),
            None,
            id="parent-opened-by-setfacl",
        ),
        pytest.param(
            _trace(("/", 0o755), target=Node("/p", FILE | 0o700, 0, 0)),
            EXEC,
            frozenset(),
            ("/p", "execute"),
            id="not-executable",
        ),
        pytest.param(
            _trace(("/", 0o755), target=Node("/p", FILE | 0o711, 0, 0)),
            READ | EXEC,
            frozenset(),
            ("/p", "read"),
            id="script-not-readable",
        ),
        pytest.param(
            _trace(("/", 0o755), target=None), EXEC, frozenset(), ("/x", "missing"), id="missing"
        ),
    ],
)
def test_blocked(
    way: Trace, need: int, opened: frozenset[str], expected: tuple[str, str] | None
) -> None:
    found = reach.blocked(AGENT, way, need, opened)
    assert (None if found is None else (found.path, found.what)) == expected


def test_parse_acl_reads_the_kernel_format() -> None:
    entries = [(ACL_USER_OBJ, 7, 0xFFFFFFFF), (ACL_USER, 1, 999), (ACL_MASK, 1, 0xFFFFFFFF)]
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    assert reach.parse_acl(raw) == (
        AclEntry(ACL_USER_OBJ, 0xFFFFFFFF, 7),
        AclEntry(ACL_USER, 999, 1),
        AclEntry(ACL_MASK, 0xFFFFFFFF, 1),
    )
    assert reach.parse_acl(b"") == ()
    assert reach.parse_acl(struct.pack("<I", 1) + raw[4:]) == ()  # another version: no ACL
    assert reach.parse_acl(raw[:-1]) == ()  # torn


def test_trace_follows_links_and_records_every_directory_searched(tmp_path: Path) -> None:
    real = tmp_path / "real" / "bin"
    real.mkdir(parents=True)
    program = real / "tool"
    program.write_text("#!/usr/bin/env node --flag\n")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "tool").symlink_to("../real/bin/tool")  # relative, as npm makes them
    way = reach.trace(str(tmp_path / "links" / "tool"))
    assert way.target is not None and way.target.path == str(program)
    paths = [node.path for node in way.dirs]
    assert paths[0] == "/"
    assert paths[-4:] == [
        str(tmp_path),
        str(tmp_path / "links"),
        str(tmp_path / "real"),
        str(real),
    ]
    assert way.shebang == ("/usr/bin/env", "node", "--flag")
    assert reach.trace(str(tmp_path / "nope" / "x")).missing == str(tmp_path / "nope")
    (tmp_path / "loop").symlink_to("loop")
    assert reach.trace(str(tmp_path / "loop")).target is None
    assert reach.trace("/").target is not None


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setfacl") is None, reason="needs root and setfacl"
)
def test_trace_reads_a_real_acl(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    subprocess.run(["setfacl", "-m", "u:4242:x", str(closed)], check=True)
    node = reach.trace(str(closed)).target
    assert node is not None
    assert AclEntry(ACL_USER, 4242, 1) in node.acl
    assert reach.allows(Who("someone", 4242), node, SEARCH)
    assert not reach.allows(Who("other", 4343), node, SEARCH)
    assert reach.describe(node).startswith("drwx--x---+acl 0:0")


def test_account_of_a_missing_user_has_no_uid() -> None:
    assert reach.account("no-such-user-x") == Who("no-such-user-x", None)
    assert reach.account("root").uid == 0
