"""A card project on Azure DevOps for end-to-end cycle tests: the loopback fake, a real clone.

`AzureCardProject` is `tests.support.card_project.CardProject`'s counterpart on the `azure-devops`
host: `.pair/config.yaml` binds pm (work items are the cards) and code (Azure Repos pull
requests) to `azure-devops`, the checkout is a real `git clone` of the fake's git smart-HTTP
URL (`origin`), and the hosts are built the way a run builds them — `CardCycle.for_checkout`
from the `PAIR_AZURE_DEVOPS_*` variables read into `HostSettings` — so the adapter, the SDK
and every request are real; only the server is `tests.support.fake_azure.FakeAzureDevOps`.

The checkout authenticates to the fake as a CI checkout does (actions/checkout,
Azure Pipelines `persistCredentials`): an `http.<origin>/.extraheader` in its git config. The
agent never sees the PAT: the engine's environment carries it, the agent's drops it.

Observations read the fake's state directly (`tags`, `pull_labels`, `statuses`,
`comment_markers`), never through the adapter, so they cost no request and `writes()` counts
only what the cycle did.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from app.cycle.card_cycle import CardCycle
from app.cycle.driver import (
    CardStep,
    CycleEnv,
    handle_head_moved,
    handle_scope_decision,
    tick,
)
from app.engine.step import EngineDeps, StepResult
from app.hosting import BoundHosts, HostSettings
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from hosts.azure_devops import AzureDevOpsHost, split_tags
from tests.support.card_project import CardDriver, card_journal, cycle_events, project_config
from tests.support.fake_azure import ORG, PROJECT, REPO, FakeAzureDevOps
from tests.support.git import git
from tests.support.project import agent_dir, agent_env

TOKEN = "azdopat" + "3" * 45  # shaped like a PAT; never a real one
QUIET = ("nothing-ready", "blocked", "awaiting-approval")


@dataclass
class AzureCardProject(CardDriver):
    """A clone of the fake's repository, the fake, a work item, the scripted agent's scratch."""

    root: Path
    fake: FakeAzureDevOps
    scratch: Path
    cache: Path
    card: int
    # Adapter options a run cannot set from the environment (an injected sleep, fewer merge
    # polls); when given, one host built with them replaces the bound pair.
    host_options: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------ set-up

    @classmethod
    def create(
        cls,
        tmp: Path,
        fake: FakeAzureDevOps,
        *,
        cycle: dict[str, Any] | None = None,
        body: str = "AC-1: it works\n",
        labels: tuple[str, ...] = (),
    ) -> AzureCardProject:
        root = tmp / "repo"
        header = _auth_header(fake.token)
        git(tmp, "-c", f"http.extraheader={header}", "clone", "-q", _remote(fake), str(root))
        # What a CI checkout persists: the credential scoped to the server, in the local config.
        git(root, "config", f"http.{fake.origin}/.extraheader", header)
        config = project_config("azure-devops", cycle)
        config["maintainer"] = fake.human.author.login  # a scope decision is the maintainer's
        (root / ".pair").mkdir()
        (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(config))
        git(root, "add", "-A")
        git(root, "commit", "-qm", "pairbot config")
        git(root, "push", "-q", "origin", "main")
        card = fake.seed_card("Add the widget", body, labels, author=fake.human)
        scratch = agent_dir(tmp / "agent")
        return cls(root=root, fake=fake, scratch=scratch, cache=tmp / "sdk-cache", card=card)

    def script(self, steps: dict[str, list[str]], default: str = "ok") -> None:
        (self.scratch / "script.json").write_text(json.dumps({"default": default, "steps": steps}))

    # ------------------------------------------------------------ driving

    def host_env(self) -> dict[str, str]:
        """The run's environment: the agent's, plus the host variables (docs/hosts.md)."""
        return agent_env(
            {
                "PAIR_TEST_AGENT_DIR": str(self.scratch),
                "PAIR_AZURE_DEVOPS_ORG_URL": self.fake.base_url,
                "PAIR_AZURE_DEVOPS_PROJECT": PROJECT,
                "PAIR_AZURE_DEVOPS_REPOSITORY": REPO,
                "PAIR_AZURE_DEVOPS_TOKEN": self.fake.token,
                "AZURE_DEVOPS_CACHE_DIR": str(self.cache),
            }
        )

    def env(self) -> CycleEnv:
        """A fresh run: hosts built from the binding and the environment, as a run does."""
        env = self.host_env()
        deps = EngineDeps(
            launcher=Launcher(lambda _settings: ProcessRuntime(kill_grace_s=0.2)), env=env
        )
        bound: CycleEnv = CardCycle.for_checkout(self.root, HostSettings.from_env(env), deps)
        if not self.host_options:
            return bound
        host = AzureDevOpsHost(
            self.fake.base_url,
            PROJECT,
            REPO,
            self.fake.token,
            cache_dir=self.cache,
            **self.host_options,
        )
        return replace(bound, hosts=BoundHosts(pm=host, code=host))

    def tick(self) -> CardStep | StepResult:
        return asyncio.run(tick(self.env()))

    def head_moved(self, pull: int, head: str) -> CardStep | StepResult:
        return asyncio.run(handle_head_moved(self.env(), pull, head))

    def scope_decision(self, pull: int, comment: str | None = None) -> CardStep | StepResult:
        return asyncio.run(handle_scope_decision(self.env(), pull, comment))

    def until_quiet(self, limit: int = 20) -> list[CardStep]:
        """Advance until a step runs nothing (a park, or the end); every step is checked."""
        steps: list[CardStep] = []
        for _ in range(limit):
            step = self.step()
            steps.append(step)
            self.assert_invariants()
            if step.result.state in QUIET:
                return steps
        raise AssertionError(f"no quiet state after {limit} steps: {[s.status for s in steps]}")

    # ------------------------------------------------------------ observing

    def pull(self) -> int | None:
        pulls = sorted(p.id for p in self.fake.pulls())
        return pulls[0] if pulls else None

    def tags(self) -> list[str]:
        """The work item's `pr-state:*` tags."""
        return [t for t in split_tags(self.fake.card(self.card).get("System.Tags")) if _state(t)]

    def pull_labels(self, pull: int) -> list[str]:
        return [str(lb["name"]) for lb in self.fake.pull(pull).labels if _state(lb["name"])]

    def statuses(self, pull: int) -> dict[str, list[dict[str, Any]]]:
        """pairbot's `pair-review` statuses by the head commit of the iteration they are on."""
        pr = self.fake.pull(pull)
        heads = {it["id"]: it["sourceRefCommit"]["commitId"] for it in pr.iterations}
        out: dict[str, list[dict[str, Any]]] = {}
        for status in pr.statuses:
            if status["context"] == {"name": "pair-review", "genre": "pair"}:
                out.setdefault(heads[status["iterationId"]], []).append(status)
        return out

    def pull_comments(self, pull: int) -> list[dict[str, Any]]:
        """Every text comment in every thread of the PR (system comments left out)."""
        return [
            comment
            for thread in self.fake.threads(pull)
            for comment in thread["comments"]
            if comment["commentType"] == "text"
        ]

    def card_comments(self) -> list[dict[str, Any]]:
        return [c for c in self.fake.wi_comments(self.card) if not c["isDeleted"]]

    def comment_markers(self) -> dict[str, int]:
        """How many comments open with each `<!-- pair:… -->` marker, on the card and its PR."""
        bodies = [str(c["text"]) for c in self.card_comments()]
        pull = self.pull()
        if pull is not None:
            bodies += [str(c["content"]) for c in self.pull_comments(pull)]
        counts: dict[str, int] = {}
        for body in bodies:
            first = body.splitlines()[0] if body else ""
            if first.startswith("<!-- pair:"):
                counts[first] = counts.get(first, 0) + 1
        return counts

    def thread_of(self, pull: int, marker: str) -> dict[str, Any]:
        """The PR thread whose first comment carries `marker` (a `pair:<kind>` prefix)."""
        return next(
            t
            for t in self.fake.threads(pull)
            if str(t["comments"][0]["content"]).startswith(f"<!-- {marker}")
        )

    def journal(self) -> list[dict[str, Any]]:
        return card_journal(self.root, self.card)

    def cycle_events(self, event: str) -> list[dict[str, Any]]:
        return cycle_events(self.journal(), event)

    def agent_calls(self) -> list[dict[str, Any]]:
        log = self.scratch / "agent-log.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def files_at(self, sha: str) -> list[str]:
        """The paths in the fake's repository at `sha` (what was really pushed)."""
        return git(self.fake.repo, "ls-tree", "-r", "--name-only", sha).splitlines()

    def assert_invariants(self) -> None:
        """Every pairbot comment once; one `pr-state:*` on the work item, the same on its PR."""
        duplicated = {m: n for m, n in self.comment_markers().items() if n > 1}
        assert not duplicated, duplicated
        tags = self.tags()
        assert len(tags) <= 1, tags
        pull = self.pull()
        if pull is not None and tags:
            assert self.pull_labels(pull) == tags, (self.pull_labels(pull), tags)
        assert self.fake.unexpected == [], self.fake.unexpected


def _state(name: object) -> bool:
    return str(name).startswith("pr-state:")


def _remote(fake: FakeAzureDevOps) -> str:
    """The repository's git URL, as the fake's repository answer gives it (`remoteUrl`)."""
    return f"{fake.origin}/{ORG}/{PROJECT}/_git/{REPO}"


def _auth_header(token: str) -> str:
    return "Authorization: Basic " + base64.b64encode(f":{token}".encode()).decode("ascii")
