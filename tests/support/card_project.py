"""A card project for end-to-end cycle tests: a real git repo, a local forge, a scripted agent.

Shared by the cycle, web (ticker) and end-to-end tests: `project_config` is the configuration
every card test starts from, whatever its host; `CardDriver` drives a card through the command
grammar on any host (tests/cycle/azure_harness.py drives it on Azure DevOps).

`CardProject` is a project whose `.pair/config.yaml` binds the `local` host (a forge kept in a
directory beside it), runs the scripted agent through the real process runtime, and tests with
`tests/support/checks.py` writing real JUnit XML. Commands go through the same grammar as a
`/pair` comment (`command("implement until: merged")`), and every step through the real
`handle_request` / `advance_card` — nothing in the engine is replaced.

Invariants a test can assert after every step: `comments_with(marker)` (one each), `labels()`
(exactly one `pr-state:*` on the card and its PR), `review_statuses()` (on the reviewed head).
"""

from __future__ import annotations

import abc
import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.cycle.driver import CardStep, CycleEnv, advance_card, handle_request
from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.engine.step import EngineDeps
from app.hosting import BoundHosts
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from hosts.local import LocalForge
from hosts.models import Author, Target
from tests.support.git import git, init_repo
from tests.support.project import AGENT_COMMAND, agent_dir, agent_env

CHECKS = Path(__file__).resolve().parent / "checks.py"
# `-S`, as AGENT_COMMAND: a standard-library script of the suite, kept out of coverage's start-up.
CHECKS_COMMAND = f"{sys.executable} -S {CHECKS} .pair/junit.xml"
MAINTAINER = Author(login="octocat", id="583231")


def project_config(
    host: str, cycle: dict[str, Any] | None = None, agent_timeout_ms: int = 60_000
) -> dict[str, Any]:
    """`.pair/config.yaml` for a cycle test: one host for cards and PRs, the maintainer, tests
    run by tests/support/checks.py, the scripted agent through the `command` adapter."""
    return {
        "hosts": {"pm": host, "code": host},
        "maintainer": MAINTAINER.login,
        "cycle": {"prepare": "never", **(cycle or {})},
        "tests": {
            "command": CHECKS_COMMAND,
            "junit": ".pair/junit.xml",
        },
        "batch": {
            "agent": "command",
            "agentCommand": list(AGENT_COMMAND),
            "agentTimeoutMs": agent_timeout_ms,
        },
    }


