"""End to end on the `local` host: the red's contract, its seal, the fixScope and custody.

After red the seal is recorded (which tests, at which commit, expected failing, the fixScope);
the red verifier refuses a contract that does not answer the findings (failed-contract after
the allowed retries); a later seal that narrows the fixScope is refused (failed-seal); a fix
outside the fixScope is sent back; a sealed test changed after the seal stops the card
failed-custody before the next verify, with nothing reset.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.support.card_project import CardProject
from tests.support.git import git


def transitions(steps: list[Any]) -> list[str]:
    return [s.result.transition for s in steps if s.result.transition]


def branch_head(project: CardProject) -> str | None:
    return project.forge.branch_sha(f"pair/card-{project.card}")


def test_red_seals_its_contract_at_the_commit_it_pushed(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "ready-for-merge"
    (seal,) = project.cycle_events("sealed")
    red_push = next(p["sha"] for p in project.cycle_events("pushed") if p["transition"] == "red")
    assert seal["seal"] == "r1-g1"
    assert seal["commit"] == red_push
    assert seal["ids"] == ["checks::r1-1"]  # failing at the seal's commit
    assert seal["paths"] == ["checks/r1-1.check"]
    blob = git(project.forge.repo, "rev-parse", f"{red_push}:checks/r1-1.check")
    assert seal["blobs"] == {"checks/r1-1.check": blob}
    assert seal["rows"] == ["r1-1"]
    # No fixScope in the contract: what the implementation touched (tests, .pair/ left out).
    assert seal["fixScope"] == [f"card-{project.card}.txt"]
    assert seal["supersedes"] is None


def test_a_contract_that_misses_its_findings_is_failed_contract(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking"], "red": ["no-contract"] * 3})
    project.command("implement")
    steps = project.until_quiet()
    refusals = [s for s in steps if s.result.transition == "red"]
    assert [s.result.state for s in refusals] == ["sent-back", "sent-back", "blocked"]
    assert "contract-incomplete:contract:no-contract" in (refusals[0].result.message or "")
    assert steps[-1].status == "failed-contract"
    assert project.labels(project.card) == ["pr-state:failed-contract"]
    assert project.cycle_events("sealed") == []
    explanation = steps[-1].explanation
    assert explanation is not None
    assert "did not make a complete contract" in explanation.why
    assert any("retry" in action for action in explanation.what_you_can_do)
    # `/pair retry` runs red again; this time it writes its contract and the card goes on.
    project.script({"verify": ["findings-blocking", "ok"]})
    assert project.command("retry").result.transition == "red"
    assert project.until_quiet()[-1].status == "ready-for-merge"


def test_a_narrowed_fix_scope_is_refused_failed_seal(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "findings-new"], "red": ["ok", "narrow-scope"]})
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "failed-seal"
    message = steps[-1].result.message or ""
    assert message.startswith("failed-seal: fixScope-narrowed")
    assert f"drops card-{project.card}.txt" in message
    assert len(project.cycle_events("sealed")) == 1  # the first seal stands, no second one
    pushed_by_red = [p for p in project.cycle_events("pushed") if p["transition"] == "red"]
    assert len(pushed_by_red) == 1  # the refused red was reset away, nothing pushed
    assert project.labels(project.card) == ["pr-state:failed-seal"]


def test_a_fix_outside_its_fix_scope_is_sent_back(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "fix": ["widen-fix", "ok"]})
    project.command("implement")
    steps = project.until_quiet()
    sent_back = [s for s in steps if s.result.state == "sent-back"]
    assert [s.result.transition for s in sent_back] == ["fix"]
    assert "outside.txt outside the sealed fixScope" in (sent_back[0].result.message or "")
    assert steps[-1].status == "ready-for-merge"


def test_a_sealed_test_changed_by_the_implementation_is_failed_custody(tmp_path: Path) -> None:
    # The project lets iterations edit tests under checks/, so the guard lets the fix weaken
    # the sealed check; custody, checked before the next verify, does not.
    project = CardProject.create(tmp_path, tests={"mayModifyTests": ["checks/**"]})
    project.script({"verify": ["findings-blocking", "ok"], "fix": ["edit-sealed"]})
    project.command("implement")
    steps = project.until_quiet()
    assert transitions(steps)[-2:] == ["fix", "verify"]
    last = steps[-1]
    assert last.status == "failed-custody"
    message = last.result.message or ""
    assert "custody check before verify" in message
    assert "sealed test checks/r1-1.check (seal r1-g1) was changed after the seal" in message
    head = branch_head(project)
    assert project.cycle_events("custody-breach")[0]["head"] == head
    # Nothing reset: the branch keeps the fix's head, the seal is kept, no review ran on it.
    assert len(project.cycle_events("sealed")) == 1
    assert len(project.cycle_events("reviewed")) == 1
    assert project.labels(project.card) == ["pr-state:failed-custody"]
    assert project.step().status == "failed-custody"
    assert branch_head(project) == head
    # `/pair retry` checks again: still breached, nothing runs.
    again = project.command("retry")
    assert again.status == "failed-custody"
    assert len(project.cycle_events("reviewed")) == 1
    assert branch_head(project) == head


def test_a_rewritten_branch_breaks_custody_too(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    project.command("implement")
    for _ in range(6):  # apply, verify, red, fix
        if project.step().result.transition == "fix":
            break
    (seal,) = project.cycle_events("sealed")
    # Someone force-pushes a branch that no longer holds the seal's commit.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(project.forge.repo), str(clone))
    git(clone, "checkout", "-q", "-B", "rewrite", "origin/main")
    (clone / "other.txt").write_text("rewritten\n")
    git(clone, "add", "other.txt")
    git(clone, "commit", "-q", "-m", "rewritten history")
    git(clone, "push", "-q", "--force", "origin", f"rewrite:pair/card-{project.card}")
    step = project.step()  # the next step would be a propose on the rewritten branch
    assert step.status == "failed-custody"
    assert step.result.transition == "propose"
    assert f"seal r1-g1's commit {seal['commit'][:12]} is not an ancestor" in (
        step.result.message or ""
    )


# A test runner like tests/support/checks.py that reports an `error:` check as a JUnit <error>
# (a test that could not run), the way pytest reports a broken fixture.
ERRORING_RUNNER = """\
import sys
from pathlib import Path
from xml.sax.saxutils import quoteattr

