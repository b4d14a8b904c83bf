"""A running card never moves host: the binding of its first run is stored in its journal (which
travels with the run-state, on `pair-state` in the Action) and wins over a `hosts:` edited
later, and the run says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml
from pydantic import SecretStr

from app.cycle.card_cycle import CardCycle
from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.hosting import HostSettings
from hosts.github import GitHubHost
from hosts.local import LocalHost
from tests.support.card_project import CardProject, cycle_events
from tests.support.git import git


def request(project: CardProject, text: str) -> PairRequest:
    parsed = parse_commands(f"/pair {text}")
    assert parsed and isinstance(parsed[0], Command)
    return PairRequest.from_command(project.card, parsed[0], comment=None)


def write_hosts(project: CardProject, hosts: dict[str, str] | None) -> None:
    path = project.root / ".pair" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config.pop("hosts", None)
    if hosts is not None:
        config["hosts"] = hosts
    path.write_text(yaml.safe_dump(config))


def test_the_stored_binding_wins_over_a_changed_config(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({}, default="ok")
    write_hosts(project, None)  # no `hosts:`, no origin: the local forge
    settings = HostSettings(local_forge=str(project.forge.root))
    deps = project.env().deps

    said: list[str] = []
    first = CardCycle.for_checkout(project.root, settings, deps, say=said.append)
    assert isinstance(first.hosts.code, LocalHost)
    step = asyncio.run(first.handle_request(request(project, "implement")))
    assert step.card == project.card
    assert said == ["pairbot: hosts pm=local code=local (no origin remote: the local forge)"]
    stored = cycle_events(project.journal(), "hosts")
    assert stored == [{"event": "hosts", "binding": {"version": 1, "pm": "local", "code": "local"}}]

    # The project now declares GitHub; the running card stays where it started.
    write_hosts(project, {"pm": "github", "code": "github"})
    github = settings.model_copy(
        update={"github_repository": "octo/widget", "github_token": SecretStr("t")}
    )
    said.clear()
    later = CardCycle.for_checkout(project.root, github, deps, say=said.append)
    assert isinstance(later.hosts.code, GitHubHost)  # what a new card would get
    step = asyncio.run(later.handle_request(request(project, "status")))
    assert step.card == project.card and step.status
    assert said == [
        "pairbot: hosts pm=github code=github (declared in .pair/config.yaml)",
        f"pairbot: card #{project.card} keeps hosts pm=local code=local (stored with its "
        "run-state when it first ran; the project now resolves pm=github code=github, "
        "declared in .pair/config.yaml)",
    ]
    # Stored once, never rewritten by the later run.
    assert len(cycle_events(project.journal(), "hosts")) == 1
    project.assert_invariants()


def test_a_new_origin_does_not_move_a_running_card_and_its_next_step_runs_there(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.script({}, default="ok")
    write_hosts(project, None)  # nothing declared: the binding is inferred
    settings = HostSettings(local_forge=str(project.forge.root))
    deps = project.env().deps
    first = CardCycle.for_checkout(project.root, settings, deps)
    asyncio.run(first.handle_request(request(project, "implement")))  # propose, on local

    # The checkout now has an origin on GitHub: a new card would go there, this one stays.
    git(project.root, "remote", "add", "origin", "https://github.com/octo/widget.git")
    github = settings.model_copy(update={"github_token": SecretStr("t")})
    said: list[str] = []
    later = CardCycle.for_checkout(project.root, github, deps, say=said.append)
    assert isinstance(later.hosts.code, GitHubHost)
    step = asyncio.run(later.tick(f"card-{project.card}"))  # a real step, no GitHub call
    assert getattr(step, "result", step).transition == "apply"
    assert said[-1].startswith(f"pairbot: card #{project.card} keeps hosts pm=local code=local")
    assert project.pull() is not None  # the draft PR opened on the local forge
    stored = cycle_events(project.journal(), "hosts")
    assert [event["binding"]["code"] for event in stored] == ["local"]
    project.assert_invariants()
