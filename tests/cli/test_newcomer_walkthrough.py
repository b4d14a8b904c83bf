"""A newcomer's first hour, scripted: every step through the installed `pairbot` console script.

In a fresh git repository with no remote (so the local forge, `.pair/forge/`): `pairbot init`,
the two commands it says to run, `pairbot card new`, `pairbot card 1 implement`, ticks up to
the merge gate, `pairbot card 1 approve`, and the card is merged on the local host. Then the
mistakes a newcomer makes: a typo'd host, a card that does not exist, a second command while
a step holds the card's lock. Each is one line with its documented exit code, and no output
of any step holds a traceback. The agent is the scripted one, run by the `command` adapter as
the user's own agent would be.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.engine.manifest import load_project_config
from tests.support.card_project import CHECKS
from tests.support.git import git, init_repo
from tests.support.project import AGENT, PAIRBOT, agent_dir, agent_env, cli

pytestmark = pytest.mark.slow

# What the newcomer adds to the config `pairbot init` wrote: their agent, a test command that
# writes JUnit, and a cycle that merges once they approve.
USER_CONFIG = f"""
batch:
  agent: command
  agentCommand: [{sys.executable}, {AGENT}]
tests: {{command: "{sys.executable} {CHECKS} .pair/junit.xml", junit: .pair/junit.xml}}
cycle: {{prepare: never, until: merged}}
"""


class Walk:
    """The newcomer's repository and every output they have seen."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "widget"
        init_repo(self.root, {"README.md": "# widget\n"})
        # The scripted agent's own files, outside the repository.
        self.scratch = agent_dir(tmp / "agent")
        self.seen: list[str] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {"PAIR_TEST_AGENT_DIR": str(self.scratch), **extra}

    def run(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = cli(*args, cwd=self.root, env=self.env(), timeout=300)
        self.seen.append(done.stdout + done.stderr)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        return done

    def refusal(self, done: subprocess.CompletedProcess[str]) -> str:
        """The one line a refusal ends with, after the run's one line naming its hosts."""
        lines = [line for line in done.stderr.splitlines() if line]
        assert lines and all(line.startswith("pairbot: ") for line in lines), done.stderr
        assert len([line for line in lines if not line.startswith("pairbot: hosts ")]) == 1
        return lines[-1]

    def script(self, default: str) -> None:
        (self.scratch / "script.json").write_text(json.dumps({"default": default, "steps": {}}))

    def forge(self, kind: str, number: int) -> dict[str, Any]:
        path = self.root / ".pair" / "forge" / kind / f"{number}.json"
        data: dict[str, Any] = json.loads(path.read_text())
        return data


@pytest.mark.slow_first(35)
def test_a_newcomer_goes_from_init_to_a_merged_card(tmp_path: Path) -> None:
    walk = Walk(tmp_path)

    init = walk.run("init")
    assert "hosts: pm=local code=local (no origin remote: the local forge)" in init.stdout
    commands = [line.strip() for line in init.stdout.splitlines() if line.startswith("  git ")]
    assert commands == [
        "git add .pair/config.yaml .pair/.gitignore",
        'git commit -m "pairbot: project config"',
    ]
    load_project_config(walk.root)  # what init wrote is a config a run accepts
    again = walk.run("init", code=2)
    assert walk.refusal(again).endswith("run `pairbot init --force` to replace it")

    # The newcomer configures their agent and tests, then runs exactly what init said.
    with (walk.root / ".pair" / "config.yaml").open("a") as config:
        config.write(USER_CONFIG)
    for command in commands:
        git(walk.root, *shlex.split(command)[1:])

    opened = walk.run("card", "new", "Add the widget", "--body", "AC-1: the widget exists")
    number = re.search(r"opened card #(\d+) on the local host", opened.stdout)
    assert number is not None and number.group(1) == "1", opened.stdout
    assert "next: pairbot card 1 implement" in opened.stdout

    first = walk.run("card", "1", "implement")
    assert first.stdout.startswith("advanced: propose card-1"), first.stdout
    statuses = []
    for _ in range(8):
        tick = walk.run("tick")
        statuses.append(re.findall(r"^status: (\S+)", tick.stdout, re.MULTILINE))
        if "status: awaiting-human" in tick.stdout:
            break
    else:
        raise AssertionError(f"the merge gate was never reached: {statuses}")
    assert "gate: the merge gate" in walk.seen[-1]

    approve = walk.run("card", "1", "approve")
    assert "merged" in approve.stdout, approve.stdout
    done = walk.run("tick")
    assert done.stdout.startswith("nothing-ready"), done.stdout
    card = walk.forge("cards", 1)
    assert [label for label in card["labels"] if label.startswith("pr-state:")] == [
        "pr-state:merged"
    ]
    pulls = sorted((walk.root / ".pair" / "forge" / "pulls").glob("*.json"))
    assert [json.loads(p.read_text())["state"] for p in pulls] == ["merged"]
    merged = git(walk.root / ".pair" / "forge" / "repo.git", "show", "main:card-1.txt")
    assert merged.startswith("implemented")
    # pairbot's own state stays out of the newcomer's commits.
    assert git(walk.root, "status", "--porcelain") == ""

    # A typo'd host: one line naming the value and the adapters that exist, exit 2.
    config = walk.root / ".pair" / "config.yaml"
    good = config.read_text()
    config.write_text(good + "hosts: {pm: gihub, code: github}\n")
    for args in (("validate",), ("card", "1", "status"), ("tick",)):
        line = walk.refusal(walk.run(*args, code=2))
        assert "hosts.pm" in line and "'gihub'" in line, line
        assert "github, azure-devops, local" in line, line
    config.write_text(good)

    # A card that does not exist: one line, exit 2, nothing left behind.
    missing = walk.run("card", "99", "implement", code=2)
    assert walk.refusal(missing).startswith("pairbot: card #99 does not exist on the local host")
    assert not (walk.root / ".pair" / "batches" / "card-99").exists()

    # A second process while a step holds the card's lock: one line, exit 3.
    second = walk.run("card", "new", "Second widget", "--json")
    card2 = str(json.loads(second.stdout)["card"])  # cards and pulls share numbers: not 2
    # The agent holds its step until the test releases it: the lock is held exactly as long
    # as the refusals need, never a fixed sleep.
    walk.script("held")
    release = walk.scratch / "release"
    log = walk.scratch / "agent-log.jsonl"
    calls = len(log.read_text().splitlines())
    holder = subprocess.Popen(
        [str(PAIRBOT), "card", card2, "implement"],
        cwd=walk.root,
        env=agent_env(walk.env(PAIR_TEST_RELEASE=str(release))),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: len(log.read_text().splitlines()) > calls, holder)
        for args in (("card", card2, "implement"), ("tick", f"card-{card2}")):
            line = walk.refusal(walk.run(*args, code=3))
            assert "batch lock held by pid" in line and "try again when it finishes" in line
        release.touch()
        out, err = holder.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()
    walk.seen.append(out + err)
    assert holder.returncode == 0, err
    assert out.startswith(f"advanced: propose card-{card2}"), out

    assert not [text for text in walk.seen if "Traceback" in text]


def wait_for(
    ready: Callable[[], bool], process: subprocess.Popen[str], bound_s: float = 120.0
) -> None:
    """Until `ready()` holds, while `process` lives; bounded by `bound_s`."""
    deadline = time.monotonic() + bound_s
    while not ready():
        assert process.poll() is None, "the first process ended before its agent started"
        assert time.monotonic() < deadline, "the first process's agent never started"
        time.sleep(0.05)
