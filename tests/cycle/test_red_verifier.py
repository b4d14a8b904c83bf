"""End to end on the `local` host: the red contract verifier, an agent step of its own.

After an accepted red nothing is sealed yet: `verify-red` (role redVerifier) reads the contract,
the findings, red's test diff and the failing output and accepts or refuses the contract row by
row. Accepted, the seal is journaled and fix follows; refused, red runs again with the reasons,
and the third refusal in a row is `failed-contract` (a retry runs red again). A verifier that
changes the tree, judges rows the contract has not, or gives no verdict is never an acceptance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cycle.state import CardStep
from app.settings import BatchSettings, resolve_settings
from tests.support.card_project import CardProject
from tests.support.git import git


def transitions(steps: list[CardStep]) -> list[str]:
    return [s.result.transition for s in steps if s.result.transition]


def calls(project: CardProject, transition: str) -> list[dict[str, Any]]:
    log = project.scratch / "agent-log.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [c for c in lines if c["transition"] == transition]


def step_to(project: CardProject, transition: str, limit: int = 10) -> CardStep:
    for _ in range(limit):
        step = project.step()
        if step.result.transition == transition:
            return step
    raise AssertionError(f"no {transition} step within {limit} steps")


def tracking(project: CardProject) -> str:
    (body,) = [c["body"] for c in project.comments(project.card) if "pair:tracking" in c["body"]]
    return str(body)


def test_red_is_sealed_only_once_the_verifier_accepts_its_contract(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    project.command("implement")
    red = step_to(project, "red")
    assert red.result.state == "advanced"
    assert project.cycle_events("sealed") == []  # nothing is sealed before the verifier
    (pending,) = project.cycle_events("red-contract")
    assert pending["ids"] == ["checks::r1-1"] and pending["rows"] == ["r1-1"]
    # What every view shows next is the verifier, by name.
    assert red.explanation is not None and red.explanation.next == "verify-red"
    assert "**Next step:** verify-red" in tracking(project)

    verified = project.step()
    assert (verified.result.transition, verified.result.state) == ("verify-red", "advanced")
    assert "contract accepted" in (verified.result.message or "")
    (seal,) = project.cycle_events("sealed")
    assert seal["commit"] == pending["commit"] and seal["seal"] == "r1-g1"
    assert "failing" not in seal and "contract" not in seal
    # The verifier was told the contract, the finding, red's test diff and the failing output.
    (told,) = calls(project, "verify-red")
    text = told["instructions"]
    assert "Change no file" in text and "r1-1" in text
    assert '"rows"' in text  # the contract
    assert "checks/r1-1.check" in text  # red's test diff
    assert "The failing output of red's tests" in text and "checks::r1-1" in text
    rest = project.until_quiet()
    assert transitions(rest)[:2] == ["fix", "verify"]
    assert rest[-1].status == "ready-for-merge"


def test_a_refused_contract_sends_red_again_with_the_reasons(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "verify-red": ["refuse-contract"]})
    project.command("implement")
    step_to(project, "red")
    refused = project.step()
    assert (refused.result.transition, refused.result.state) == ("verify-red", "advanced")
    assert "contract refused" in (refused.result.message or "")
    assert refused.explanation is not None and refused.explanation.next == "red"
    assert project.cycle_events("sealed") == []
    again = project.step()
    assert (again.result.transition, again.result.state) == ("red", "advanced")
    told = calls(project, "red")[-1]["instructions"]
    assert "refused your last contract" in told
    assert "the test asserts nothing the finding names" in told
    steps = project.until_quiet()
    assert transitions(steps)[:2] == ["verify-red", "fix"]
    assert steps[-1].status == "ready-for-merge"
    assert len(project.cycle_events("sealed")) == 1


def test_three_refusals_in_a_row_are_failed_contract_and_retry_runs_red(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "verify-red": ["refuse-contract"] * 3})
    project.command("implement")
    steps = project.until_quiet()
    assert transitions(steps)[-7:-1] == ["red", "verify-red"] * 3  # then the park's step
    assert steps[-1].status == "failed-contract"
    assert project.labels(project.card) == ["pr-state:failed-contract"]
    assert project.cycle_events("sealed") == []
    explanation = steps[-1].explanation
    assert explanation is not None
    assert "refused red's contract 3 times in a row" in explanation.why
    parked = project.step()  # parked: nothing runs
    assert parked.result.state == "blocked" and parked.status == "failed-contract"
    assert len(calls(project, "verify-red")) == 3
    retried = project.command("retry")
    assert retried.result.transition == "red"
    rest = project.until_quiet()
    assert transitions(rest)[:2] == ["verify-red", "fix"]
    assert rest[-1].status == "ready-for-merge"


def test_no_verdict_is_never_an_acceptance(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "verify-red": ["no-verdict"]})
    project.command("implement")
    step_to(project, "red")
    failed = project.step()
    assert failed.result.transition == "verify-red"
    assert failed.result.state == "blocked"
    assert "no usable contract verdict" in (failed.result.message or "")
    assert "--findings FILE" in (failed.result.message or "")
    assert failed.status == "blocked"
    assert project.cycle_events("sealed") == []
    retried = project.command("retry")  # the verifier runs again, and accepts
    assert (retried.result.transition, retried.result.state) == ("verify-red", "advanced")
    assert len(project.cycle_events("sealed")) == 1


def test_a_verifier_that_changes_the_tree_or_skips_a_row_is_sent_back(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "verify-red": ["edit-tree", "skip-row"]})
    project.command("implement")
    step_to(project, "red")
    head = project.forge.branch_sha(f"pair/card-{project.card}")
    edited = project.step()
    assert (edited.result.transition, edited.result.state) == ("verify-red", "sent-back")
    assert f"must not change the tree; it changed card-{project.card}.txt" in (
        edited.result.message or ""
    )
    assert project.forge.branch_sha(f"pair/card-{project.card}") == head  # nothing pushed
    skipped = project.step()
    assert (skipped.result.transition, skipped.result.state) == ("verify-red", "sent-back")
    message = skipped.result.message or ""
    assert "rows not judged: r1-1" in message and "does not have: r9-9" in message
    assert project.cycle_events("sealed") == []
    accepted = project.step()
    assert (accepted.result.transition, accepted.result.state) == ("verify-red", "advanced")
    assert len(project.cycle_events("sealed")) == 1


def test_a_verdict_file_written_in_the_tree_is_the_report_not_a_change(tmp_path: Path) -> None:
    """A real agent told to change nothing still writes its verdict where it works: that file
    is read into the journal and taken out of the tree, never a change to refuse or push."""
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "verify-red": ["verdict-in-tree"]})
    project.command("implement")
    step_to(project, "red")
    head = project.forge.branch_sha(f"pair/card-{project.card}")
    verified = project.step()
    assert (verified.result.transition, verified.result.state) == ("verify-red", "advanced")
    assert len(project.cycle_events("sealed")) == 1
    (completion,) = [
        r
        for r in project.journal()
        if r.get("kind") == "completion" and r.get("transition") == "verify-red"
    ]
    assert completion["findingsFile"] == "red-verdict.json"
    assert completion["findings"]["verdict"] == "accept"
    assert project.forge.branch_sha(f"pair/card-{project.card}") == head  # nothing pushed
    rest = project.until_quiet()
    assert rest[-1].status == "ready-for-merge"
    listed = git(project.forge.repo, "ls-tree", "-r", "--name-only", f"pair/card-{project.card}")
    assert "red-verdict.json" not in listed.split()


def test_the_verifier_has_its_own_agent_and_model(tmp_path: Path) -> None:
    project = BatchSettings.model_validate(
        {"agent": {"verify-red": {"name": "codex", "model": "o3"}}}
    )
    resolved = resolve_settings(env={}, manifest=None, project=project)
    choice = resolved.agent_for("verify-red")
    assert (choice.name, choice.model) == ("codex", "o3")
    assert resolved.agent_for("red").name == "claude"


def test_a_red_sealed_before_the_verifier_existed_is_verified_not_sealed_twice(
    tmp_path: Path,
) -> None:
    """A run resumed from a pairbot that sealed red at once: the verifier judges that seal."""
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"]})
    project.command("implement")
    step_to(project, "red")
    journal = project.root / ".pair" / "batches" / f"card-{project.card}" / "run" / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    for record in records:
        data = record.get("data") or {}
        if data.get("event") == "red-contract":  # what the older pairbot wrote instead
            data["event"] = "sealed"
            data.pop("failing")
            data.pop("contract")
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    verified = project.step()
    assert (verified.result.transition, verified.result.state) == ("verify-red", "advanced")
    assert len(project.cycle_events("sealed")) == 1
    assert project.until_quiet()[-1].status == "ready-for-merge"


def test_batch_report_reads_the_verifiers_file_as_a_contract_verdict(tmp_path: Path) -> None:
    from app.cycle.humans import load_findings
    from app.errors import UserError

    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {"verdict": "accept", "rows": [{"id": "r1-1", "verdict": "accept", "reason": "ok"}]}
        )
    )
    assert load_findings(good, "verify-red")["rows"][0]["id"] == "r1-1"
    review_shaped = tmp_path / "review.json"
    review_shaped.write_text(json.dumps({"acTests": {}, "findings": []}))
    with pytest.raises(UserError, match="verdict: Field required") as raised:
        load_findings(review_shaped, "verify-red")
    assert '"verdict": "accept"|"refuse"' in str(raised.value)
