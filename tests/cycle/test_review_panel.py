"""End to end on the `local` host: a review panel of two reviewers on the same head.

Both are the scripted agent (the `command` adapter takes no model, so the two entries differ
by model only and review as `commandalpha` and `commandbeta`); each runs in its own session.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.card_project import CardProject

PANEL = {
    "review": {
        "panel": [{"name": "command", "model": "alpha"}, {"name": "command", "model": "beta"}]
    }
}


def _verify_calls(project: CardProject) -> list[str]:
    log = project.scratch / "agent-log.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return [c["instructions"] for c in calls if c["transition"] == "verify"]


def test_one_reviewer_blocking_holds_the_panel_and_the_comment_names_who_said_what(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, config=PANEL)
    project.script({"verify@commandbeta": ["findings-blocking"]})
    project.command("implement")
    assert project.step().result.transition == "apply"
    verify = project.step()
    assert verify.result.transition == "verify"
    reviewed = project.cycle_events("reviewed")[-1]
    assert (reviewed["converged"], reviewed["blocking"]) == (False, 1)
    pull = project.pull()
    assert pull is not None
    assert project.statuses(pull)[reviewed["head"]]["state"] == "failure"

    rounds = _verify_calls(project)
    assert len(rounds) == 2, "each reviewer ran once, on the same head"
    assert "reviewer commandalpha on a panel" in rounds[0]
    assert "`r1-commandbeta-<n>`" in rounds[1]
    votes = [r for r in project.journal() if r["kind"] == "panel-vote"]
    assert [(v["data"]["reviewer"], v["data"]["converged"]) for v in votes] == [
        ("commandalpha", True),
        ("commandbeta", False),
    ]
    assert len({v["session"] for v in votes}) == 2
    outcome = [r for r in project.journal() if r["kind"] == "outcome"][-1]
    assert [f["id"] for f in outcome["findings"]["findings"]] == ["r1-commandbeta-1"]
    comment = next(
        c["body"] for c in project.comments(pull) if "pair:review" in c["body"].splitlines()[0]
    )
    assert "#### Review panel" in comment
    assert "| commandalpha | converged | 0 |" in comment
    assert "| commandbeta | blocks | 1 |" in comment
    assert (
        "**The reviewers disagree:** commandalpha found nothing blocking; commandbeta blocks."
        in comment
    )

    # The fix round, then both review again: beta resolves its finding and the panel converges.
    steps = project.until_quiet()
    transitions = [s.result.transition for s in steps if s.result.transition]
    assert transitions == ["red", "verify-red", "fix", "verify", "publish"]
    assert steps[-1].status == "ready-for-merge"
    assert len(_verify_calls(project)) == 4
    final = project.cycle_events("reviewed")[-1]
    assert final["converged"] is True
    comment = next(
        c["body"] for c in project.comments(pull) if "pair:review" in c["body"].splitlines()[0]
    )
    assert "disagree" not in comment
    assert "| commandbeta | converged | 0 |" in comment


def test_a_reviewer_that_fails_fails_the_whole_verify_naming_nobody_converged(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path, config=PANEL)
    project.script({"verify@commandalpha": ["crash"]})
    project.command("implement")
    project.step()  # apply
    verify = project.step()
    assert verify.result.transition == "verify"
    assert verify.result.state == "blocked"
    assert verify.status == "failed-verify"
    assert len(_verify_calls(project)) == 1, "the second reviewer never ran"
    assert [r for r in project.journal() if r["kind"] == "panel-vote"] == []
    assert project.cycle_events("reviewed") == []
