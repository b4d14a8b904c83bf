"""Detecting a project's obvious test command, and the "no test gate applies" note."""

from __future__ import annotations

import json

import pytest

from app.domain.review.testgate import NPM_PLACEHOLDER, Detected, detect_test_commands, no_gate_note

PKG_WITH_TESTS = json.dumps({"scripts": {"test": "vitest run"}})


@pytest.mark.parametrize(
    ("files", "package_json", "expected"),
    [
        pytest.param([], None, [], id="empty"),
        pytest.param(["README.md", "src/main.c"], None, [], id="nothing-recognisable"),
        pytest.param(["pyproject.toml"], None, [("pytest", "pyproject.toml")], id="pyproject"),
        pytest.param(["pytest.ini", "a.py"], None, [("pytest", "pytest.ini")], id="pytest-ini"),
        pytest.param(
            ["tests/test_a.py"], None, [("pytest", "Python files under tests/")], id="tests-dir"
        ),
        pytest.param(["tests/data.json"], None, [], id="tests-dir-without-python"),
        pytest.param(["sub/pyproject.toml"], None, [], id="pyproject-below-root-not-obvious"),
        pytest.param(
            ["package.json"], PKG_WITH_TESTS, [("npm", "package.json scripts.test")], id="npm"
        ),
        pytest.param(
            ["package.json"],
            json.dumps({"scripts": {"test": NPM_PLACEHOLDER}}),
            [],
            id="npm-placeholder-is-no-test",
        ),
        pytest.param(["package.json"], json.dumps({"name": "x"}), [], id="npm-no-scripts"),
        pytest.param(["package.json"], "{not json", [], id="npm-broken-json"),
        pytest.param(["package.json"], "[1]", [], id="npm-not-an-object"),
        pytest.param(["package.json"], None, [], id="npm-unread"),
        pytest.param(["Cargo.toml", "src/lib.rs"], None, [("cargo", "Cargo.toml")], id="cargo"),
        pytest.param(["go.mod", "main.go"], None, [("go", "go.mod")], id="go"),
        pytest.param(
            ["./go.mod", "pyproject.toml", "package.json"],
            PKG_WITH_TESTS,
            [("pytest", "pyproject.toml"), ("npm", "package.json scripts.test"), ("go", "go.mod")],
            id="several-in-table-order",
        ),
    ],
)
def test_detect_test_commands(
    files: list[str], package_json: str | None, expected: list[tuple[str, str]]
) -> None:
    found = detect_test_commands(files, package_json)
    assert [(d.runner, d.evidence) for d in found] == expected


def test_each_runner_has_its_usual_command() -> None:
    found = detect_test_commands(
        ["pyproject.toml", "package.json", "Cargo.toml", "go.mod"], PKG_WITH_TESTS
    )
    assert [d.command for d in found] == ["pytest", "npm test", "cargo test", "go test ./..."]


def test_the_note_says_no_gate_applies_and_what_to_set() -> None:
    none = no_gate_note(())
    assert none.startswith("no test gate applies: tests.command is not set")
    assert "no test runner detected" in none
    assert "tests.junit" in none
    found = no_gate_note([Detected("pytest", "pytest", "pyproject.toml")])
    assert found.startswith("no test gate applies")
    assert "detected `pytest` (pyproject.toml)" in found
    assert "JUnit XML" in found