def card_journal(root: Path, card: int) -> list[dict[str, Any]]:
    """The records of card `card`'s journal in the checkout at `root` (none yet: [])."""
    path = root / ".pair" / "batches" / f"card-{card}" / "run" / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def cycle_events(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    """The data of a journal's `cycle` entries of one event, in order."""
    return [
        r["data"]
        for r in records
        if r.get("kind") == "cycle" and r.get("data", {}).get("event") == event
    ]


def scope_decision_comment(baseline: str, item: dict[str, Any]) -> str:
    """A maintainer's scope-decision comment: one decision on the packet of `baseline`."""
    body = {"schemaVersion": 1, "scopeBaselineHash": baseline, "decisions": [item]}
    return f"My decision:\n```json\n{json.dumps(body)}\n```\n"


class CardDriver(abc.ABC):
    """A card's commands and steps, whatever hosts `env()` binds (local, Azure DevOps)."""

    card: int

    @abc.abstractmethod
    def env(self) -> CycleEnv: ...

    def command(self, text: str) -> CardStep:
        parsed = parse_commands(f"/pair {text}")
        assert parsed and isinstance(parsed[0], Command), parsed
        request = PairRequest.from_command(self.card, parsed[0], comment=None)
        return asyncio.run(handle_request(self.env(), request))

    def step(self) -> CardStep:
        return asyncio.run(advance_card(self.env(), self.card))


@dataclass
class CardProject(CardDriver):
    """A project, its local forge and the scripted agent's scratch directory."""

    root: Path
    forge: LocalForge
    scratch: Path
    card: int
    env_extra: dict[str, str] = field(default_factory=dict)  # more of the agent's environment

    # ------------------------------------------------------------ set-up

    @classmethod
    def create(
        cls,
        tmp: Path,
        *,
        cycle: dict[str, Any] | None = None,
        body: str = "AC-1: it works\n",
        labels: tuple[str, ...] = (),
        files: dict[str, str] | None = None,
        tests: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> CardProject:
        """`files` are committed on `main` beside the README; `tests` overrides `tests:` keys;
        `config` adds top-level keys to `.pair/config.yaml` (its `batch` keys are merged)."""
        root = tmp / "repo"
        (root / ".pair").mkdir(parents=True)
        extra = dict(config or {})
        config = project_config("local", cycle)
        config["tests"].update(tests or {})
        config["batch"].update(extra.pop("batch", {}))
        config.update(extra)
        (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(config))
        init_repo(root, {"README.md": "# project\n", **(files or {})})
        forge = LocalForge(tmp / "forge")
        git(root, "push", "-q", str(forge.repo), "main")
        card = forge.seed_card("Add the widget", body, labels=labels, author=MAINTAINER)
        return cls(root=root, forge=forge, scratch=agent_dir(tmp / "agent"), card=card)

    def script(self, steps: dict[str, list[str]], default: str = "ok") -> None:
        (self.scratch / "script.json").write_text(json.dumps({"default": default, "steps": steps}))

    # ------------------------------------------------------------ driving

    def env(self) -> CycleEnv:
        host = self.forge.host()
        deps = EngineDeps(
            launcher=Launcher(lambda _settings: ProcessRuntime(kill_grace_s=0.2)),
            env=agent_env({"PAIR_TEST_AGENT_DIR": str(self.scratch), **self.env_extra}),
        )
        return CycleEnv(
            root=self.root,
            hosts=BoundHosts(pm=host, code=host),
            deps=deps,
            remote=str(self.forge.repo),
        )

    def until_quiet(self, limit: int = 20) -> list[CardStep]:
        """Advance until a step runs nothing (a park, or the end); every step is checked."""
        steps: list[CardStep] = []
        for _ in range(limit):
            step = self.step()
            steps.append(step)
            self.assert_invariants()
            if step.result.state in ("nothing-ready", "blocked", "awaiting-approval"):
                return steps
        raise AssertionError(f"no quiet state after {limit} steps: {[s.status for s in steps]}")

    # ------------------------------------------------------------ observing

    @property
    def host(self) -> Any:
        return self.forge.host()

    def pull(self) -> int | None:
        pulls = sorted((self.forge.root / "pulls").glob("*.json"))
        return int(pulls[0].stem) if pulls else None

    def comments(self, number: int) -> list[dict[str, Any]]:
        path = self.forge.root / "comments" / f"{number}.json"
        return json.loads(path.read_text()) if path.exists() else []

    def labels(self, number: int) -> list[str]:
        kind = "pulls" if number == self.pull() else "cards"
        data = json.loads((self.forge.root / kind / f"{number}.json").read_text())
        return [label for label in data["labels"] if label.startswith("pr-state:")]

    def statuses(self, pull: int) -> dict[str, Any]:
        path = self.forge.root / "statuses" / f"{pull}.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def journal(self) -> list[dict[str, Any]]:
        return card_journal(self.root, self.card)

    def cycle_events(self, event: str) -> list[dict[str, Any]]:
        return cycle_events(self.journal(), event)

    def marker_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        targets = [self.card] + ([self.pull()] if self.pull() else [])
        for number in targets:
            for comment in self.comments(int(number)):  # type: ignore[arg-type]
                first = comment["body"].splitlines()[0] if comment["body"] else ""
                if first.startswith("<!-- pair:"):
                    counts[first] = counts.get(first, 0) + 1
        return counts

    def assert_invariants(self) -> None:
        """Every comment once; exactly one pr-state label on card and PR once labelled."""
        duplicated = {m: n for m, n in self.marker_counts().items() if n > 1}
        assert not duplicated, duplicated
        card_labels = self.labels(self.card)
        assert len(card_labels) <= 1, card_labels
        pull = self.pull()
        if pull is not None and card_labels:
            assert self.labels(pull) == card_labels, (self.labels(pull), card_labels)

    def comment_as_maintainer(self, target: Target, body: str) -> str:
        return self.forge.comment_as(MAINTAINER, target, body)
