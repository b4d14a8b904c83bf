"""Which changed paths an agent iteration may not touch, each named with why. Pure.

The test gate (`app.domain.review.testsets`) trusts what decides passing: the tests that existed
before the iteration, the tests `red` sealed, the configuration that decides how the tests run
and the manifests that decide what the tests run against. An iteration whose diff touches any of
these is refused and sent back, naming each file (docs/cycle.md, "The converge gate"):

    pair-config    `.pair/config.yaml`: it holds the test command and the allowances
    junit          the configured JUnit report path: only the test command writes it
    sealed         a test file sealed by `red` in an earlier round
    runner-config  a file that configures the test runner (`DEFAULT_RUNNER_CONFIG`), any depth
    manifest       a dependency manifest or lockfile (`DEFAULT_MANIFESTS`), any depth
    protected-test a test file (`DEFAULT_TEST_FILES`) that existed before the iteration: edited,
                   deleted or renamed away
    new-test       a new test file written by a stage that may not add tests (`STAGE_POLICY`)

`tests.mayModifyTests` (glob patterns) lifts sealed, runner-config, protected-test and new-test
for the paths it matches; `tests.mayModifyManifests` lifts manifest. Neither ever lifts the
first two: a broad pattern such as `**` must not let the agent change its own test command,
widen its own allowance, or hand the engine a report it wrote itself.

"Existed before" is judged by the diff itself: a path the iteration's diff (against the commit
the step started from) shows as modified, deleted or renamed away was there at that commit, so
no second listing is needed; an added path, or the new side of a rename or copy, is new. A
plain path string (no change kind) is taken as modified — when unsure, assume it existed.

Adding, modifying, deleting or renaming counts: a rename is checked under both names (moving a
sealed test away, or a file onto `conftest.py`, is touching it). Runner-config and manifest
names match case-insensitively, so `Conftest.py` on a case-insensitive checkout is caught as
well; test-file names match case-sensitively (`*Test.java` must not match `Latest.java`).

`pyproject.toml`, `package.json` and `Cargo.toml` are manifests: they hold the dependencies and,
often, the runner's configuration too (`[tool.pytest.ini_options]`, `scripts.test`, `[[test]]`).
The decision is path-based (no file contents), so they are guarded whole; a project whose cards
add dependencies allows them with `tests.mayModifyManifests`, knowingly letting the runner's
section in them change as well.

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
MAY_MODIFY_MANIFESTS_KEY: Final = "tests.mayModifyManifests"

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

# Dependency manifests and lockfiles, at any depth: they decide what the tests run against
# (a pinned-down dependency can make a failing test pass), and several configure the runner too.
DEFAULT_MANIFESTS: Final[tuple[str, ...]] = (
    # Python
    "**/pyproject.toml",
    "**/setup.py",
    "**/requirements*.txt",
    "**/constraints*.txt",
    "**/Pipfile",
    "**/Pipfile.lock",
    "**/poetry.lock",
    "**/uv.lock",
    "**/pdm.lock",
    # JavaScript
    "**/package.json",
    "**/package-lock.json",
    "**/npm-shrinkwrap.json",
    "**/yarn.lock",
    "**/pnpm-lock.yaml",
    "**/pnpm-workspace.yaml",
    "**/bun.lock",
    "**/bun.lockb",
    # Rust, Go, Ruby, PHP, JVM, .NET
    "**/Cargo.toml",
    "**/Cargo.lock",
    "**/go.mod",
    "**/go.sum",
    "**/go.work",
    "**/Gemfile",
    "**/Gemfile.lock",
    "**/composer.json",
    "**/composer.lock",
    "**/pom.xml",
    "**/build.gradle",
    "**/build.gradle.kts",
    "**/settings.gradle",
    "**/settings.gradle.kts",
    "**/*.csproj",
    "**/packages.lock.json",
)

# What a test file looks like by path, in the common layouts. Matched case-sensitively. Tests a
# language keeps inside source files (Rust's `#[cfg(test)]`) have no path of their own; the
# disappearance rule of `app.domain.review.testsets` still sees them by id.
DEFAULT_TEST_FILES: Final[tuple[str, ...]] = (
    # directories that hold tests, their fixtures and golden files
    "**/tests/**",
    "**/test/**",
    "**/__tests__/**",
    "**/spec/**",
    "**/testdata/**",
    # file names, wherever they live
    "**/test_*.py",
    "**/*_test.py",
    "**/*_test.go",
    "**/*.test.*",
    "**/*.spec.*",
    "**/*_spec.rb",
    "**/*Test.java",
    "**/*Tests.java",
    "**/*Test.kt",
    "**/*Tests.cs",
    "**/*Test.php",
)

Rule = Literal[
    "sealed", "runner-config", "pair-config", "junit", "manifest", "protected-test", "new-test"
]
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


@dataclass(frozen=True)
class StagePolicy:
    """What one agent stage may do to the tests, and what the engine checks after it.

    No stage may edit, delete or rename away a protected file (an existing test, the runner's
    configuration, a manifest) without an allowance: that is not a column, it is the gate.
    """

    guarded: bool  # its diff is checked against the protected paths
    runs_tests: bool  # the tests run before and after it, and the results are compared
    may_add_tests: bool  # it may create new test files
    seals: bool  # the tests it makes newly fail are sealed for the later steps


# The stages of a card (`app.engine.transition`). `verify` is unguarded because its edits are
# discarded whole (a reviewer changes nothing); `verify-red` (the red contract verifier) is
# read-only too, and stricter: a result that changed any file is refused, not discarded
# (`app.cycle.card_vet`); `propose` writes the plan and nothing else. `red`'s tests are sealed
# once the red verifier accepts its contract.
STAGE_POLICY: Final[Mapping[str, StagePolicy]] = {
    "propose": StagePolicy(guarded=True, runs_tests=False, may_add_tests=False, seals=False),
    "apply": StagePolicy(guarded=True, runs_tests=True, may_add_tests=True, seals=False),
    "red": StagePolicy(guarded=True, runs_tests=True, may_add_tests=True, seals=True),
    "fix": StagePolicy(guarded=True, runs_tests=True, may_add_tests=True, seals=False),
    "verify": StagePolicy(guarded=False, runs_tests=False, may_add_tests=False, seals=False),
    "verify-red": StagePolicy(guarded=False, runs_tests=False, may_add_tests=False, seals=False),
}
# Anything else (a batch's `decompose`) touches no code the gate is about.
UNGUARDED: Final = StagePolicy(guarded=False, runs_tests=False, may_add_tests=False, seals=False)


def stage_policy(transition: str) -> StagePolicy:
    """The row of `STAGE_POLICY` for `transition` (`UNGUARDED` for any other)."""
    return STAGE_POLICY.get(transition, UNGUARDED)


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


@dataclass(frozen=True)
class _Touch:
    how: str  # for the message: "", " (deleted)", " (renamed to …)"
    existed: bool  # the path was there when the iteration started


def _touched(changes: Iterable[str | ChangedPath]) -> dict[str, _Touch]:
    """Every path a change touches → how, each path once (an existing side wins)."""
    touched: dict[str, _Touch] = {}

    def add(path: str, how: str, existed: bool) -> None:
        seen = touched.get(path)
        if seen is None or (existed and not seen.existed):
            touched[path] = _Touch(how if seen is None else seen.how, existed)

    for change in changes:
        if isinstance(change, str):
            add(normalize_path(change), "", True)  # no kind: assume it existed
            continue
        new = normalize_path(change.path)
        if change.kind == "renamed" and change.old_path is not None:
            old = normalize_path(change.old_path)
            add(old, f" (renamed to {new})", True)
            add(new, f" (renamed from {old})", False)
        elif change.kind == "deleted":
            add(new, " (deleted)", True)
        elif change.kind == "modified":
            add(new, "", True)
        else:  # added, or the new side of a copy (its source is not changed)
            add(new, "", False)
    touched.pop("", None)
    return touched


def _sealed_rounds(sealed_paths: Mapping[str, int] | Iterable[str]) -> dict[str, int | None]:
    if isinstance(sealed_paths, Mapping):
        return {normalize_path(p): r for p, r in sealed_paths.items()}
    return {normalize_path(p): None for p in sealed_paths}


def _first(patterns: Sequence[str], path: str, *, case_sensitive: bool) -> str | None:
    return next((p for p in patterns if glob_match(p, path, case_sensitive=case_sensitive)), None)


def guarded_violations(
    changed_paths: Iterable[str | ChangedPath],
    *,
    sealed_paths: Mapping[str, int] | Iterable[str] = (),
    may_modify: Sequence[str] = (),
    may_modify_manifests: Sequence[str] = (),
    runner_config_patterns: Sequence[str] = DEFAULT_RUNNER_CONFIG,
    manifest_patterns: Sequence[str] = DEFAULT_MANIFESTS,
    test_patterns: Sequence[str] = DEFAULT_TEST_FILES,
    junit: str | None = None,
    transition: str = "apply",
) -> list[Violation]:
    """Each guarded path the iteration touched, sorted by path (empty: nothing guarded touched).

    `sealed_paths` maps a sealed test file to the fix round whose `red` sealed it (or just
    lists the files); `may_modify` is `tests.mayModifyTests`, `may_modify_manifests`
    `tests.mayModifyManifests`; `junit` is `tests.junit`; `transition` the stage whose diff
    this is (`STAGE_POLICY`: whether it may add tests). An unguarded stage has no violations.
    """
    policy = stage_policy(transition)
    if not policy.guarded:
        return []
    sealed = _sealed_rounds(sealed_paths)
    junit_path = normalize_path(junit) if junit else None
    violations: list[Violation] = []
    for path, touch in sorted(_touched(changed_paths).items()):
        violation = _violation(
            path,
            touch,
            policy=policy,
            transition=transition,
            sealed=sealed,
            junit_path=junit_path,
            may_modify=may_modify,
            may_modify_manifests=may_modify_manifests,
            runner_config_patterns=runner_config_patterns,
            manifest_patterns=manifest_patterns,
            test_patterns=test_patterns,
        )
        if violation is not None:
            violations.append(violation)
    return violations


def _violation(
    path: str,
    touch: _Touch,
    *,
    policy: StagePolicy,
    transition: str,
    sealed: Mapping[str, int | None],
    junit_path: str | None,
    may_modify: Sequence[str],
    may_modify_manifests: Sequence[str],
    runner_config_patterns: Sequence[str],
    manifest_patterns: Sequence[str],
    test_patterns: Sequence[str],
) -> Violation | None:
    """The first rule `path` breaks, in the order of the module docstring; None: it is free."""
    shown = f"{path}{touch.how}"
    if path == PAIR_CONFIG:
        return Violation(
            path,
            f"{shown} is pairbot's project config, which holds the test command and "
            f"{MAY_MODIFY_KEY}; an iteration may never change it",
            "pair-config",
        )
    if path == junit_path:
        return Violation(
            path,
            f"{shown} is the JUnit report the engine reads (tests.junit); only the test "
            "command writes it",
            "junit",
        )
    manifest = _first(manifest_patterns, path, case_sensitive=False)
    if manifest is not None:
        # Checked before the test allowance: `mayModifyTests: ["**"]` is about tests, and must
        # not quietly let the dependencies change as well.
        if any(glob_match(pattern, path) for pattern in may_modify_manifests):
            return None
        return Violation(
            path,
            f"{shown} is a dependency manifest (matches {manifest}); "
            f"allowed only via {MAY_MODIFY_MANIFESTS_KEY}",
            "manifest",
        )
    if any(glob_match(pattern, path) for pattern in may_modify):
        return None
    if path in sealed:
        round_no = sealed[path]
        when = f"in round {round_no}" if round_no is not None else "in an earlier round"
        return Violation(
            path,
            f"{shown} is a sealed test (sealed by red {when}); allowed only via {MAY_MODIFY_KEY}",
            "sealed",
        )
    config = _first(runner_config_patterns, path, case_sensitive=False)
    if config is not None:
        return Violation(
            path,
            f"{shown} configures the test runner (matches {config}); "
            f"allowed only via {MAY_MODIFY_KEY}",
            "runner-config",
        )
    test = _first(test_patterns, path, case_sensitive=True)
    if test is not None and touch.existed:
        return Violation(
            path,
            f"{shown} is an existing test (matches {test}): {transition} may add tests but not "
            f"edit, delete or rename existing ones; allowed only via {MAY_MODIFY_KEY}",
            "protected-test",
        )
    if test is not None and not policy.may_add_tests:
        return Violation(
            path,
            f"{shown} is a new test (matches {test}), and {transition} may not write tests; "
            f"allowed only via {MAY_MODIFY_KEY}",
            "new-test",
        )
    return None
