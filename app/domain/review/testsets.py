"""Failing-test sets from JUnit XML, and whether an apply / red / fix iteration may advance. Pure.

The engine runs the project's configured test command before and after an `apply`, `red` or
`fix` iteration (docs/cycle.md; `tests:` in `.pair/config.yaml`) and reads the
JUnit XML it writes. This module turns those bytes into sets of test ids and decides:

    apply / fix   refused when a test fails now that did not fail before (each one named)
    all three     refused when a test that passed before is missing from the run or skipped
                  now (each one named): deleting or skipping a test is not making it pass
    fix           also: every test sealed by `red` must now pass (failing, skipped or missing
                  from the run all count as "not passing", each one named)
    red           accepted only when at least one test newly fails: those are the tests red
                  wrote for the findings, and they are the ids to seal; a red whose tests pass
                  proves nothing and is refused

A project with no test command passes every iteration through unchecked, with a note saying
so (`app.domain.review.testgate` words it for the step's message, with the command it detects). A
command that ran but left no JUnit file (or an unreadable one) is a refusal naming the
configured path: without the report nothing can be compared, and advancing blind is what the
test gate exists to prevent.

Test ids are `classname::name` exactly as the runner wrote them (a bare `name` when the
classname is empty or absent, as in pytest's collection errors). They are not turned into
paths: pytest writes `classname="tests.test_login"` or `"tests.test_login.TestLock"`, and a
dotted name does not say where the module ends and the class begins. Both sides of every
comparison come from the same runner, so the raw ids compare exactly.

Errors: `JUnitError` (a `ValueError`) for a report that is not JUnit XML, with the problem in
its message; user-facing, it becomes the refusal reason through `UnreadableJUnit`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, get_args
from xml.etree.ElementTree import Element, ParseError

# JUnit files are written by the project's test command, which runs code the agent controls:
# a crafted report (billion laughs, external entities) is in scope, so the stdlib parser is
# never used on it directly. defusedxml refuses entity declarations and external references.
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

# A real report of tens of thousands of tests is a few MiB; anything far beyond is an attack or
# an accident, and parsing it would hold the whole tree in memory.
MAX_JUNIT_BYTES: Final = 64 * 1024 * 1024
# How many ids a reason names before it says how many more there are.
NAMED_IDS: Final = 20
# How much of a failing test's message is kept (the red contract verifier reads it).
MESSAGE_CHARS: Final = 2000

IterationKind = Literal["apply", "red", "fix"]


class JUnitError(ValueError):
    """The bytes are not a readable JUnit report; the message says what is wrong."""


@dataclass(frozen=True)
class JUnitResult:
    """One test run: every test id seen, and which failed (failure or error) or were skipped.

    An id that occurs more than once (a rerun, a duplicated suite) is failing when any
    occurrence failed, skipped when every occurrence was skipped, else passed.
    """

    total: int  # <testcase> elements, duplicates included
    ids: frozenset[str]
    failing: frozenset[str]  # a <failure> or an <error>
    errored: frozenset[str] = frozenset()  # the failing ids with an <error> (could not run)
    skipped: frozenset[str] = frozenset()  # <skipped> (pytest's xfail too), and not failing
    # A failing id's first <failure>/<error>: its message and text, cut to MESSAGE_CHARS (what
    # the red contract verifier reads as "the failing output").
    messages: Mapping[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> frozenset[str]:
        """Ran and did not fail or skip."""
        return self.ids - self.failing - self.skipped


@dataclass(frozen=True)
class NoTestCommand:
    """`tests.command` is not configured: nothing was run, nothing can be compared."""


@dataclass(frozen=True)
class MissingJUnit:
    """The test command ran but no JUnit file was found at `path` (None: `tests.junit` unset);
    `cause` says how the command ended when that explains it (exit status, last line)."""

    path: str | None
    cause: str | None = None


@dataclass(frozen=True)
class UnreadableJUnit:
    """The JUnit file at `path` exists but is not a readable report."""

    path: str
    problem: str


TestRun = JUnitResult | NoTestCommand | MissingJUnit | UnreadableJUnit


@dataclass(frozen=True)
class TestDelta:
    """How the failing set moved: new + still failing make `after`, fixed + still make `before`."""

    __test__ = False  # a `Test*` class that pytest must not try to collect where it is imported

    new_failures: frozenset[str]
    fixed: frozenset[str]
    still_failing: frozenset[str]


@dataclass(frozen=True)
class IterationVerdict:
    """Whether an iteration may advance; `reason` is one sentence for the journal and comments.

    `checked` is False when no test command is configured (accepted, unchecked). `seal` holds
    the ids a red iteration seals (empty otherwise). `problems` names each reason for a refusal.
    """

    accepted: bool
    reason: str
    checked: bool = True
    delta: TestDelta | None = None
    problems: tuple[str, ...] = ()
    sealed_not_passing: tuple[str, ...] = ()
    lost_passing: tuple[str, ...] = ()  # passed before, missing or skipped after
    seal: frozenset[str] = field(default_factory=frozenset)


# ---------------------------------------------------------------- parsing


def _local(tag: object) -> str:
    """An element's name without its `{namespace}` (a few runners write one)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _test_id(case: Element, index: int) -> str:
    name = (case.get("name") or "").strip()
    if not name:
        raise JUnitError(f"<testcase> number {index} has no name attribute")
    classname = (case.get("classname") or "").strip()
    return f"{classname}::{name}" if classname else name


