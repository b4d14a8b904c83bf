"""The cycle's human surface on the `local` host: scope decisions, and every `/pair` verb.

Scope decisions of each action are applied once through the host layer's validation and a
replay changes nothing; a decision from anyone but the maintainer is refused with its reason.
The verbs park, resume, explain and stop a card; a bad command runs nothing and says why.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.cycle.driver import handle_scope_decision
from app.errors import CommandNotRun, UserError
from hosts.models import Author, Target
from tests.support.card_project import CardProject, scope_decision_comment
from tests.support.project import PAIRBOT, agent_env


def _converge_with_a_proposal(tmp_path: Path) -> tuple[CardProject, int, str]:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["scope-proposal", "ok"]})
    project.command("implement")
    steps = project.until_quiet()
    assert steps[-1].status == "awaiting-scope-decision"
    pull = project.pull()
    assert pull is not None
    packet = next(c for c in project.comments(pull) if "pair:scope-packet" in c["body"])
    baseline = packet["body"].split('"scopeBaselineHash": "')[1].split('"')[0]
    return project, pull, baseline


@pytest.mark.parametrize(
    ("item", "transitions"),
    [
        pytest.param(
            {"id": "sc-1", "action": "ignore", "rationale": "out of scope"},
            ["scope-decision", "publish"],
            id="ignore",
        ),
        pytest.param(
            {"id": "sc-1", "action": "new-card"},
            ["scope-decision", "publish"],
            id="new-card",
        ),
        pytest.param(
            {
                "id": "sc-1",
                "action": "extend-current-card",
                "approvedDelta": {"ac": "AC-1", "text": "it works and shows a lockout notice"},
            },
            ["scope-decision", "apply", "verify", "publish"],
            id="extend-current-card",
        ),
    ],
)
def test_each_scope_action_is_applied_once_and_a_replay_changes_nothing(
    tmp_path: Path, item: dict[str, Any], transitions: list[str]
) -> None:
    project, pull, baseline = _converge_with_a_proposal(tmp_path)
    card_count = len(list((project.forge.root / "cards").glob("*.json")))
    project.comment_as_maintainer(Target("pull", pull), scope_decision_comment(baseline, item))
    steps = project.until_quiet()
    assert [s.result.transition for s in steps if s.result.transition] == transitions
    assert steps[-1].status == "ready-for-merge"
    applied = project.cycle_events("scope-applied")
    assert len(applied) == 1 and applied[0]["dispositions"][0]["action"] == item["action"]
    cards_now = len(list((project.forge.root / "cards").glob("*.json")))
    assert cards_now == card_count + (1 if item["action"] == "new-card" else 0)
    body = json.loads((project.forge.root / "cards" / f"{project.card}.json").read_text())["body"]
    if item["action"] == "extend-current-card":
        assert "lockout notice" in body
    else:
        assert body == "AC-1: it works\n"
    # A redelivered decision (the same comment again) is a no-op.
    before = len(project.journal())
    asyncio.run(handle_scope_decision(project.env(), pull))
    assert len(project.cycle_events("scope-applied")) == 1
    assert len(list((project.forge.root / "cards").glob("*.json"))) == cards_now
    assert len(project.journal()) == before
    project.assert_invariants()


def test_a_decision_from_someone_else_is_refused_with_its_reason(tmp_path: Path) -> None:
    project, pull, baseline = _converge_with_a_proposal(tmp_path)
    mallory = Author(login="mallory", id="666")
    project.forge.comment_as(
        mallory,
        Target("pull", pull),
        scope_decision_comment(baseline, {"id": "sc-1", "action": "ignore"}),
    )
    step = project.step()
    assert step.status == "awaiting-scope-decision"
    refusal = [c for c in project.comments(pull) if "pair:scope-refusal" in c["body"]]
    assert len(refusal) == 1 and "not-maintainer" in refusal[0]["body"]
    assert not project.cycle_events("scope-applied")
    project.step()  # asking again does not post a second refusal
    assert len([c for c in project.comments(pull) if "pair:scope-refusal" in c["body"]]) == 1


def test_needs_input_parks_and_an_answer_resumes(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"apply": ["needs-input", "ok"]})
    project.command("implement")
    step = project.step()
    assert step.result.state == "blocked" and step.status == "needs-input"
    assert project.labels(project.card) == ["pr-state:needs-input"]
    assert project.step().result.state == "blocked"  # parked: nothing runs
    resumed = project.command("answer use sqlite")
    assert resumed.result.transition == "apply" and resumed.result.state == "advanced"
    calls = [json.loads(x) for x in (project.scratch / "agent-log.jsonl").read_text().splitlines()]
    assert "use sqlite" in calls[-1]["instructions"]


def test_a_crashed_agent_fails_the_implementation_and_retry_runs_it_again(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.script({"apply": ["crash", "ok"]})
    project.command("implement")
    step = project.step()
    assert (step.result.state, step.status) == ("blocked", "failed-implement")
    assert project.labels(project.card) == ["pr-state:failed-implement"]
    assert project.command("retry").result.transition == "apply"


def test_status_explains_without_running_anything(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")
    calls = (project.scratch / "agent-log.jsonl").read_text().count("\n")
    step = project.command("status")
    assert step.explanation is not None
    assert step.explanation.gate == "prepare"
    assert "/pair approve" in " ".join(step.explanation.what_you_can_do)
    assert (project.scratch / "agent-log.jsonl").read_text().count("\n") == calls


def test_abandon_stops_the_cycle_and_keeps_the_record(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    step = project.command("abandon")
    assert step.status == "abandoned"
    assert project.labels(project.card) == ["pr-state:abandoned"]
    assert project.step().result.state == "nothing-ready"
    assert project.journal()  # nothing was deleted
    resumed = project.command("implement")  # a new implement resumes the card
    assert resumed.result.transition == "apply"


def test_commands_on_a_card_without_a_cycle_are_refused(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    with pytest.raises(UserError, match="/pair implement"):
        project.command("approve")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["card", "0", "implement"], "positive integer", id="card-zero"),
        pytest.param(["card", "x", "implement"], "positive integer", id="card-not-a-number"),
        pytest.param(["card", "1", "deploy"], "usage", id="unknown-verb"),
        pytest.param(["card", "1", "implement", "until:", "soon"], "until", id="bad-until"),
        pytest.param(["card", "1", "approve", "now"], "approve", id="trailing-text"),
        pytest.param(["card", "1"], "usage", id="no-verb"),
    ],
)
def test_bad_card_commands_exit_2_with_the_usage(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    project = CardProject.create(tmp_path)
    before = sorted(p.name for p in (project.root / ".pair").iterdir())
    done = subprocess.run(
        [str(PAIRBOT), "--root", str(project.root), *args],
        capture_output=True,
        text=True,
        env=agent_env({"PAIR_LOCAL_FORGE": str(project.forge.root)}),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr.lower()
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in (project.root / ".pair").iterdir()) == before


def test_a_redelivered_command_runs_nothing(tmp_path: Path) -> None:
    from app.cycle.driver import handle_request
    from app.domain.intake.comment_commands import Command, parse_commands
    from app.domain.intake.pair_request import PairRequest

    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")
    parsed = parse_commands("/pair approve")[0]
    assert isinstance(parsed, Command)
    request = PairRequest.from_command(project.card, parsed, comment=None, delivery="d-1")
    first = asyncio.run(handle_request(project.env(), request))
    assert first.result.transition == "apply"
    calls = (project.scratch / "agent-log.jsonl").read_text().count("\n")
    again = asyncio.run(handle_request(project.env(), request))  # the same delivery, again
    assert again.result.transition == ""
    assert (project.scratch / "agent-log.jsonl").read_text().count("\n") == calls
    assert len([e for e in project.cycle_events("command") if e["delivery"] == "d-1"]) == 1


def test_a_command_the_app_announced_on_the_tracking_comment_republishes_it(
    tmp_path: Path,
) -> None:
    """The App acknowledges a card comment by rewriting the card's tracking comment to "queued
    `/pair …`" (app/web/handling.py); the step must write the card's state back even when its
    own body is unchanged, or "queued … runs next" would stand for good."""
    from app.cycle.driver import handle_request
    from app.domain.intake.comment_commands import Command, parse_commands
    from app.domain.intake.pair_request import CommentRef, PairRequest
    from hosts.markers import make_marker

    project = CardProject.create(tmp_path)
    project.command("implement")
    assert project.until_quiet()[-1].status == "ready-for-merge"
    project.command("status")  # the body a `/pair status` writes, now recorded
    marker = make_marker("tracking", project.card)

    def tracking() -> str:
        (body,) = [c["body"] for c in project.comments(project.card) if marker in c["body"]]
        return str(body)

    before = tracking()
    queued = "queued `/pair status` (requested by **octocat**); it runs next in pairbot's worker."
    asyncio.run(project.host.upsert_comment(Target("card", project.card), marker, queued))
    parsed = parse_commands("/pair status")[0]
    assert isinstance(parsed, Command)
    ref = CommentRef(id="c-1", author_login="octocat", author_id=1)
    request = PairRequest.from_command(project.card, parsed, comment=ref, delivery="d-1")
    asyncio.run(handle_request(project.env(), request))
    assert tracking() == before

    # A command the cycle refuses puts the card's status back too, and says so by its error
    # (CommandNotRun), so the App's failure reply leaves the tracking comment alone.
    queued = "queued `/pair approve` (requested by **octocat**); it runs next in pairbot's worker."
    asyncio.run(project.host.upsert_comment(Target("card", project.card), marker, queued))
    approve = parse_commands("/pair approve")[0]
    assert isinstance(approve, Command)
    refused = PairRequest.from_command(project.card, approve, comment=ref, delivery="d-2")
    with pytest.raises(CommandNotRun, match="not waiting for an approval"):
        asyncio.run(handle_request(project.env(), refused))
    assert tracking() == before


def test_a_command_on_the_cards_pull_request_acts_on_the_card(tmp_path: Path) -> None:
    """The App forwards a PR comment's command with the PR's number (it cannot know the card);
    the cycle finds the card behind the pull request. A PR no cycle opened is refused."""
    from app.cycle.driver import handle_request
    from app.domain.intake.comment_commands import Command, parse_commands
    from app.domain.intake.pair_request import CommentRef, PairRequest

    project = CardProject.create(tmp_path)
    project.script({"verify": ["crash", "ok"]})
    project.command("implement")
    assert project.until_quiet()[-1].status == "failed-verify"  # the reviewer crashed; a PR is open
    pull = project.pull()
    assert pull is not None and pull != project.card

    def on_pull(number: int, text: str, delivery: str) -> PairRequest:
        parsed = parse_commands(f"/pair {text}")[0]
        assert isinstance(parsed, Command)
        ref = CommentRef(id="c-1", author_login="octocat", author_id=1, on_pull=True)
        return PairRequest.from_command(number, parsed, comment=ref, delivery=delivery)

    resumed = asyncio.run(handle_request(project.env(), on_pull(pull, "retry", "d-1")))
    assert resumed.result.transition == "verify" and resumed.result.state == "advanced"
    assert [e["delivery"] for e in project.cycle_events("command")][-1] == "d-1"
    assert not (project.root / ".pair" / "batches" / f"card-{pull}").exists()
    with pytest.raises(UserError, match=f"PR #{pull + 7} is not a pairbot card's pull request"):
        asyncio.run(handle_request(project.env(), on_pull(pull + 7, "status", "d-2")))


def test_the_apps_worker_executor_runs_a_real_cycle_step(tmp_path: Path) -> None:
    from app.domain.intake.comment_commands import Command, parse_commands
    from app.domain.intake.pair_request import PairRequest
    from app.hosting import HostSettings
    from app.web.worker import cycle_executor

    project = CardProject.create(tmp_path)
    env = project.env()
    execute = cycle_executor(
        project.root,
        env.deps.env,
        lambda: env.deps,
        hosts=HostSettings(local_forge=str(project.forge.root)),
    )
    parsed = parse_commands("/pair implement")[0]
    assert isinstance(parsed, Command)
    request = PairRequest.from_command(project.card, parsed, comment=None, delivery="gh-1")
    asyncio.run(execute(request, "octocat/Hello-World", 7))
    assert [e["verb"] for e in project.cycle_events("command")] == ["implement"]
    assert any(r.get("transition") == "propose" for r in project.journal())
    asyncio.run(execute(request, "octocat/Hello-World", 7))  # GitHub redelivered the dispatch
    assert len(project.cycle_events("command")) == 1
