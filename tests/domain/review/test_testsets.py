"""JUnit XML → failing-test sets, and the apply / red / fix test gate (issue #5)."""

from __future__ import annotations

import re
from xml.sax.saxutils import quoteattr

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.review.testsets import (
    MAX_JUNIT_BYTES,
    MESSAGE_CHARS,
    IterationVerdict,
    JUnitError,
    JUnitResult,
    MissingJUnit,
    NoTestCommand,
    TestRun,
    UnreadableJUnit,
    compare,
    iteration_verdict,
    lost_passing,
    name_ids,
    parse_junit,
    read_run,
)

# A report as pytest writes it (--junitxml), trimmed: one suite, a pass, a failure, an error,
# a skip, an xfail, a collection error (empty classname) and a test in a class.
PYTEST_REPORT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="1" skipped="2"
 tests="7" time="0.05" timestamp="2024-05-01T10:00:00" hostname="ci">
<testcase classname="tests.test_login" name="test_ok" time="0.001" />
<testcase classname="tests.test_login" name="test_lockout" time="0.002">
  <failure message="assert 3 == 5">tests/test_login.py:12: AssertionError</failure></testcase>
<testcase classname="tests.test_login" name="test_db" time="0.0">
  <error message="failed on setup with &quot;fixture 'db' not found&quot;">E</error></testcase>
<testcase classname="tests.test_login" name="test_later" time="0.0">
  <skipped type="pytest.skip" message="later">tests/test_login.py:30: later</skipped></testcase>
<testcase classname="tests.test_login" name="test_known_bug" time="0.0">
  <skipped type="pytest.xfail" message="bug 12" /></testcase>
<testcase classname="" name="tests.test_broken" time="0.0">
  <error message="collection failure">ImportError: cannot import name 'x'</error></testcase>
