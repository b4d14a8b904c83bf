"""Which test command a project obviously has, and the note a step carries when none is set. Pure.

The test gate (`app.domain.review.testsets`) runs only when `.pair/config.yaml` sets
`tests.command`. Without it nothing is run or compared, and that must never be silent: every
apply / red / fix result then says "no test gate applies" in its message (which is the step's row
in the card's tracking comment and what `pairbot card` prints), naming the runner the project's
files point to, so a maintainer sees what to configure.

The detection reads the repository's file listing (and the root `package.json`'s text), in
the order of `DETECTION`:

    pytest          `pyproject.toml` or `pytest.ini` at the root, or Python files under `tests/`
    npm test        a root `package.json` with a `scripts.test` other than npm's placeholder
    cargo test      `Cargo.toml` at the root
    go test ./...   `go.mod` at the root

A detected command is suggested, never run: the gate compares JUnit reports, and only the
project knows how its runner writes one (`--junitxml`, a jest reporter, nextest, gotestsum);
a guessed command that writes none would send back every step until the card parks blocked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Final

from app.domain.review.guarded import normalize_path

# What `npm init` writes when there are no tests: a script that only fails.
NPM_PLACEHOLDER: Final = 'echo "Error: no test specified" && exit 1'


@dataclass(frozen=True)
class Detected:
    """A runner the project's files point to: its usual command and the file that says so."""

    runner: str
    command: str
    evidence: str


@dataclass(frozen=True)
class _Files:
    paths: frozenset[str]
    package_json: str | None


def _pytest(files: _Files) -> str | None:
    for marker in ("pytest.ini", "pyproject.toml"):
        if marker in files.paths:
            return marker
    if any(p.startswith("tests/") and p.endswith(".py") for p in files.paths):
        return "Python files under tests/"
    return None


def _npm(files: _Files) -> str | None:
    if "package.json" not in files.paths or files.package_json is None:
        return None
    try:
        data = json.loads(files.package_json)
    except ValueError:  # a broken package.json says nothing about its tests
        return None
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if isinstance(test, str) and test.strip() and test.strip() != NPM_PLACEHOLDER:
        return "package.json scripts.test"
    return None


def _root_file(name: str) -> Callable[[_Files], str | None]:
    def detect(files: _Files) -> str | None:
        return name if name in files.paths else None

    return detect


# (runner, command, detector) in the order they are tried; every match is reported.
DETECTION: Final[tuple[tuple[str, str, Callable[[_Files], str | None]], ...]] = (
    ("pytest", "pytest", _pytest),
    ("npm", "npm test", _npm),
    ("cargo", "cargo test", _root_file("Cargo.toml")),
    ("go", "go test ./...", _root_file("go.mod")),
)


def detect_test_commands(
    files: Iterable[str], package_json: str | None = None
) -> tuple[Detected, ...]:
    """Every runner `files` (root-relative paths, `/`-separated) point to, in `DETECTION` order.

    `package_json` is the root `package.json`'s text when the project has one.
    """
    listing = _Files(frozenset(normalize_path(p) for p in files), package_json)
    found: list[Detected] = []
    for runner, command, detector in DETECTION:
        evidence = detector(listing)
        if evidence is not None:
            found.append(Detected(runner, command, evidence))
    return tuple(found)


def no_gate_note(detected: Collection[Detected]) -> str:
    """The sentence an unchecked step's message starts with: no gate, and what would make one."""
    head = "no test gate applies: tests.command is not set, so no tests were run or compared"
    if not detected:
        return (
            f"{head} (no test runner detected); set tests.command and tests.junit in "
            ".pair/config.yaml to hold steps to their tests"
        )
    seen = "; ".join(f"`{d.command}` ({d.evidence})" for d in detected)
    return (
        f"{head}; detected {seen}: set tests.command to it writing JUnit XML, and tests.junit "
        "to that file"
    )
