"""The demo's stand-in coding agent: reads its task from the environment, edits files, reports.

A real agent (claude, codex, …) reads the instructions on stdin; this one only needs to know
which transition it runs, so it can show the whole cycle with no account and no network.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

WORDS = {"add-greeting": ("greet", "Hello"), "add-farewell": ("farewell", "Goodbye")}


def report(*args: str) -> None:
    subprocess.run(["pairbot", "batch", "report", *args], check=True)


def main() -> None:
    sys.stdin.read()  # the instructions; a real agent would read them
    change, transition = os.environ["PAIR_CHANGE"], os.environ["PAIR_TRANSITION"]
    func, word = WORDS[change]
    plan = Path(".pair/changes") / change / "plan.md"
    print(f"demo agent: {transition} {change}")
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
        ok = (
            subprocess.run(
                [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-q"], check=False
            ).returncode
            == 0
        )
        findings = Path(".pair/changes") / change / "findings.json"
        findings.write_text(
            json.dumps(
                {
                    "acTests": {"AC-1": f"tests/test_{func}.py::Test{func.title()}::test_{func}"},
                    "findings": []
                    if ok
                    else [
                        {
                            "id": "r1-1",
                            "kind": "defect",
                            "severity": "critical",
                            "blocking": True,
                            "summary": "tests fail",
                        }
                    ],
                }
            )
        )
        verdict = "Ready for archive" if ok else "1 critical issue(s) found"
        report("--complete", verdict, "--findings", str(findings))
    else:
        report("--complete", f"{transition}: nothing to do in the demo")


main()