def parse_junit(xml_bytes: bytes) -> JUnitResult:
    """Read a JUnit XML report (`<testsuites>` or a bare `<testsuite>`, suites nested anywhere).

    Raises `JUnitError` naming the problem: not XML, entity declarations or external references
    (refused, see the import), another root element, a `<testcase>` without a name, too large.
    """
    if len(xml_bytes) > MAX_JUNIT_BYTES:
        raise JUnitError(
            f"the report is {len(xml_bytes):,} bytes; the limit is {MAX_JUNIT_BYTES:,} bytes"
        )
    try:
        root = fromstring(xml_bytes)
    except DefusedXmlException as exc:
        raise JUnitError(f"the report uses forbidden XML ({exc!r}); JUnit needs none") from None
    except ParseError as exc:
        raise JUnitError(f"the report is not well-formed XML: {exc}") from None
    if _local(root.tag) not in ("testsuites", "testsuite"):
        raise JUnitError(
            f"the root element is <{_local(root.tag)}>, expected <testsuites> or <testsuite>"
        )

    total = 0
    seen: set[str] = set()
    failing: set[str] = set()
    errored: set[str] = set()
    ran: set[str] = set()  # at least one occurrence that was not skipped
    skipped_any: set[str] = set()
    messages: dict[str, str] = {}
    for element in root.iter():
        if _local(element.tag) != "testcase":
            continue
        total += 1
        test_id = _test_id(element, total)
        seen.add(test_id)
        children = {_local(child.tag) for child in element}
        if "failure" in children or "error" in children:
            failing.add(test_id)
            if "error" in children:
                errored.add(test_id)
            if test_id not in messages:
                messages[test_id] = _failure_text(element)
        if "skipped" in children and not children & {"failure", "error"}:
            skipped_any.add(test_id)
        else:
            ran.add(test_id)
    return JUnitResult(
        total=total,
        ids=frozenset(seen),
        failing=frozenset(failing),
        errored=frozenset(errored),
        skipped=frozenset(skipped_any - ran - failing),
        messages=messages,
    )


def _failure_text(case: Element) -> str:
    """A failing testcase's first <failure> or <error>: `message`, then its text, cut short."""
    for child in case:
        if _local(child.tag) in ("failure", "error"):
            parts = [child.get("message") or "", (child.text or "").strip()]
            text = "\n".join(part for part in parts if part)
            return text[:MESSAGE_CHARS]
    return ""  # pragma: no cover - only called for a case that has one


def read_run(data: bytes | None, path: str | None, cause: str | None = None) -> TestRun:
    """The run a configured test command produced: the report's bytes (None: no file) at `path`.

    The shell reads the file; this turns a missing or unreadable one into the value that names
    it, so a malformed report is a refusal reason rather than an exception.
    """
    if data is None or path is None:
        return MissingJUnit(path, cause)
    try:
        return parse_junit(data)
    except JUnitError as exc:
        return UnreadableJUnit(path, str(exc))


# ---------------------------------------------------------------- comparing


def compare(before: frozenset[str], after: frozenset[str]) -> TestDelta:
    """Split two failing sets into new failures, fixed tests and tests failing on both sides."""
    return TestDelta(
        new_failures=after - before,
        fixed=before - after,
        still_failing=before & after,
    )


def name_ids(ids: Iterable[str], limit: int = NAMED_IDS) -> str:
    """Sorted ids, comma-separated, at most `limit` of them then "and N more"."""
    ordered = sorted(ids)
    shown = ", ".join(ordered[:limit])
    rest = len(ordered) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _run_problem(run: TestRun, when: str) -> str | None:
    """Why a run cannot be compared; None when it can."""
    if isinstance(run, MissingJUnit):
        if run.cause is not None:
            return (
                f"the test command failed {when} the iteration without writing its JUnit report "
                f"{run.path or '(tests.junit unset)'}: {run.cause}; install the project's test "
                "dependencies where pairbot runs (a set-up step before pairbot's in the "
                "workflow or pipeline) or fix tests.command"
            )
        if run.path is None:
            return (
                f"the test command ran {when} the iteration, but tests.junit is not set: "
                "set it to the JUnit XML file the command writes"
            )
        return (
            f"the test command ran {when} the iteration but wrote no JUnit file at {run.path}; "
            f"make tests.command write it (e.g. pytest --junitxml={run.path}) or point "
            "tests.junit at the file it does write"
        )
    if isinstance(run, UnreadableJUnit):
        return (
            f"the JUnit file {run.path} written {when} the iteration is unreadable: {run.problem}"
        )
    return None


