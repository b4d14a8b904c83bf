"""The demo repository's test command: unittest discovery under tests/, reported as JUnit XML.

    python3 .pair/run_tests.py .pair/junit.xml

pairbot's card cycle runs the project's tests before and after every apply, red and fix and
reads which tests fail from a JUnit report, the way `pytest --junitxml` writes one. The demo
needs nothing installed, so this is the standard library's unittest with a small reporter.
Exits 1 when a test fails or errors, like any test runner.
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path
from types import TracebackType
from typing import Any
from xml.sax.saxutils import quoteattr

ErrInfo = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]


class JUnitResult(unittest.TestResult):
    """Every test's outcome as a JUnit `<testcase>` (classname, name, and what went wrong)."""

    def __init__(self) -> None:
        super().__init__()
        self.cases: list[str] = []
        self.failed = 0

    def _case(self, test: unittest.TestCase, body: str = "") -> None:
        classname, _, name = test.id().rpartition(".")
        self.cases.append(
            f"<testcase classname={quoteattr(classname)} name={quoteattr(name)}>{body}</testcase>"
        )

    def addSuccess(self, test: unittest.TestCase) -> None:  # unittest's name
        super().addSuccess(test)
        self._case(test)

    def _problem(self, kind: str, test: unittest.TestCase, err: Any) -> None:
        self.failed += 1
        error = err[1] if isinstance(err, tuple) else None
        message = f"{type(error).__name__}: {error}" if error is not None else kind
        self._case(test, f"<{kind} message={quoteattr(message)}/>")

    def addFailure(self, test: unittest.TestCase, err: ErrInfo) -> None:
        super().addFailure(test, err)
        self._problem("failure", test, err)

    def addError(self, test: unittest.TestCase, err: ErrInfo) -> None:
        super().addError(test, err)
        self._problem("error", test, err)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        self._case(test, f"<skipped message={quoteattr(reason)}/>")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 .pair/run_tests.py REPORT.xml", file=sys.stderr)
        return 2
    sys.path.insert(0, ".")  # the tests import the repository's modules by name
    sys.dont_write_bytecode = True  # no __pycache__ left in the tree for a commit to pick up
    result = JUnitResult()
    if Path("tests").is_dir():
        unittest.defaultTestLoader.discover("tests", top_level_dir="tests").run(result)
    report = Path(argv[0])
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(
        f'<testsuite name="demo" tests="{len(result.cases)}" failures="{result.failed}">'
        + "".join(result.cases)
        + "</testsuite>\n",
        encoding="utf-8",
    )
    print(f"{len(result.cases)} test(s), {result.failed} failed; report: {report}")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
