"""The App's worker on two repositories: each job's real cycle step runs on its own checkout.

Two projects on the `local` host, each a git work tree whose `origin` names a GitHub repository
and whose forge is its own (`.pair/forge`, the default); the root is one, the other sits in the
checkouts directory as `<owner>/<name>`. The production executor runs a real `/pair implement`
for each repository (the scripted agent, the real engine), and refuses a third repository
without touching either tree.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.engine.step import EngineDeps
from app.errors import UserError
from app.hosting import HostSettings
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from app.web.worker import cycle_executor
from hosts.local import LocalForge
from tests.support.card_project import MAINTAINER, project_config
from tests.support.git import git
from tests.support.project import agent_dir, agent_env


def make_checkout(root: Path, origin: str, title: str) -> int:
    """A project at `root` (a clone of `origin`, as far as its remote says) with one card."""
    (root / ".pair").mkdir(parents=True)
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(project_config("local")))
    (root / ".gitignore").write_text(".pair/forge/\n")
    (root / "README.md").write_text(f"# {title}\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    git(root, "remote", "add", "origin", origin)
    forge = LocalForge(root / ".pair" / "forge")
    git(root, "push", "-q", str(forge.repo), "main")
    return forge.seed_card(title, "AC-1: it works\n", author=MAINTAINER)


def commands_run(root: Path, card: int) -> list[str]:
    journal = root / ".pair" / "batches" / f"card-{card}" / "run" / "journal.jsonl"
    if not journal.exists():
        return []
    return [
        r["data"]["verb"]
        for r in map(json.loads, journal.read_text().splitlines())
        if r.get("kind") == "cycle" and r["data"].get("event") == "command"
    ]


def snapshot(root: Path) -> tuple[list[str], str]:
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.relative_to(root).parts
    )
    refs = subprocess.run(
        ["git", "for-each-ref"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return files, refs


def test_each_repository_runs_on_its_own_checkout_and_an_unknown_one_on_none(
    tmp_path: Path,
) -> None:
    root = tmp_path / "hello"
    card_a = make_checkout(root, "https://github.com/octocat/Hello-World.git", "Hello card")
    widgets = tmp_path / "checkouts" / "octo-org" / "widgets"
    card_b = make_checkout(widgets, "git@github.com:octo-org/widgets.git", "Widgets card")
    scratch = agent_dir(tmp_path / "agent")
    built: list[Path] = []

    def deps_for(path: Path) -> Any:
        built.append(path)
        return EngineDeps(
            launcher=Launcher(lambda _settings: ProcessRuntime(kill_grace_s=0.2)),
            env=agent_env({"PAIR_TEST_AGENT_DIR": str(scratch)}),
        )

    # No PAIR_LOCAL_FORGE: each checkout's hosts are its own `.pair/forge`.
    execute = cycle_executor(
        root,
        agent_env(),
        lambda: deps_for(root),
        hosts=HostSettings.from_env(agent_env()),
        checkouts=tmp_path / "checkouts",
        deps_for=deps_for,
    )
    parsed = parse_commands("/pair implement")[0]
    assert isinstance(parsed, Command)

    def request(card: int, delivery: str) -> PairRequest:
        return PairRequest.from_command(card, parsed, comment=None, delivery=delivery)

    asyncio.run(execute(request(card_a, "d-a"), "octocat/Hello-World", 7))
    assert commands_run(root, card_a) == ["implement"]
    assert commands_run(widgets, card_b) == []
    asyncio.run(execute(request(card_b, "d-b"), "Octo-Org/Widgets", 7))
    assert commands_run(widgets, card_b) == ["implement"]
    assert commands_run(root, card_a) == ["implement"]
    assert built == [root, widgets]
    # Each step read its card from its own checkout's forge, in its own worktree, and labelled
    # the card there.
    log = (scratch / "agent-log.jsonl").read_text().splitlines()
    prompts = [json.loads(line)["instructions"] for line in log]
    assert [("Hello card" in p, "Widgets card" in p) for p in prompts] == [
        (True, False),
        (False, True),
    ]
    for tree in (root, widgets):
        card = json.loads((tree / ".pair" / "forge" / "cards" / "1.json").read_text())
        assert card["labels"] == ["pr-state:in-progress"]
        assert "pair/card-1" in git(tree, "branch", "--list", "pair/card-1")

    before = snapshot(root), snapshot(widgets)
    with pytest.raises(UserError, match="no checkout of octo/gamma"):
        asyncio.run(execute(request(card_a, "d-c"), "octo/gamma", 7))
    assert (snapshot(root), snapshot(widgets)) == before
    assert built == [root, widgets]  # nothing was even prepared for the refused job