def _not_passing(sealed: Collection[str], after: JUnitResult) -> list[str]:
    """Each sealed id that does not pass now, with how it fails to pass."""
    out: list[str] = []
    for test_id in sorted(sealed):
        if test_id in after.failing:
            out.append(f"{test_id} (failing)")
        elif test_id in after.skipped:
            out.append(f"{test_id} (skipped)")
        elif test_id not in after.ids:
            out.append(f"{test_id} (missing from the run)")
    return out


def lost_passing(before: JUnitResult, after: JUnitResult) -> list[str]:
    """Each id that passed before and is now missing from the run or skipped, with which.

    A test that passed and now fails is a new failure, counted there. Ids are compared as the
    runner wrote them, so renaming a test that passed counts as losing it: the gate cannot tell
    a rename from a deletion, and a deletion is the shortcut it refuses.
    """
    out: list[str] = []
    for test_id in sorted(before.passed):
        if test_id not in after.ids:
            out.append(f"{test_id} (missing from the run)")
        elif test_id in after.skipped:
            out.append(f"{test_id} (skipped)")
    return out


def _lost_sentence(lost: Collection[str]) -> str:
    return (
        f"{_count(len(lost), 'test')} that passed before "
        f"{'is' if len(lost) == 1 else 'are'} now missing or skipped: {name_ids(lost)}"
    )


def iteration_verdict(
    transition: IterationKind,
    before: TestRun,
    after: TestRun,
    sealed_ids: Collection[str] = frozenset(),
) -> IterationVerdict:
    """May this `apply` / `red` / `fix` iteration advance? See the module docstring for the rules.

    `before` is the run on the tree the iteration started from, `after` the run on its result;
    `sealed_ids` the test ids sealed by earlier `red` iterations (checked by `fix` only).
    """
    if transition not in get_args(IterationKind):
        raise ValueError(
            f"iteration_verdict is for {', '.join(get_args(IterationKind))}, not {transition!r}"
        )
    if isinstance(before, NoTestCommand) or isinstance(after, NoTestCommand):
        return IterationVerdict(
            accepted=True,
            checked=False,
            reason="no test command is configured (tests.command), so no tests were run or "
            "compared; set one to hold iterations to their tests",
        )
    problems = [p for p in (_run_problem(before, "before"), _run_problem(after, "after")) if p]
    if problems or not isinstance(before, JUnitResult) or not isinstance(after, JUnitResult):
        return IterationVerdict(
            accepted=False, reason="; ".join(problems), problems=tuple(problems)
        )

    delta = compare(before.failing, after.failing)
    ran = f"{_count(after.total, 'test')} ran"
    lost = tuple(lost_passing(before, after))

    if transition == "red":
        return _red_verdict(delta, ran, lost)

    found: list[str] = []
    if delta.new_failures:
        found.append(
            f"the iteration introduced {_count(len(delta.new_failures), 'new failing test')}: "
            f"{name_ids(delta.new_failures)}"
        )
    if lost:
        found.append(_lost_sentence(lost))
    not_passing: list[str] = []
    if transition == "fix":
        not_passing = _not_passing(sealed_ids, after)
        if not_passing:
            found.append(
                f"{_count(len(not_passing), 'sealed red test')} must pass and "
                f"{'does' if len(not_passing) == 1 else 'do'} not: {name_ids(not_passing)}"
            )
    if found:
        return IterationVerdict(
            accepted=False,
            reason="; ".join(found),
            delta=delta,
            problems=tuple(found),
            sealed_not_passing=tuple(not_passing),
            lost_passing=lost,
        )
    parts = [ran, "no new failures"]
    if transition == "fix" and sealed_ids:
        parts.append(f"all {_count(len(sealed_ids), 'sealed test')} pass")
    if delta.fixed:
        parts.append(f"{len(delta.fixed)} fixed")
    if delta.still_failing:
        parts.append(f"{len(delta.still_failing)} failing before and after")
    return IterationVerdict(accepted=True, reason=", ".join(parts), delta=delta)


def _red_verdict(delta: TestDelta, ran: str, lost: tuple[str, ...]) -> IterationVerdict:
    """A `red` iteration advances when it adds failing tests (sealed for the `fix` that
    follows) and loses no passing one."""
    red_problems: list[str] = []
    if not delta.new_failures:
        red_problems.append(
            "red must add failing tests for the blocking findings, but no test newly fails "
            f"({ran}): the tests it wrote pass or did not run, so they prove nothing"
        )
    if lost:
        red_problems.append(_lost_sentence(lost))
    if red_problems:
        return IterationVerdict(
            False,
            "; ".join(red_problems),
            delta=delta,
            problems=tuple(red_problems),
            lost_passing=lost,
        )
    return IterationVerdict(
        accepted=True,
        reason=f"sealed {_count(len(delta.new_failures), 'new failing test')}: "
        f"{name_ids(delta.new_failures)}",
        delta=delta,
        seal=delta.new_failures,
    )
