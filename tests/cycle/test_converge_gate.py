"""The converge gate end to end: a real repository, the local forge, the scripted agent.

Each refusal is a step sent back with the file or test named, nothing of it pushed, and the
retry (the scripted agent behaves the second time) carries the card on to readiness. An
allowance lets the same edit through; a project without a test command says so in the step's
message and its tracking comment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.card_project import CardProject
from tests.support.git import git

SEEDED = {
    "tests/test_widget.py": "def test_widget():\n    assert 1 + 1 == 2\n",
    "checks/baseline.check": "README.md contains project\n",
    "package.json": '{"name": "widget"}\n',
}


def _pushed_file(project: CardProject, path: str) -> str:
    pull = project.pull()
    assert pull is not None
    return git(project.forge.repo, "show", f"{project.forge.head_of(pull)}:{path}")


@pytest.mark.parametrize(
    ("behaviour", "transition", "expected"),
    [
        pytest.param(
            "edit-test",
            "apply",
            "tests/test_widget.py is an existing test (matches **/tests/**): apply may add tests "
            "but not edit",
            id="apply-edits-an-existing-test",
        ),
        pytest.param(
            "delete-check",
            "apply",
            "1 test that passed before is now missing or skipped: "
            "checks::baseline (missing from the run)",
            id="apply-deletes-a-passing-test",
        ),
        pytest.param(
            "skip-check",
            "fix",
            "1 test that passed before is now missing or skipped: checks::baseline (skipped)",
            id="fix-skips-a-passing-test",
        ),
        pytest.param(
            "edit-manifest",
            "apply",
            "package.json is a dependency manifest (matches **/package.json); allowed only via "
            "tests.mayModifyManifests",
            id="apply-edits-package-json",
        ),
    ],
)
def test_a_tampering_step_is_sent_back_naming_what_it_touched(
    tmp_path: Path, behaviour: str, transition: str, expected: str
) -> None:
    project = CardProject.create(tmp_path, files=SEEDED)
    project.script({"verify": ["findings-blocking", "ok"], transition: [behaviour, "ok"]})
    project.command("implement")
    steps = project.until_quiet()
    sent_back = [s for s in steps if s.result.state == "sent-back"]
    assert [s.result.transition for s in sent_back] == [transition]
    assert expected in (sent_back[0].result.message or "")
    assert steps[-1].status == "ready-for-merge"
    # What the refused step did was reset away: the PR head holds the seeded files unchanged.
    for path, text in SEEDED.items():
        assert _pushed_file(project, path) == text.rstrip("\n")


def test_an_allowed_glob_lets_the_edit_through(tmp_path: Path) -> None:
    project = CardProject.create(
        tmp_path,
        files=SEEDED,
        tests={"mayModifyTests": ["tests/**"], "mayModifyManifests": ["package.json"]},
    )
    project.script(
        {"verify": ["findings-blocking", "ok"], "apply": ["edit-test"], "fix": ["edit-manifest"]}
    )
    project.command("implement")
    steps = project.until_quiet()
    assert not [s for s in steps if s.result.state == "sent-back"]
    assert steps[-1].status == "ready-for-merge"
    assert "weakened" in _pushed_file(project, "tests/test_widget.py")
    assert "left-pad" in _pushed_file(project, "package.json")


def test_without_a_test_command_every_checked_step_says_no_gate_applies(tmp_path: Path) -> None:
    project = CardProject.create(
        tmp_path,
        files={"pyproject.toml": "[project]\nname = 'widget'\n"},
        tests={"command": None, "junit": None},
    )
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "ready-for-merge"
    applied = [s for s in steps if s.result.transition == "apply"]
    assert applied
    message = applied[0].result.message or ""
    assert message.startswith("no test gate applies: tests.command is not set")
    assert "detected `pytest` (pyproject.toml)" in message
    tracking = [c["body"] for c in project.comments(project.card) if "pair:tracking" in c["body"]]
    assert len(tracking) == 1
    assert "no test gate applies" in tracking[0]