<testcase classname="tests.test_login.TestRetry" name="test_backoff[2]" time="0.0" />
</testsuite></testsuites>
"""


def test_reads_a_pytest_report() -> None:
    result = parse_junit(PYTEST_REPORT)
    assert result.total == 7
    assert result.failing == {
        "tests.test_login::test_lockout",
        "tests.test_login::test_db",
        "tests.test_broken",
    }
    assert result.errored == {"tests.test_login::test_db", "tests.test_broken"}
    assert result.skipped == {"tests.test_login::test_later", "tests.test_login::test_known_bug"}
    assert result.passed == {
        "tests.test_login::test_ok",
        "tests.test_login.TestRetry::test_backoff[2]",
    }


def case(name: str, inner: str = "", classname: str | None = "c") -> str:
    cls = f" classname={quoteattr(classname)}" if classname is not None else ""
    return f"<testcase{cls} name={quoteattr(name)}>{inner}</testcase>"


@pytest.mark.parametrize(
    ("xml", "total", "failing", "skipped"),
    [
        pytest.param(
            f"<testsuite>{case('a')}{case('b', '<failure/>')}</testsuite>",
            2,
            {"c::b"},
            set(),
            id="bare-testsuite",
        ),
        pytest.param(
            "<testsuites><testsuite><testsuite>"
            f"{case('deep', '<error/>')}</testsuite>{case('top')}</testsuite></testsuites>",
            2,
            {"c::deep"},
            set(),
            id="nested-suites",
        ),
        pytest.param("<testsuites/>", 0, set(), set(), id="no-tests"),
        pytest.param(
            f"<testsuite>{case('s', '<skipped/>')}</testsuite>", 1, set(), {"c::s"}, id="skipped"
        ),
        pytest.param(
            f"<testsuite>{case('x', '<skipped/><failure/>')}</testsuite>",
            1,
            {"c::x"},
            set(),
            id="skipped-and-failed-is-failing",
        ),
        pytest.param(
            f"<testsuite>{case('d', '<failure/>')}{case('d')}</testsuite>",
            2,
            {"c::d"},
            set(),
            id="duplicate-id-fails-if-any-fails",
        ),
        pytest.param(
            f"<testsuite>{case('d', '<skipped/>')}{case('d')}</testsuite>",
            2,
            set(),
            set(),
            id="duplicate-id-ran-once-is-not-skipped",
        ),
        pytest.param(
            f"<testsuite>{case('n', classname=None)}{case('e', '<error/>', '')}</testsuite>",
            2,
            {"e"},
            set(),
            id="no-classname-is-name-only",
        ),
        pytest.param(
            '<testsuite xmlns="urn:x"><testcase classname="c" name="ns"><failure/></testcase>'
            "</testsuite>",
            1,
            {"c::ns"},
            set(),
            id="namespaced",
        ),
        pytest.param(
            f"<testsuite>{case('flaky', '<flakyFailure/><system-out>x</system-out>')}</testsuite>",
            1,
            set(),
            set(),
            id="rerun-records-are-not-failures",
        ),
        pytest.param(
            '<!DOCTYPE testsuite SYSTEM "http://example.invalid/junit.dtd">'
            f"<testsuite>{case('t')}</testsuite>",
            1,
            set(),
            set(),
            id="doctype-without-entities-is-read-and-never-fetched",
        ),
    ],
)
def test_parse_junit(xml: str, total: int, failing: set[str], skipped: set[str]) -> None:
    result = parse_junit(xml.encode())
    assert result.total == total
    assert result.failing == failing
    assert result.skipped == skipped


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(b"", "not well-formed XML: no element found", id="empty"),
        pytest.param(b"<testsuite>", "not well-formed XML", id="truncated"),
        pytest.param(b"not xml at all", "not well-formed XML", id="text"),
        pytest.param(b"<html><body/></html>", "root element is <html>", id="other-root"),
        pytest.param(
            b'<testsuite><testcase classname="c"/></testsuite>',
            "<testcase> number 1 has no name",
            id="nameless-case",
        ),
        pytest.param(
            b'<!DOCTYPE t [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><testsuite>&b;</testsuite>',
            "forbidden XML",
            id="entity-expansion",
        ),
        pytest.param(
            b'<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite>&x;</testsuite>',
            "forbidden XML",
            id="external-entity",
        ),
    ],
)
def test_malformed_reports_name_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(JUnitError, match=re.escape(problem)):
        parse_junit(data)


def test_an_oversized_report_is_refused_before_parsing() -> None:
    with pytest.raises(JUnitError, match="limit"):
        parse_junit(b" " * (MAX_JUNIT_BYTES + 1))


# A random report: (classname, name, outcome) per test case.
OUTCOMES = st.sampled_from(["pass", "failure", "error", "skipped"])
NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1).filter(
    lambda s: s.strip() == s
)
CASES = st.lists(st.tuples(NAMES, NAMES, OUTCOMES), max_size=12, unique_by=lambda c: c[:2])


@given(CASES, st.booleans())
def test_parse_recovers_the_outcomes_it_was_given(
    cases: list[tuple[str, str, str]], wrapped: bool
) -> None:
    body = "".join(
        case(name, "" if outcome == "pass" else f"<{outcome}/>", classname)
        for classname, name, outcome in cases
    )
    xml = f"<testsuite>{body}</testsuite>"
    if wrapped:
        xml = f"<testsuites>{xml}</testsuites>"
    result = parse_junit(xml.encode())
    ids = {f"{c}::{n}": o for c, n, o in cases}
    assert result.total == len(cases)
    assert result.ids == set(ids)
    assert result.failing == {i for i, o in ids.items() if o in ("failure", "error")}
    assert result.errored == {i for i, o in ids.items() if o == "error"}
    assert result.skipped == {i for i, o in ids.items() if o == "skipped"}
    assert result.passed == {i for i, o in ids.items() if o == "pass"}


@pytest.mark.parametrize(
    ("data", "path", "expected"),
    [
        pytest.param(None, ".pair/junit.xml", MissingJUnit(".pair/junit.xml"), id="no-file"),
        pytest.param(b"<testsuite/>", None, MissingJUnit(None), id="no-path"),
        pytest.param(
            b"<x/>",
            "j.xml",
            UnreadableJUnit(
                "j.xml", "the root element is <x>, expected <testsuites> or <testsuite>"
            ),
            id="unreadable",
        ),
        pytest.param(
            b"<testsuite/>", "j.xml", JUnitResult(0, frozenset(), frozenset()), id="readable"
        ),
    ],
)
def test_read_run(data: bytes | None, path: str | None, expected: TestRun) -> None:
    assert read_run(data, path) == expected


SETS = st.frozensets(st.sampled_from("abcdefgh"))


@given(SETS, SETS)
def test_compare_partitions_both_sides(before: frozenset[str], after: frozenset[str]) -> None:
    delta = compare(before, after)
    assert delta.new_failures | delta.still_failing == after
    assert delta.fixed | delta.still_failing == before
    assert not delta.new_failures & delta.still_failing
    assert not delta.fixed & delta.still_failing
    assert not delta.new_failures & delta.fixed


def test_name_ids_is_sorted_and_bounded() -> None:
    assert name_ids(["b", "a"]) == "a, b"
    assert name_ids([f"t{i:02}" for i in range(25)], limit=3) == "t00, t01, t02 and 22 more"


def run(
    failing: set[str] = frozenset(), passing: set[str] = frozenset(), **more: set[str]
) -> JUnitResult:
    ids = frozenset(failing) | frozenset(passing) | frozenset(more.get("skipped", ()))
    return JUnitResult(
        total=len(ids),
        ids=ids,
        failing=frozenset(failing),
        skipped=frozenset(more.get("skipped", ())),
    )


NONE = NoTestCommand()
MISSING = MissingJUnit(".pair/junit.xml")
BROKEN = UnreadableJUnit(".pair/junit.xml", "the report is not well-formed XML: no element found")


@pytest.mark.parametrize(
    ("transition", "before", "after", "sealed", "accepted", "in_reason", "seal"),
    [
        # apply
        pytest.param(
            "apply", run({"old"}, {"a"}), run({"old"}, {"a", "new"}), set(), True,
            "3 tests ran, no new failures, 1 failing before and after", set(),
            id="apply-clean",
        ),
        pytest.param(
            "apply", run(set(), {"a", "b"}), run({"a", "b"}), set(), False,
            "introduced 2 new failing tests: a, b", set(),
            id="apply-new-failures-named",
        ),
        pytest.param(
            "apply", run({"old"}), run(set(), {"old"}), set(), True, "1 fixed", set(),
            id="apply-fixes-a-failure",
        ),
        # red
        pytest.param(
            "red", run(set(), {"a"}), run({"t_new"}, {"a"}), set(), True,
            "sealed 1 new failing test: t_new", {"t_new"},
            id="red-adds-a-failing-test",
        ),
        pytest.param(
            "red", run({"old"}, {"a"}), run({"old"}, {"a", "t_new"}), set(), False,
            "the tests it wrote pass or did not run", set(),
            id="red-whose-tests-pass",
        ),
        pytest.param(
            "red", run({"old"}), run({"old", "t1", "t2"}), set(), True,
            "sealed 2 new failing tests: t1, t2", {"t1", "t2"},
            id="red-seals-only-new-failures",
        ),
        # fix
        pytest.param(
            "fix", run({"s1", "s2"}, {"a"}), run(set(), {"a", "s1", "s2"}), {"s1", "s2"}, True,
            "all 2 sealed tests pass", set(),
            id="fix-makes-sealed-pass",
        ),
        pytest.param(
            "fix", run({"s1", "s2"}), run({"s2"}, {"s1"}), {"s1", "s2"}, False,
            "1 sealed red test must pass and does not: s2 (failing)", set(),
            id="fix-leaves-a-sealed-failing",
        ),
        pytest.param(
            "fix", run({"s1", "s2"}), run(set(), {"x"}, skipped={"s1"}), {"s1", "s2"}, False,
            "2 sealed red tests must pass and do not: s1 (skipped), s2 (missing from the run)",
            set(),
            id="fix-skips-or-deletes-sealed",
        ),
        pytest.param(
            "fix", run({"s1"}, {"a"}), run({"a"}, {"s1"}), {"s1"}, False,
            "introduced 1 new failing test: a", set(),
            id="fix-breaks-another-test",
        ),
        pytest.param(
            "fix", run({"s1"}, {"a"}), run({"a", "s1"}), {"s1"}, False,
            "new failing test: a; 1 sealed red test must pass and does not: s1 (failing)", set(),
            id="fix-both-problems",
        ),
        # a passing test that disappears or is skipped
        pytest.param(
            "apply", run(set(), {"a", "b"}), run(set(), {"b"}), set(), False,
            "1 test that passed before is now missing or skipped: a (missing from the run)",
            set(),
            id="apply-deletes-a-passing-test",
        ),
        pytest.param(
            "apply", run(set(), {"a", "b"}), run(set(), {"b"}, skipped={"a"}), set(), False,
            "1 test that passed before is now missing or skipped: a (skipped)", set(),
            id="apply-skips-a-passing-test",
        ),
        pytest.param(
            "apply", run({"old"}, {"a"}), run(set(), {"a"}), set(), True,
            "no new failures, 1 fixed", set(),
            id="a-failing-test-that-disappears-is-not-lost",
        ),
        pytest.param(
            "apply", run(set(), {"a"}, skipped={"s"}), run(set(), {"a"}), set(), True,
            "no new failures", set(),
            id="a-skipped-test-that-disappears-is-not-lost",
        ),
        pytest.param(
            "red", run(set(), {"a", "b"}), run({"t_new"}, {"a"}), set(), False,
            "1 test that passed before is now missing or skipped: b (missing from the run)",
            set(),
            id="red-deletes-a-passing-test-and-seals-nothing",
        ),
        pytest.param(
            "red", run(set(), {"a"}), run(set(), set(), skipped={"a"}), set(), False,
            "no test newly fails (1 test ran): the tests it wrote pass or did not run, so they "
            "prove nothing; 1 test that passed before is now missing or skipped: a (skipped)",
            set(),
            id="red-both-problems",
        ),
        pytest.param(
            "fix", run({"s1"}, {"a", "b"}), run(set(), {"s1"}, skipped={"b"}), {"s1"}, False,
            "2 tests that passed before are now missing or skipped: "
            "a (missing from the run), b (skipped)", set(),
            id="fix-deletes-and-skips",
        ),
        # configuration
        pytest.param(
            "apply", NONE, NONE, set(), True, "no test command is configured", set(),
            id="no-test-command",
        ),
        pytest.param(
            "red", NONE, NONE, set(), True, "no test command is configured", set(),
            id="no-test-command-red-passes-through-and-seals-nothing",
        ),
        pytest.param(
            "fix", run(set()), MISSING, {"s1"}, False,
            "ran after the iteration but wrote no JUnit file at .pair/junit.xml", set(),
            id="no-junit-after",
        ),
        pytest.param(
            "apply", MISSING, run(set()), set(), False,
            "ran before the iteration but wrote no JUnit file at .pair/junit.xml", set(),
            id="no-junit-before",
        ),
        pytest.param(
            "apply", run(set()), MissingJUnit(None), set(), False,
            "tests.junit is not set", set(),
            id="junit-path-not-configured",
        ),
        pytest.param(
            "red", run(set()), BROKEN, set(), False,
            "the JUnit file .pair/junit.xml written after the iteration is unreadable: "
            "the report is not well-formed XML", set(),
            id="unreadable-junit",
        ),
    ],
)  # fmt: skip
def test_iteration_verdict(
    *,
    transition: str,
    before: TestRun,
    after: TestRun,
    sealed: set[str],
    accepted: bool,
    in_reason: str,
    seal: set[str],
) -> None:
    verdict = iteration_verdict(transition, before, after, frozenset(sealed))  # type: ignore[arg-type]
    assert verdict.accepted is accepted
    assert in_reason in verdict.reason
    assert verdict.seal == seal
    if not accepted:
        assert verdict.problems
        assert verdict.reason == "; ".join(verdict.problems)
    assert verdict.checked is not isinstance(before, NoTestCommand)


def test_a_refused_fix_lists_the_sealed_tests_that_do_not_pass() -> None:
    verdict = iteration_verdict("fix", run({"s"}), run({"s"}), {"s"})
    assert verdict.sealed_not_passing == ("s (failing)",)


def test_a_refusal_names_each_lost_test_and_how() -> None:
    verdict = iteration_verdict("apply", run(set(), {"a", "b"}), run(set(), set(), skipped={"b"}))
    assert verdict.lost_passing == ("a (missing from the run)", "b (skipped)")
    assert not verdict.accepted


@given(SETS, SETS, SETS)
def test_lost_is_exactly_passed_before_and_not_ran_after(
    before_pass: frozenset[str], after_pass: frozenset[str], after_skip: frozenset[str]
) -> None:
    before = run(set(), set(before_pass))
    after = run(set(), set(after_pass - after_skip), skipped=set(after_skip))
    lost = {entry.split(" ")[0] for entry in lost_passing(before, after)}
    assert lost == set(before_pass - (after_pass - after_skip))
    for transition in ("apply", "fix"):
        assert iteration_verdict(transition, before, after).accepted == (not lost)  # type: ignore[arg-type]


def test_other_transitions_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="not 'verify'"):
        iteration_verdict("verify", NONE, NONE)  # type: ignore[arg-type]


@given(SETS, SETS, SETS)
def test_apply_and_fix_accept_exactly_when_nothing_newly_fails_and_sealed_pass(
    before: frozenset[str], after: frozenset[str], sealed: frozenset[str]
) -> None:
    universe = frozenset("abcdefgh")
    b = JUnitResult(len(universe), universe, before)
    a = JUnitResult(len(universe), universe, after)
    apply = iteration_verdict("apply", b, a, sealed)
    fix = iteration_verdict("fix", b, a, sealed)
    red = iteration_verdict("red", b, a, sealed)
    assert apply.accepted == (not after - before)
    assert fix.accepted == (not after - before and not sealed & after)
    assert red.accepted == bool(after - before)
    assert red.seal == (after - before if red.accepted else frozenset())
    for verdict in (apply, fix, red):
        assert isinstance(verdict, IterationVerdict)
        assert verdict.checked


def test_a_failing_tests_message_is_kept_for_the_red_verifier_and_cut_short() -> None:
    long = "x" * (MESSAGE_CHARS + 50)
    xml = (
        '<testsuite><testcase classname="t" name="a"><failure message="assert 1 == 2">'
        "trace</failure></testcase>"
        f'<testcase classname="t" name="b"><error message="{long}"/></testcase>'
        '<testcase classname="t" name="c"/></testsuite>'
    )
    result = parse_junit(xml.encode())
    assert result.messages["t::a"] == "assert 1 == 2\ntrace"
    assert len(result.messages["t::b"]) == MESSAGE_CHARS
    assert "t::c" not in result.messages  # a passing test has none