cases = []
for check in sorted(Path("checks").glob("*.check")):
    line, name = check.read_text().strip(), quoteattr(check.stem)
    if line.startswith("error:"):
        body = '<error message="fixture missing"/>'
    else:
        path, _, text = line.partition(" contains ")
        ok = Path(path).is_file() and text in Path(path).read_text()
        body = "" if ok else '<failure message="lacks the text"/>'
    cases.append(f'<testcase classname="checks" name={name}>{body}</testcase>')
out = Path(sys.argv[1])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text('<testsuite name="checks">' + "".join(cases) + "</testsuite>\\n")
"""


def test_a_red_test_that_errors_fails_for_the_wrong_reason(tmp_path: Path) -> None:
    project = CardProject.create(
        tmp_path,
        files={"run_checks.py": ERRORING_RUNNER},
        tests={"command": f"{sys.executable} run_checks.py .pair/junit.xml"},
    )
    project.script({"verify": ["findings-blocking"], "red": ["red-erroring"] * 3})
    project.command("implement")
    steps = project.until_quiet()
    refused = [s for s in steps if s.result.transition == "red"]
    assert "contract-incomplete:r1-1:wrong-reason (checks::r1-1 errors" in (
        refused[0].result.message or ""
    )
    assert steps[-1].status == "failed-contract"
    assert project.cycle_events("sealed") == []
