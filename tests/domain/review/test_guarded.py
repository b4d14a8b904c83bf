"""Guarded paths: existing and sealed tests, the runner's config, manifests, pairbot's config
and the JUnit report; and which stage may do what to the tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.review.guarded import (
    DEFAULT_MANIFESTS,
    DEFAULT_RUNNER_CONFIG,
    DEFAULT_TEST_FILES,
    STAGE_POLICY,
    UNGUARDED,
    ChangedPath,
    Rule,
    StagePolicy,
    Violation,
    glob_match,
    guarded_violations,
    normalize_path,
    parse_name_status,
    stage_policy,
    unquote_git_path,
)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        pytest.param("tests/test_a.py", "tests/test_a.py", True, id="literal"),
        pytest.param("tests/test_a.py", "tests/test_b.py", False, id="literal-other"),
        pytest.param("conftest.py", "conftest.py", True, id="root-only-matches-root"),
        pytest.param("conftest.py", "tests/conftest.py", False, id="root-only-is-anchored"),
        pytest.param("**/conftest.py", "conftest.py", True, id="doublestar-zero-segments"),
        pytest.param("**/conftest.py", "a/b/c/conftest.py", True, id="doublestar-many"),
        pytest.param("**/conftest.py", "a/conftest.pyc", False, id="doublestar-needs-whole-name"),
        pytest.param("tests/*", "tests/a.py", True, id="star-one-segment"),
        pytest.param("tests/*", "tests/sub/a.py", False, id="star-stops-at-slash"),
        pytest.param("tests/**", "tests/sub/a.py", True, id="doublestar-tail"),
        pytest.param("tests/**", "tests", True, id="doublestar-tail-zero"),
        pytest.param("tests/**", "testsuite/a.py", False, id="doublestar-tail-needs-dir"),
        pytest.param("tests/", "tests/sub/a.py", True, id="trailing-slash-is-subtree"),
        pytest.param("tests/**/fixtures/*.json", "tests/fixtures/a.json", True, id="mid-zero"),
        pytest.param("tests/**/fixtures/*.json", "tests/x/y/fixtures/a.json", True, id="mid-many"),
        pytest.param("tests/**/**/x", "tests/x", True, id="repeated-doublestar"),
        pytest.param("**", "anything/at/all", True, id="doublestar-alone"),
        pytest.param("a**b", "axxb", True, id="doublestar-inside-a-segment-is-star"),
        pytest.param("a**b", "ax/xb", False, id="doublestar-inside-a-segment-stays-in-it"),
        pytest.param("test_?.py", "test_1.py", True, id="question-mark"),
        pytest.param("test_[ab].py", "test_b.py", True, id="class"),
        pytest.param("test_[!ab].py", "test_b.py", False, id="negated-class"),
        pytest.param("**/.mocharc.*", "web/.mocharc.yml", True, id="star-matches-dotfiles"),
        pytest.param("./tests/*.py", "tests/a.py", True, id="dot-slash-pattern"),
        pytest.param("/tests/*.py", "tests/a.py", True, id="leading-slash-pattern"),
        pytest.param("tests/*.py", "./tests//a.py", True, id="path-normalised"),
        pytest.param("Tests/*.py", "tests/a.py", False, id="case-sensitive"),
        pytest.param("", "a.py", False, id="empty-pattern"),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


def test_glob_match_case_insensitive() -> None:
    assert glob_match("**/conftest.py", "Tests/CONFTEST.PY", case_sensitive=False)
    assert not glob_match("**/conftest.py", "Tests/CONFTEST.PY")


def test_a_very_deep_path_does_not_exhaust_the_stack() -> None:
    deep = "/".join(["a"] * 5000) + "/conftest.py"
    assert glob_match("**/conftest.py", deep)
    assert not glob_match("**/b/**/conftest.py", deep)


SEGMENT = st.text(alphabet="abcXYZ019_-.", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
PATHS = st.lists(SEGMENT, min_size=1, max_size=6)


@given(PATHS)
def test_a_literal_path_matches_itself_and_its_name_anywhere(parts: list[str]) -> None:
    path = "/".join(parts)
    assert glob_match(path, path)
    assert glob_match("**", path)
    assert glob_match(f"**/{parts[-1]}", path)


@given(PATHS, PATHS)
def test_a_literal_pattern_matches_only_the_same_path(a: list[str], b: list[str]) -> None:
    assert glob_match("/".join(a), "/".join(b)) is (a == b)


@given(PATHS, st.data())
def test_wildcards_in_place_of_segments_still_match(parts: list[str], data: st.DataObject) -> None:
    path = "/".join(parts)
    star = data.draw(st.integers(0, len(parts) - 1))
    assert glob_match("/".join([*parts[:star], "*", *parts[star + 1 :]]), path)
    start = data.draw(st.integers(0, len(parts)))
    end = data.draw(st.integers(start, len(parts)))
    assert glob_match("/".join([*parts[:start], "**", *parts[end:]]), path)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("tests/a.py", "tests/a.py", id="plain"),
        pytest.param('"t\\303\\251st/conftest.py"', "tést/conftest.py", id="octal-utf8"),
        pytest.param('"a\\"b\\\\c\\td"', 'a"b\\c\td', id="escapes"),
        pytest.param('"unclosed', '"unclosed', id="not-quoted"),
        pytest.param('"', '"', id="lone-quote"),
    ],
)
def test_unquote_git_path(raw: str, expected: str) -> None:
    assert unquote_git_path(raw) == expected


def test_normalize_path() -> None:
    assert normalize_path(" ./a//b/./c ") == "a/b/c"
    assert normalize_path('"d\\303\\251j\\303\\240/x"') == "déjà/x"


def test_parse_name_status() -> None:
    output = (
        "M\0src/a.py\0R097\0tests/old.py\0tests/new.py\0D\0gone.py\0A\0n.py\0C100\0a\0b\0T\0l\0"
    )
    assert parse_name_status(output) == [
        ChangedPath("src/a.py", "modified"),
        ChangedPath("tests/new.py", "renamed", old_path="tests/old.py"),
        ChangedPath("gone.py", "deleted"),
        ChangedPath("n.py", "added"),
        ChangedPath("b", "copied", old_path="a"),
        ChangedPath("l", "modified"),
    ]
    assert parse_name_status("") == []


@pytest.mark.parametrize(
    ("output", "message"),
    [
        pytest.param("Z\0a\0", "unknown git status 'Z'", id="unknown-status"),
        pytest.param("R100\0only-one\0", "truncated", id="truncated-rename"),
        pytest.param("M", "truncated", id="truncated"),
    ],
)
def test_parse_name_status_refuses_what_it_cannot_read(output: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_name_status(output)


SEALED = {"tests/test_login.py": 1, "tests/test_retry.py": 2}


@pytest.mark.parametrize(
    ("changes", "kwargs", "expected"),
    [
        pytest.param(
            ["src/app.py", ChangedPath("tests/test_new.py", "added")], {}, [], id="ordinary-changes"
        ),
        pytest.param(
            ["tests/test_login.py"],
            {},
            [
                (
                    "tests/test_login.py",
                    "sealed",
                    "tests/test_login.py is a sealed test (sealed by red in round 1); "
                    "allowed only via tests.mayModifyTests",
                )
            ],
            id="sealed-modified",
        ),
        pytest.param(
            [ChangedPath("tests/test_retry.py", "deleted")],
            {},
            [
                (
                    "tests/test_retry.py",
                    "sealed",
                    "tests/test_retry.py (deleted) is a sealed test (sealed by red in round 2)",
                )
            ],
            id="sealed-deleted",
        ),
        pytest.param(
            [ChangedPath("tests/moved.py", "renamed", old_path="tests/test_login.py")],
            {},
            [
                (
                    "tests/test_login.py",
                    "sealed",
                    "tests/test_login.py (renamed to tests/moved.py) is a sealed test",
                )
            ],
            id="sealed-renamed-away",
        ),
        pytest.param(
            [ChangedPath("tests/conftest.py", "renamed", old_path="tests/helpers.py")],
            {},
            [
                (
                    "tests/conftest.py",
                    "runner-config",
                    "tests/conftest.py (renamed from tests/helpers.py) configures the test "
                    "runner (matches **/conftest.py)",
                ),
                ("tests/helpers.py", "protected-test", "(renamed to tests/conftest.py)"),
            ],
            id="renamed-onto-conftest",
        ),
        pytest.param(
            [ChangedPath("tests/copy.py", "copied", old_path="tests/test_login.py")],
            {},
            [],
            id="copying-a-sealed-test-leaves-it-untouched",
        ),
        pytest.param(
            ["tests/test_login.py"],
            {"sealed_paths": ["tests/test_login.py"]},
            [("tests/test_login.py", "sealed", "(sealed by red in an earlier round)")],
            id="sealed-without-rounds",
        ),
        pytest.param(
            ["tests/test_login.py", "tests/conftest.py"],
            {"may_modify": ["tests/**"]},
            [],
            id="may-modify-lifts-sealed-and-runner-config",
        ),
        pytest.param(
            ["tests/test_login.py"],
            {"may_modify": ["tests/test_retry.py"]},
            [("tests/test_login.py", "sealed", "sealed by red in round 1")],
            id="may-modify-other-path",
        ),
        pytest.param(
            ["a/b/conftest.py", "pytest.ini", "web/jest.config.ts", "setup.cfg", "noxfile.py"],
            {},
            [
                ("a/b/conftest.py", "runner-config", "matches **/conftest.py"),
                ("noxfile.py", "runner-config", "matches **/noxfile.py"),
                ("pytest.ini", "runner-config", "matches **/pytest.ini"),
                ("setup.cfg", "runner-config", "matches **/setup.cfg"),
                ("web/jest.config.ts", "runner-config", "matches **/jest.config.*"),
            ],
            id="runner-config-any-depth-sorted",
        ),
        pytest.param(
            ["Tests/ConfTest.py"],
            {},
            [("Tests/ConfTest.py", "runner-config", "configures the test runner")],
            id="runner-config-any-case",
        ),
        pytest.param(
            ['"t\\303\\251st/conftest.py"'],
            {},
            [("tést/conftest.py", "runner-config", "tést/conftest.py configures")],
            id="quoted-path-cannot-hide",
        ),
        pytest.param(
            ["pyproject.toml"],
            {},
            [
                (
                    "pyproject.toml",
                    "manifest",
                    "pyproject.toml is a dependency manifest (matches **/pyproject.toml); "
                    "allowed only via tests.mayModifyManifests",
                )
            ],
            id="pyproject-is-a-manifest",
        ),
        pytest.param(
            ["pyproject.toml"],
            {"runner_config_patterns": ("pyproject.toml",), "manifest_patterns": ()},
            [("pyproject.toml", "runner-config", "matches pyproject.toml")],
            id="pyproject-runner-config-when-configured",
        ),
        pytest.param(
            ["web/package.json", ChangedPath("Cargo.lock", "deleted"), "go.mod"],
            {},
            [
                ("Cargo.lock", "manifest", "Cargo.lock (deleted) is a dependency manifest"),
                ("go.mod", "manifest", "matches **/go.mod"),
                ("web/package.json", "manifest", "matches **/package.json"),
            ],
            id="manifests-any-depth",
        ),
        pytest.param(
            ["package.json", "Package.JSON"],
            {"may_modify_manifests": ["package.json"]},
            [("Package.JSON", "manifest", "Package.JSON is a dependency manifest")],
            id="may-modify-manifests-lifts-only-what-it-matches",
        ),
        pytest.param(
            ["package.json", "tests/test_a.py"],
            {"may_modify": ["**"]},
            [("package.json", "manifest", "allowed only via tests.mayModifyManifests")],
            id="may-modify-tests-does-not-lift-manifests",
        ),
        pytest.param(
            ["tests/test_a.py"],
            {},
            [
                (
                    "tests/test_a.py",
                    "protected-test",
                    "tests/test_a.py is an existing test (matches **/tests/**): apply may add "
                    "tests but not edit, delete or rename existing ones; allowed only via "
                    "tests.mayModifyTests",
                )
            ],
            id="existing-test-edited",
        ),
        pytest.param(
            [ChangedPath("src/widget_test.go", "deleted")],
            {"transition": "fix"},
            [("src/widget_test.go", "protected-test", "(deleted) is an existing test")],
            id="existing-test-deleted",
        ),
        pytest.param(
            [ChangedPath("src/test_old.py", "renamed", old_path="src/test_a.py")],
            {},
            [("src/test_a.py", "protected-test", "(renamed to src/test_old.py)")],
            id="existing-test-renamed-away-its-new-name-is-new",
        ),
        pytest.param(
            [ChangedPath("spec/a_spec.rb", "added"), ChangedPath("web/a.test.ts", "copied", "b")],
            {"transition": "red"},
            [],
            id="red-adds-tests",
        ),
        pytest.param(
            [ChangedPath("tests/test_new.py", "added")],
            {"transition": "propose"},
            [("tests/test_new.py", "new-test", "propose may not write tests")],
            id="propose-may-not-add-tests",
        ),
        pytest.param(
            ["tests/test_a.py", "package.json", ".pair/config.yaml"],
            {"transition": "verify"},
            [],
            id="verify-unguarded-its-edits-are-discarded",
        ),
        pytest.param(
            ["src/Latest.java", "src/LoginTest.java", "src/logintest.java"],
            {},
            [("src/LoginTest.java", "protected-test", "matches **/*Test.java")],
            id="test-names-case-sensitive",
        ),
        pytest.param(
            ["tests/test_a.py", "tests/conftest.py", "tests/data/a.json"],
            {"may_modify": ["tests/test_a.py"]},
            [
                ("tests/conftest.py", "runner-config", "matches **/conftest.py"),
                ("tests/data/a.json", "protected-test", "matches **/tests/**"),
            ],
            id="may-modify-lifts-only-what-it-matches",
        ),
        pytest.param(
            [".pair/config.yaml"],
            {"may_modify": ["**"]},
            [(".pair/config.yaml", "pair-config", "holds the test command")],
            id="pair-config-never-allowed",
        ),
        pytest.param(
            [".pair/junit.xml"],
            {"junit": "./.pair/junit.xml", "may_modify": [".pair/**"]},
            [(".pair/junit.xml", "junit", "JUnit report the engine reads")],
            id="junit-never-allowed",
        ),
        pytest.param(
            [".pair/junit.xml", ".pair/changes/c/plan.md"],
            {},
            [],
            id="junit-unconfigured-and-plan-are-free",
        ),
        pytest.param(
            ["pytest.ini", "pytest.ini", ChangedPath("pytest.ini", "deleted")],
            {},
            [("pytest.ini", "runner-config", "pytest.ini configures")],
            id="each-path-once",
        ),
    ],
)
def test_guarded_violations(
    changes: list[str | ChangedPath],
    kwargs: dict[str, object],
    expected: list[tuple[str, Rule, str]],
) -> None:
    options: dict[str, object] = {"sealed_paths": SEALED, **kwargs}
    violations = guarded_violations(changes, **options)  # type: ignore[arg-type]
    assert [(v.path, v.rule) for v in violations] == [(p, r) for p, r, _ in expected]
    for violation, (_, _, text) in zip(violations, expected, strict=True):
        assert text in violation.reason
        assert violation.path in violation.reason


def test_every_default_pattern_guards_a_file_by_that_name() -> None:
    examples = {
        "**/pytest.ini": "pytest.ini",
        "**/.pytest.ini": "sub/.pytest.ini",
        "**/pytest.toml": "pytest.toml",
        "**/.pytest.toml": ".pytest.toml",
        "**/conftest.py": "tests/unit/conftest.py",
        "**/tox.ini": "tox.ini",
        "**/setup.cfg": "pkg/setup.cfg",
        "**/noxfile.py": "noxfile.py",
        "**/.coveragerc": ".coveragerc",
        "**/jest.config.*": "jest.config.js",
        "**/vitest.config.*": "app/vitest.config.mts",
        "**/karma.conf.*": "karma.conf.js",
        "**/.mocharc.*": ".mocharc.json",
        "**/phpunit.xml*": "phpunit.xml.dist",
    }
    assert set(examples) == set(DEFAULT_RUNNER_CONFIG)
    for pattern, path in examples.items():
        assert guarded_violations([path]) == [
            Violation(
                path,
                f"{path} configures the test runner (matches {pattern}); "
                "allowed only via tests.mayModifyTests",
                "runner-config",
            )
        ]


@given(st.lists(st.sampled_from(["a.py", "tests/t.py", "conftest.py", "x/tox.ini"]), max_size=6))
def test_a_guarded_path_is_reported_once_and_only_if_touched(paths: list[str]) -> None:
    violations = guarded_violations(paths, sealed_paths={"tests/t.py": 1})
    reported = [v.path for v in violations]
    assert reported == sorted(set(reported))
    assert set(reported) == set(paths) - {"a.py"}
    assert guarded_violations(paths, sealed_paths={"tests/t.py": 1}, may_modify=["**"]) == []


def test_every_default_manifest_and_test_pattern_guards_a_file_by_that_name() -> None:
    manifests = {p: p.removeprefix("**/").replace("*", "x") for p in DEFAULT_MANIFESTS}
    tests = {
        p: p.replace("**/", "pkg/", 1).replace("**", "a").replace("*", "x")
        for p in DEFAULT_TEST_FILES
    }
    for pattern, path in manifests.items():
        (violation,) = guarded_violations([path])
        assert violation.rule == "manifest", (pattern, path)
        assert f"(matches {pattern})" in violation.reason
    for pattern, path in tests.items():
        (violation,) = guarded_violations([path])
        assert violation.rule == "protected-test", (pattern, path)
        assert guarded_violations([ChangedPath(path, "added")]) == []


@pytest.mark.parametrize(
    ("transition", "expected"),
    [
        pytest.param("propose", StagePolicy(True, False, False, False), id="propose"),
        pytest.param("apply", StagePolicy(True, True, True, False), id="apply"),
        pytest.param("red", StagePolicy(True, True, True, True), id="red"),
        pytest.param("fix", StagePolicy(True, True, True, False), id="fix"),
        pytest.param("verify", StagePolicy(False, False, False, False), id="verify"),
        pytest.param("decompose", UNGUARDED, id="other-stage"),
    ],
)
def test_stage_policy(transition: str, expected: StagePolicy) -> None:
    # guarded, runs_tests, may_add_tests, seals
    assert stage_policy(transition) == expected


def test_only_red_seals_and_every_stage_that_runs_tests_is_guarded() -> None:
    assert [t for t, p in STAGE_POLICY.items() if p.seals] == ["red"]
    assert all(p.guarded for p in STAGE_POLICY.values() if p.runs_tests)


@pytest.mark.parametrize("transition", ["apply", "red", "fix", "propose"])
def test_no_stage_may_edit_an_existing_test(transition: str) -> None:
    (violation,) = guarded_violations(["tests/test_a.py"], transition=transition)
    assert violation.rule == "protected-test"
    assert transition in violation.reason
