"""The demo's stand-in coding agent: does every step of the demo's batch and cards, no account.

A real agent (claude, codex, …) reads its instructions on stdin and works out what to do. This
one knows the demo's work by heart: it reads which step it runs (PAIR_CHANGE, PAIR_TRANSITION)
and, on a card, the card's acceptance criteria (`AC-1: shout("hello") returns "HELLO!"`), the
review round and the findings it is asked about from its instructions, then edits files and
reports with `pairbot batch report` like any agent. The same input gives the same work, so the
demo needs no network and no model.

On a card it does each transition of the cycle: `propose` copies the card's criteria into a
plan; `apply` writes the helper and a test per criterion it got right; `verify` checks every
criterion against the code and reports typed findings (carrying earlier ones forward); `red`
writes a failing test per blocking finding; `verify-red` accepts red's contract row by row
(each row's red test is there, on its criterion); `fix` finishes the helper. Its one planned slip —
the first draft of `shout()` forgets the empty string — gives the demo a review round to show.
A card it does not know gets a clear blocker instead of a guess.

PAIR_DEMO_HOLD=<change>:<transition>:<file> makes that one step wait (at most 120 s) until
<file> exists, so a test can open the card's page while the step runs. Unset, nothing waits.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The plain batch `hello` (pairbot demo): each change adds one function.
WORDS = {"add-greeting": ("greet", "Hello"), "add-farewell": ("farewell", "Goodbye")}

# The helpers the demo's cards ask for: the body of apply's first draft, and of the finished one.
HELPERS: dict[str, tuple[str, str]] = {
    "shout": ('return text.upper() + "!"', 'return text.upper() + "!" if text else ""'),
    "title_case": (
        'return " ".join(word.capitalize() for word in text.split())',
        'return " ".join(word.capitalize() for word in text.split())',
    ),
    "whisper": ('return text.lower() + "..."', 'return text.lower() + "..."'),
}

AC_LINE = re.compile(r"^(AC-\d+): (.+)$", re.MULTILINE)
CHECK = re.compile(r"^(\w+)\((.*)\) returns (.+)$")
ROUND = re.compile(r"Review round (\d+)")
ASKED = re.compile(r"^- (r\d+-[\w-]+) \(", re.MULTILINE)
RED_DOC = re.compile(r'^"""Finding (r\d+-[\w-]+) \((AC-\d+)\): (.*)\."""$', re.MULTILINE)
HOLD_S = 120.0


def report(*args: str) -> None:
    subprocess.run(["pairbot", "batch", "report", *args], check=True)


# ---------------------------------------------------------------- the plain batch `hello`


def batch_step(change: str, transition: str) -> None:
    func, word = WORDS[change]
    plan = Path(".pair/changes") / change / "plan.md"
    if transition == "propose":
        plan.parent.mkdir(parents=True, exist_ok=True)
        plan.write_text(
            f"# {change}\n\n## Acceptance criteria\n"
            f'AC-1: {func}("Ada") returns "{word}, Ada!"\n\n'
            f"## Tasks\n- [ ] test {func}\n- [ ] implement {func}\n"
        )
        report("--complete", f"planned {change}: 1 AC, 2 tasks")
    elif transition in ("apply", "fix"):
        Path("tests").mkdir(exist_ok=True)
        Path(f"tests/test_{func}.py").write_text(
            f"import unittest\n\nfrom {func} import {func}\n\n\n"
            f"class Test{func.title()}(unittest.TestCase):\n"
            f"    def test_{func}(self):\n"
            f'        self.assertEqual({func}("Ada"), "{word}, Ada!")\n'
        )
        Path(f"{func}.py").write_text(f'def {func}(name):\n    return f"{word}, {{name}}!"\n')
        plan.write_text(plan.read_text().replace("- [ ]", "- [x]"))
        report("--complete", f"implemented {func} test-first")
    elif transition == "verify":
        argv = [sys.executable, "-B", "-m", "unittest", "discover", "-s", "tests", "-q"]
        ok = subprocess.run(argv, check=False).returncode == 0
        findings: list[Finding] = (
            [] if ok else [finding("r1-1", "AC-1", "tests fail", "python3 -m unittest")]
        )
        verdict = "Ready for archive" if ok else "1 critical issue(s) found"
        acs = {"AC-1": f"tests/test_{func}.py::Test{func.title()}::test_{func}"}
        report_findings(verdict, acs, findings)
    else:
        report("--complete", f"{transition}: nothing to do in the demo")


# ---------------------------------------------------------------- a card


class Check:
    """One criterion the agent can test: `<func>(<args>) returns <expected>`."""

    def __init__(self, ac: str, func: str, args: str, expected: str) -> None:
        self.ac, self.func, self.args = ac, func, args
        self.values = ast.literal_eval(f"({args},)") if args.strip() else ()
        self.expected = ast.literal_eval(expected)

    def got(self) -> object:
        """What the helper in this tree returns (a failure's name when it raises)."""
        try:
            module = importlib.import_module(self.func)
            return getattr(module, self.func)(*self.values)
        except Exception as error:  # the review reports it, whatever it is
            return f"raises {type(error).__name__}"

    def passes(self) -> bool:
        return bool(self.got() == self.expected)

    @property
    def test_name(self) -> str:
        return f"test_{self.ac.lower().replace('-', '_')}"

    def test_source(self) -> str:
        assertion = f"self.assertEqual({self.call}, {self.expected!r})"
        return f"    def {self.test_name}(self):\n        {assertion}\n"

    @property
    def call(self) -> str:
        return f"{self.func}({self.args})"


def helper_of(instructions: str) -> str | None:
    """The helper the card asks for: the first known one its text names as `name()`."""
    found = [(instructions.find(f"{name}()"), name) for name in HELPERS]
    named = sorted((at, name) for at, name in found if at >= 0)
    return named[0][1] if named else None


def criteria(text: str) -> dict[str, str]:
    """`AC-n: …` lines, first occurrence of each id, in order."""
    found: dict[str, str] = {}
    for ac, line in AC_LINE.findall(text):
        found.setdefault(ac, line.strip())
    return found


def checks_of(acs: dict[str, str], func: str) -> list[Check]:
    out = []
    for ac, line in acs.items():
        match = CHECK.match(line)
        if match and match.group(1) == func:
            out.append(Check(ac, *match.groups()))
    return out


def write_helper(func: str, body: str) -> None:
    Path(f"{func}.py").write_text(f"def {func}(text):\n    {body}\n", encoding="utf-8")


def red_tests() -> dict[str, tuple[str, str]]:
    """The findings the tree already has a red test for: {finding id: (criterion, claim)}."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(Path("tests").glob("test_finding_*.py")):
        match = RED_DOC.match(path.read_text(encoding="utf-8"))
        if match:
            found[match.group(1)] = (match.group(2), match.group(3))
    return found


def red_file(fid: str) -> str:
    return f"tests/test_finding_{fid.replace('-', '_')}.py"


Finding = dict[str, object]


def finding(fid: str, ac: str, summary: str, reproducer: str, transition: str = "open") -> Finding:
    return {
        "id": fid,
        "kind": "defect",
        "severity": "critical",
        "blocking": True,
        "transition": transition,
        "ac": ac,
        "summary": summary,
        "reproducer": reproducer,
    }


def report_findings(verdict: str, ac_tests: dict[str, str], findings: list[Finding]) -> None:
    # Outside the tree: a review changes nothing in the checkout it reviews.
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"acTests": ac_tests, "findings": findings}, handle)
    try:
        report("--complete", verdict, "--findings", handle.name)
    finally:
        Path(handle.name).unlink()


def card_step(change: str, transition: str, instructions: str) -> None:
    func = helper_of(instructions)
    if func is None:
        known = ", ".join(f"{name}()" for name in HELPERS)
        report("--blocker", f"the demo agent only knows the demo's cards ({known})")
        return
    plan = Path(".pair/changes") / change / "plan.md"
    sys.path.insert(0, str(Path.cwd()))  # the helper is imported from this tree
    if transition == "propose":
        acs = criteria(instructions)
        plan.parent.mkdir(parents=True, exist_ok=True)
        plan.write_text(
            f"# {change}: {func}()\n\n## Acceptance criteria\n"
            + "".join(f"{ac}: {line}\n" for ac, line in acs.items())
            + f"\n## Tasks\n- [ ] a test per criterion\n- [ ] implement {func}() in {func}.py\n",
            encoding="utf-8",
        )
        report("--complete", f"planned {func}(): {len(acs)} criteria, 2 tasks")
        return
    checks = checks_of(criteria(plan.read_text(encoding="utf-8")), func)
    if transition == "apply":
        write_helper(func, HELPERS[func][0])
        done = [c for c in checks if c.passes()]  # the draft's tests: what it got right
        Path("tests").mkdir(exist_ok=True)
        Path(f"tests/test_{func}.py").write_text(
            f"import unittest\n\nfrom {func} import {func}\n\n\n"
            f"class Test{func.title().replace('_', '')}(unittest.TestCase):\n"
            + ("\n".join(c.test_source() for c in done) or "    pass\n"),
            encoding="utf-8",
        )
        plan.write_text(plan.read_text(encoding="utf-8").replace("- [ ]", "- [x]"))
        tested = ", ".join(c.ac for c in done) or "no criterion yet"
        report("--complete", f"implemented {func}() with tests for {tested}")
    elif transition == "verify":
        verify(func, checks, instructions)
    elif transition == "red":
        covered = {ac for ac, _ in red_tests().values()}
        failing = [c for c in checks if c.ac not in covered and not c.passes()]
        asked = ASKED.findall(instructions)
        rows = []  # the acceptance contract the red verifier checks (docs/cycle.md)
        for fid, check in zip(asked, failing, strict=False):
            module = Path(red_file(fid)).stem
            tests = [f"{module}.TestFinding::{check.test_name}"]
            rows.append({"id": fid, "ac": check.ac, "tests": tests})
            claim = f"{check.call} should return {check.expected!r}"
            Path(red_file(fid)).write_text(
                f'"""Finding {fid} ({check.ac}): {claim}."""\n\n'
                f"import unittest\n\nfrom {func} import {func}\n\n\n"
                f"class TestFinding(unittest.TestCase):\n{check.test_source()}",
                encoding="utf-8",
            )
        contract = plan.parent / "contract.json"
        contract.write_text(json.dumps({"rows": rows}), encoding="utf-8")
        report("--complete", f"wrote failing tests for {', '.join(asked) or 'nothing'}")
    elif transition == "verify-red":
        verify_red(plan.parent / "contract.json")
    elif transition == "fix":
        write_helper(func, HELPERS[func][1])
        report("--complete", f"finished {func}(): the findings' tests pass")
    else:
        report("--complete", f"{transition}: nothing to do in the demo")


def verify(func: str, checks: list[Check], instructions: str) -> None:
    """Check every criterion; carry earlier findings (those with a red test) forward."""
    found = ROUND.search(instructions)
    round_ = found.group(1) if found else "1"
    by_ac = {c.ac: c for c in checks}
    earlier = red_tests()
    findings: list[Finding] = []
    for fid, (ac, claim) in earlier.items():
        ok = ac in by_ac and by_ac[ac].passes()
        repro = f"python3 -m unittest {red_file(fid)}"
        findings.append(finding(fid, ac, claim, repro, "resolved" if ok else "open"))
    ac_tests: dict[str, str] = {}
    own = Path(f"tests/test_{func}.py")
    mine = own.read_text(encoding="utf-8") if own.exists() else ""
    for check in checks:
        if f"def {check.test_name}(" in mine:
            ac_tests[check.ac] = f"{own}::Test{func.title().replace('_', '')}::{check.test_name}"
        for fid, (ac, _) in earlier.items():
            if ac == check.ac:
                ac_tests[check.ac] = f"{red_file(fid)}::TestFinding::{check.test_name}"
    new = [c for c in checks if c.ac not in {ac for ac, _ in earlier.values()} and not c.passes()]
    for n, check in enumerate(new, start=1):
        summary = f"{check.call} returns {check.got()!r}, not {check.expected!r} ({check.ac})"
        repro = f"python3 -c 'from {func} import {func}; print(repr({check.call}))'"
        findings.append(finding(f"r{round_}-{n}", check.ac, summary, repro))
    still = [f for f in findings if f["transition"] == "open"]
    verdict = f"{len(still)} critical issue(s) found" if still else "Ready for archive"
    report_findings(verdict, ac_tests, findings)


def verify_red(contract: Path) -> None:
    """The red contract verifier: accept each row whose red test is there and claims what its
    finding says; change nothing."""
    rows = json.loads(contract.read_text(encoding="utf-8")).get("rows", [])
    written = red_tests()
    judged = []
    for row in rows:
        fid = str(row.get("id"))
        ok = fid in written and written[fid][0] == row.get("ac")
        reason = (
            f"{red_file(fid)} asserts {written[fid][1]}, which the finding says is broken"
            if ok
            else f"no red test for {fid} on {row.get('ac')}"
        )
        judged.append({"id": fid, "verdict": "accept" if ok else "refuse", "reason": reason})
    accepted = all(j["verdict"] == "accept" for j in judged)
    # Outside the tree: the verifier changes nothing in the checkout it reads.
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"verdict": "accept" if accepted else "refuse", "rows": judged}, handle)
    try:
        summary = "contract accepted" if accepted else "contract refused"
        report("--complete", summary, "--findings", handle.name)
    finally:
        Path(handle.name).unlink()


def hold(change: str, transition: str) -> None:
    """Wait while PAIR_DEMO_HOLD names this step and its file does not exist yet (bounded)."""
    spec = os.environ.get("PAIR_DEMO_HOLD", "")
    held_change, _, rest = spec.partition(":")
    held_transition, _, release = rest.partition(":")
    if (held_change, held_transition) != (change, transition) or not release:
        return
    print(f"demo agent: holding {transition} {change} until {release} exists", flush=True)
    deadline = time.monotonic() + HOLD_S
    while not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    sys.dont_write_bytecode = True  # importing the helper leaves no __pycache__ to commit
    instructions = sys.stdin.read()
    change, transition = os.environ["PAIR_CHANGE"], os.environ["PAIR_TRANSITION"]
    print(f"demo agent: {transition} {change}", flush=True)
    hold(change, transition)
    if change in WORDS:
        batch_step(change, transition)
    else:
        card_step(change, transition, instructions)


main()
