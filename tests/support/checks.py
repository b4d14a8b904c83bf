"""A tiny test runner for end-to-end tests: every `checks/*.check` is one test case.

A check file holds one line `<path> contains <text>`; the case passes when the file at
`<path>` (relative to the working directory) exists and contains `<text>`. A line starting
with `skip` is a skipped case, the way `pytest.skip` reports one. The results are
written as JUnit XML to the path given as the first argument, the way `pytest --junitxml`
does, so the engine's before/after comparison reads a real report.
"""

from __future__ import annotations

import sys
from pathlib import Path
from xml.sax.saxutils import quoteattr


def main() -> int:
    out = Path(sys.argv[1])
    cases: list[str] = []
    failed = 0
    for check in sorted(Path("checks").glob("*.check")):
        line = check.read_text().strip()
        if line.startswith("skip"):
            cases.append(
                f'<testcase classname="checks" name={quoteattr(check.stem)}><skipped/></testcase>'
            )
            continue
        path, _, text = line.partition(" contains ")
        target = Path(path)
        ok = target.is_file() and text in target.read_text()
        body = "" if ok else f'<failure message="{path} lacks the text"/>'
        failed += 0 if ok else 1
        cases.append(f'<testcase classname="checks" name={quoteattr(check.stem)}>{body}</testcase>')
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f'<testsuite name="checks" tests="{len(cases)}" failures="{failed}">'
        + "".join(cases)
        + "</testsuite>\n"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
