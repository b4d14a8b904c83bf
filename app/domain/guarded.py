"""Which changed paths an apply / red / fix iteration may not touch, each named with why. Pure.

The test gate (`app.domain.testsets`) trusts two things the agent could otherwise rewrite: the
tests `red` sealed, and the configuration that decides how the tests run. So an iteration whose
diff touches any of these is refused and sent back, naming each file (DESIGN.md, "The card
cycle"; issue #5):

    sealed        a test file sealed by `red` in an earlier round
    runner-config a file that configures the test runner (`DEFAULT_RUNNER_CONFIG`), at any depth
    pair-config   `.pair/config.yaml`: it holds the test command and `tests.mayModifyTests`
    junit         the configured JUnit report path: only the test command writes it

`tests.mayModifyTests` (glob patterns) lifts the first two for the paths it matches. It never
lifts the last two: a broad pattern such as `**` must not let the agent change its own test
command, widen its own allowance, or hand the engine a report it wrote itself.

Adding, modifying, deleting or renaming counts: a rename is checked under both names (moving a
sealed test away, or a file onto `conftest.py`, is touching it). Runner-config names match
case-insensitively, so `Conftest.py` on a case-insensitive checkout is caught as well.

`pyproject.toml` is not guarded by default although it can hold `[tool.pytest.ini_options]`:
it also holds the dependencies an apply legitimately adds, and the decision here is path-based
(no file contents). A project that wants it guarded adds it to `runner_config_patterns`.

Patterns (`glob_match`) are anchored at the repository root and match the whole path, like
Python 3.13's `PurePath.full_match`, which 3.11 lacks: `*`, `?` and `[…]` match within one
segment, a `**` segment matches any number of segments (none included), and a pattern ending
in `/` matches everything below that directory. So `conftest.py` means the root one only;
write `**/conftest.py` for every one.

`changed_paths` are the iteration's own changes (its commits against the step's start, before
the engine runs the tests), as plain paths or `ChangedPath`s; `parse_name_status` reads
`git diff --name-status -z`. A path git C-quoted (`"t\\303\\251st/conftest.py"`, what
`--name-status` without `-z` prints for unusual names) is unquoted first, so quoting cannot hide
a guarded name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final, Literal

PAIR_CONFIG: Final = ".pair/config.yaml"
MAY_MODIFY_KEY: Final = "tests.mayModifyTests"

# Files whose presence or content changes how a project's tests run, at any depth.
DEFAULT_RUNNER_CONFIG: Final[tuple[str, ...]] = (
    # pytest (pytest.toml and the dotted forms since pytest 9 / 8.1), its plugins and tox/nox
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/conftest.py",
    "**/tox.ini",
    "**/setup.cfg",
    "**/noxfile.py",
    "**/.coveragerc",
    # JavaScript and PHP runners
    "**/jest.config.*",
    "**/vitest.config.*",
    "**/karma.conf.*",
    "**/.mocharc.*",
    "**/phpunit.xml*",
)

Rule = Literal["sealed", "runner-config", "pair-config", "junit"]
ChangeKind = Literal["added", "modified", "deleted", "renamed", "copied"]


@dataclass(frozen=True)
class ChangedPath:
    """One entry of a diff; `old_path` is the source of a rename or copy."""

    path: str
    kind: ChangeKind = "modified"
    old_path: str | None = None


@dataclass(frozen=True)
class Violation:
    """A guarded path the iteration touched, and a sentence saying why it may not."""

    path: str
    reason: str
    rule: Rule


# ---------------------------------------------------------------- paths and patterns

_GIT_ESCAPES: Final = {
    "a": 0x07,
    "b": 0x08,
    "t": 0x09,
    "n": 0x0A,
    "v": 0x0B,
    "f": 0x0C,
    "r": 0x0D,
    '"': 0x22,
    "\\": 0x5C,
}
_GIT_ESCAPE: Final = re.compile(r'\\([0-7]{3}|[abtnvfr"\\])')


def unquote_git_path(path: str) -> str:
    """A path as git prints it with `core.quotePath` (C-quoted, octal UTF-8 bytes), unquoted.

    git quotes exactly the names with a `"`, a backslash, a control or a non-ASCII character,
    so an unquoted name never starts and ends with `"`; anything else is returned as is.
    """
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    out = bytearray()
    inner = path[1:-1]
    pos = 0
    for match in _GIT_ESCAPE.finditer(inner):
        out += inner[pos : match.start()].encode("utf-8", "surrogateescape")
        code = match.group(1)
        out.append(int(code, 8) & 0xFF if code[0].isdigit() else _GIT_ESCAPES[code])
        pos = match.end()
    out += inner[pos:].encode("utf-8", "surrogateescape")
    return out.decode("utf-8", "surrogateescape")


def _segments(text: str) -> tuple[str, ...]:
    """Root-relative segments: no empty or `.` segments, no leading `/` or `./`."""
    return tuple(part for part in text.split("/") if part not in ("", "."))


def normalize_path(path: str) -> str:
    """`path` unquoted (see `unquote_git_path`) and written root-relative with single `/`."""
    return "/".join(_segments(unquote_git_path(path.strip())))


def glob_match(pattern: str, path: str, *, case_sensitive: bool = True) -> bool:
    """Whether `pattern` matches the whole of `path` (see the module docstring for the syntax)."""
    if case_sensitive:
        pat, parts = _pattern(pattern), _segments(normalize_path(path))
    else:
        pat = _pattern(pattern.casefold())
        parts = _segments(normalize_path(path).casefold())
    return _match(pat, parts)


def _pattern(pattern: str) -> tuple[str, ...]:
    segments = _segments(pattern.strip())
    if pattern.strip().endswith("/") and segments:
        segments = (*segments, "**")
    # Consecutive `**` mean the same as one; collapsing keeps the matcher linear in them.
    collapsed: list[str] = []
    for segment in segments:
        if not (segment == "**" and collapsed and collapsed[-1] == "**"):
            collapsed.append(segment)
    return tuple(collapsed)


def _match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    # A small NFA over pattern positions: iterative, so a path thousands of segments deep (git
    # allows one) cannot exhaust the stack, and linear in pattern x path.
    def closure(states: set[int]) -> set[int]:
        # A `**` may match no segment: reaching it also reaches the position after it.
        out = set(states)
        for start in states:
            i = start
            while i < len(pattern) and pattern[i] == "**":
                i += 1
                out.add(i)
        return out

    states = closure({0})
    for part in parts:
        step: set[int] = set()
        for i in states:
            if i == len(pattern):
                continue
            if pattern[i] == "**":
                step.add(i)
            elif fnmatchcase(part, pattern[i]):
                step.add(i + 1)
        if not step:
            return False
        states = closure(step)
    return len(pattern) in states


_STATUS: Final[dict[str, ChangeKind]] = {
    "A": "added",
    "M": "modified",
    "T": "modified",  # a type change (file ↔ symlink) is a change of content
    "U": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
}


def parse_name_status(output: str) -> list[ChangedPath]:
    """Read `git diff --name-status -z` (`R100\\0old\\0new\\0` for renames and copies).

    Raises ValueError on a status letter git does not document or a truncated record.
    """
    fields = output.split("\0")
    if fields and fields[-1] == "":
        fields.pop()
    changes: list[ChangedPath] = []
    index = 0
    while index < len(fields):
        status = fields[index]
        kind = _STATUS.get(status[:1])
        if kind is None:
            raise ValueError(f"unknown git status {status!r} in --name-status output")
        arity = 2 if kind in ("renamed", "copied") else 1
        names = fields[index + 1 : index + 1 + arity]
        if len(names) != arity:
            raise ValueError(f"truncated --name-status record after status {status!r}")
        if arity == 2:
            changes.append(ChangedPath(names[1], kind, old_path=names[0]))
        else:
            changes.append(ChangedPath(names[0], kind))
        index += 1 + arity
    return changes


# ---------------------------------------------------------------- the decision


def _touched(changes: Iterable[str | ChangedPath]) -> dict[str, str]:
    """Every path a change touches → how (for the message), each path once."""
    touched: dict[str, str] = {}
    for change in changes:
        if isinstance(change, str):
            touched.setdefault(normalize_path(change), "")
            continue
        new = normalize_path(change.path)
        if change.kind == "renamed" and change.old_path is not None:
            old = normalize_path(change.old_path)
            touched.setdefault(old, f" (renamed to {new})")
            touched.setdefault(new, f" (renamed from {old})")
        elif change.kind == "deleted":
            touched.setdefault(new, " (deleted)")
        else:  # added, modified, or the new side of a copy (its source is not changed)
            touched.setdefault(new, "")
    touched.pop("", None)
    return touched


def _sealed_rounds(sealed_paths: Mapping[str, int] | Iterable[str]) -> dict[str, int | None]:
    if isinstance(sealed_paths, Mapping):
        return {normalize_path(p): r for p, r in sealed_paths.items()}
    return {normalize_path(p): None for p in sealed_paths}


def guarded_violations(
    changed_paths: Iterable[str | ChangedPath],
    *,
    sealed_paths: Mapping[str, int] | Iterable[str] = (),
    may_modify: Sequence[str] = (),
    runner_config_patterns: Sequence[str] = DEFAULT_RUNNER_CONFIG,
    junit: str | None = None,
) -> list[Violation]:
    """Each guarded path the iteration touched, sorted by path (empty: nothing guarded touched).

    `sealed_paths` maps a sealed test file to the fix round whose `red` sealed it (or just
    lists the files); `may_modify` is `tests.mayModifyTests`; `junit` is `tests.junit`.
    """
    sealed = _sealed_rounds(sealed_paths)
    junit_path = normalize_path(junit) if junit else None
    violations: list[Violation] = []
    for path, how in sorted(_touched(changed_paths).items()):
        shown = f"{path}{how}"
        if path == PAIR_CONFIG:
            violations.append(
                Violation(
                    path,
                    f"{shown} is pairbot's project config, which holds the test command and "
                    f"{MAY_MODIFY_KEY}; an iteration may never change it",
                    "pair-config",
                )
            )
            continue
        if path == junit_path:
            violations.append(
                Violation(
                    path,
                    f"{shown} is the JUnit report the engine reads (tests.junit); only the test "
                    "command writes it",
                    "junit",
                )
            )
            continue
        if any(glob_match(pattern, path) for pattern in may_modify):
            continue
        if path in sealed:
            round_no = sealed[path]
            when = f"in round {round_no}" if round_no is not None else "in an earlier round"
            violations.append(
                Violation(
                    path,
                    f"{shown} is a sealed test (sealed by red {when}); "
                    f"allowed only via {MAY_MODIFY_KEY}",
                    "sealed",
                )
            )
            continue
        pattern = next(
            (p for p in runner_config_patterns if glob_match(p, path, case_sensitive=False)),
            None,
        )
        if pattern is not None:
            violations.append(
                Violation(
                    path,
                    f"{shown} configures the test runner (matches {pattern}); "
                    f"allowed only via {MAY_MODIFY_KEY}",
                    "runner-config",
                )
            )
    return violations
