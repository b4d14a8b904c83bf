"""The bundled demo under the App's worker: its cards advance through the real tick.

`app.cli.demo.set_up` (what `python3 dev.py start` runs) prepares the repository, its local forge
and cards, and accepts the maintainer's commands through the card cycle; then the production
tick of `pairbot serve --dev` (`app.web.ticker.checkout_tick`, the real engine, the bundled demo
agent run by the real process runtime) advances everything runnable until it is idle. The demo
card reaches a review-approved pull request through one red/fix round, the refined card waits
at its gate, and setting the demo up again adds nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import dev
from app.cli.demo import CARDS, MAINTAINER, demo_deps, forge_of, main, prepare, set_up
from app.cycle.card_cycle import CardCycle
from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.hosting import HostSettings
from app.web.pages.read import card_views, read_local
from app.web.ticker import checkout_tick
from hosts.models import Target
from tests.support.card_project import card_journal
from tests.support.git import git
from tests.support.project import agent_env

MAX_TICKS = 30  # the demo takes 14: its card's 6 steps and the hello batch's


def forge_state(root: Path) -> dict[str, Any]:
    """Every document of the demo's forge (cards, pulls, comments, statuses), by path."""
    forge = forge_of(root).root
    return {
        str(p.relative_to(forge)): json.loads(p.read_text())
        for p in sorted(forge.rglob("*.json"))
        if "repo.git" not in p.parts
    }


def run_ticks(root: Path, env: dict[str, str]) -> int:
    """Tick as `pairbot serve --dev` does until a tick runs nothing; how many ran a step."""

    async def no_installation(_repo: str) -> int | None:
        return None

    tick = checkout_tick(
        root,
        env,
        lambda path: demo_deps(path, env),
        hosts=HostSettings(),
        checkouts=None,
        installation_of=no_installation,
    )

    async def loop() -> int:
        for ran in range(MAX_TICKS):
            if not await tick():
                return ran
        raise AssertionError(f"the demo was still busy after {MAX_TICKS} ticks")

    return asyncio.run(loop())


def test_the_demo_entry_needs_exactly_one_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().out == "usage: python -m app.cli.demo DIRECTORY\n"


def test_preparing_the_demo_twice_adds_nothing(tmp_path: Path) -> None:
    assert prepare(tmp_path / "demo") is True
    before = forge_state(tmp_path / "demo")
    assert [before[f"cards/{n}.json"]["title"] for n in (1, 2, 3)] == [c.title for c in CARDS]
    assert prepare(tmp_path / "demo") is False
    assert forge_state(tmp_path / "demo") == before


def test_the_worker_takes_the_demo_card_to_a_review_approved_pull_request(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pairbot-demo"
    env = agent_env()
    # A set-up interrupted after the maintainer commented on card #1 but before the command
    # was accepted: resuming accepts it once, without commenting again.
    prepare(root)
    forge_of(root).comment_as(MAINTAINER, Target("card", 1), "/pair implement")
    lines = set_up(root, env)
    assert lines[0] == f"resuming the demo repository in {root}"
    assert any(line.startswith("card #1: /pair implement → propose advanced") for line in lines)
    assert any("card #2: /pair refine" in line and "awaiting-approval" in line for line in lines)
    before = forge_state(root)
    commands = [
        c["body"] for c in before["comments/1.json"] if c["author"]["login"] == "maintainer"
    ]
    assert commands == ["/pair implement"]
    assert set_up(root, env) == [f"resuming the demo repository in {root}"]
    assert forge_state(root) == before  # no second card, comment or command

    assert run_ticks(root, env) >= 5

    views = {v.number: v for v in card_views(read_local(root, None), [], "local/pairbot-demo")}
    assert sorted(views) == [1, 2]  # card #3: nobody asked pairbot about it yet
    shout = views[1]
    assert shout.status == "ready-for-merge", (shout.why, [s.message for s in shout.steps])
    assert [s.transition for s in shout.steps] == [
        "propose",
        "apply",
        "verify",
        "red",
        "verify-red",
        "fix",
        "verify",
    ]
    assert all(s.outcome == "advanced" for s in shout.steps)
    assert shout.review_converged and shout.fix_rounds == 1
    outcomes = [r for r in card_journal(root, 1) if r.get("kind") == "outcome"]
    verdicts = [r["findings"] for r in outcomes if r.get("transition") == "verify"]
    assert [[(f["id"], f["transition"]) for f in v["findings"]] for v in verdicts] == [
        [("r1-1", "open")],
        [("r1-1", "resolved")],
    ]
    assert views[2].status == "awaiting-approval" and views[2].gate == "the prepare gate"

    forge = forge_state(root)
    pull = shout.pr
    assert pull is not None
    assert "pr-state:ready-for-merge" in forge[f"pulls/{pull}.json"]["labels"]
    assert "pr-state:ready-for-merge" in forge["cards/1.json"]["labels"]
    review = forge[f"statuses/{pull}.json"][shout.reviewed_head]
    assert review["state"] == "success"
    branch = forge_of(root).branch_sha("pair/card-1")
    assert branch == shout.reviewed_head
    # What the card's branch holds: the plan and its stamp, the red's contract, the helper,
    # its tests, the sealed red test; no bytecode.
    tree = git(forge_of(root).repo, "ls-tree", "-r", "--name-only", "pair/card-1").split()
    added = sorted(set(tree) - set(git(root, "ls-tree", "-r", "--name-only", "main").split()))
    assert added == [
        ".pair/changes/card-1/.pair.yaml",  # the propose stamp (docs/cycle.md)
        ".pair/changes/card-1/contract.json",  # the red's sealed contract (docs/cycle.md)
        ".pair/changes/card-1/plan.md",
        "shout.py",
        "tests/test_finding_r1_1.py",
        "tests/test_shout.py",
    ]
    assert set_up(root, env) == [f"resuming the demo repository in {root}"]


def test_the_demo_agent_blocks_on_a_card_it_does_not_know_and_says_which_it_knows(
    tmp_path: Path,
) -> None:
    root = tmp_path / "demo"
    prepare(root)
    card = forge_of(root).seed_card("Add a widget", "AC-1: widget() returns 1\n")
    (command,) = parse_commands("/pair implement")
    assert isinstance(command, Command)
    request = PairRequest.from_command(card, command, comment=None, delivery="d-widget")
    cycle = CardCycle.for_checkout(root, HostSettings(), demo_deps(root, agent_env()))
    step = asyncio.run(cycle.handle_request(request))
    assert (step.result.transition, step.result.state) == ("propose", "blocked")
    assert "the demo agent only knows the demo's cards (shout(), title_case(), whisper())" in (
        step.result.message
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param([], "8080", id="default"),
        pytest.param(["--port", "9000"], "9000", id="separate"),
        pytest.param(["--port=9001", "--host", "::1"], "9001", id="joined"),
        pytest.param(["--port"], "8080", id="missing-value"),
    ],
)
def test_dev_start_reads_the_port_it_prints_from_serves_options(
    args: list[str], expected: str
) -> None:
    assert dev._option(args, "--port", "8080") == expected
