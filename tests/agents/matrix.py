"""One real agent step, isolated as the product ships, for the matrix of agents, postures and steps.

    outcome = run_step(base, "claude", "curated-allowlist", "card", model)

`run_step` builds the project a step of that kind runs in, points the real CLI (from
tests/agents/node_modules) at a scripted model server, and runs exactly one step through the
production path: `project_launcher` (the local locus through swerex by default; isolation left
at its default, so as root the agent runs as `pairbot-agent`, lent its tree and journal; on the
remote locus the server is the boundary and the agent runs as the server's user).

    batch   a plain batch's first step (`pairbot batch apply`): the agent works in the checkout
    card    a card's first step, taken by `/pair implement` itself: the agent works in the
            card's worktree `.pair/worktrees/card-1`, its journal in the checkout

Either way the step is a propose: the model writes `.pair/changes/<change>/plan.md` with its
edit tool and reports with its shell tool (tests/agents/script.py). `model(step)` is a context
manager serving the vendor's scripted API for `step` and yielding the environment that points
the CLI at it (base URL, key, config).

    outcome = run_verify(base, "claude", model)

`run_verify` is a plain batch's third step, the verify, by the real CLI: the project's stage map
gives propose and apply to the scripted `command` agent (tests/support/scripted_agent.py, a
second each), so the real CLI is spawned once. The step's `target` is the findings file
`review.json` in the checkout, its content a findings report. The deps are the production
ones (`app.cli.deps.engine_deps`: the work line and its vet), so the outcome can say what the
work line recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml

from app.cli.deps import engine_deps
from app.cycle.driver import CycleEnv, handle_request
from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.engine.runner import apply_batch, batch_status
from app.engine.step import EngineDeps
from app.engine.work_line import work_branch
from app.hosting import BoundHosts
from app.runtime.launcher import project_launcher
from app.settings import DEFAULT_POSTURE, Posture
from hosts.local import LocalForge
from tests.agents.real_cli import NODE_BIN
from tests.support.card_project import MAINTAINER, card_journal, project_config
from tests.support.git import git, init_repo
from tests.support.project import AGENT, ONE_PHASE, agent_dir, agent_env

POSTURES: tuple[Posture, ...] = ("repo-sandboxed-permissive", "curated-allowlist", "full-autonomy")
Kind = Literal["batch", "card"]
KINDS: tuple[Kind, ...] = ("batch", "card")
STEP_TIMEOUT_S = 240.0  # one real CLI step, two tool calls, on a loaded 2-core machine

PLAN = """# Plan

## Acceptance criteria
AC-1: the widget says hello

## Tasks
- [ ] test: the widget says hello
- [ ] make the widget say hello
"""


@dataclass(frozen=True)
class Step:
    """The step a scripted model is asked to do: write `target` (absolute) with `content`."""

    kind: Kind
    workdir: Path  # where the agent works: the checkout, or the card's worktree
    target: Path
    content: str = PLAN


@dataclass
class Outcome:
    """What one step left: its state, pairbot's lines, the file, the journal."""

    state: str
    lines: list[str]
    written: str | None
    journal: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reports(self) -> list[dict[str, Any]]:
        """The agent's own `batch report` entries."""
        return [e for e in self.journal if e.get("kind") == "completion"]

    @property
    def usage(self) -> dict[str, Any] | None:
        """The usage journaled for the agent's run (the last entry that has one)."""
        with_usage = [e["usage"] for e in self.journal if e.get("usage")]
        return with_usage[-1] if with_usage else None

    def explain(self) -> str:
        """For a failed assertion: the step's state, its last lines and journal."""
        tail = "\n".join(self.lines[-40:])
        return f"state {self.state}\n--- lines\n{tail}\n--- journal\n{self.journal}"


ModelServer = Callable[[Step], AbstractContextManager[Mapping[str, str]]]

# The verifier's findings file, relative to its tree, and what it reports (docs/cli.md "The
# verifier's findings file"): AC-1 proved, nothing found, so the review converges.
REVIEW = "review.json"
FINDINGS: Mapping[str, Any] = MappingProxyType(
    {"acTests": {"AC-1": "tests/test_widget.py::test_hello"}, "findings": []}
)
VERDICT = "Ready for archive"


@dataclass
class VerifyOutcome(Outcome):
    """A verify step's outcome, and what the batch holds after it."""

    transition: str = ""  # the step's, as the engine derived it
    status: str = ""  # the change's status, as `batch status` derives it
    done: bool = False  # whether the batch is done
    # Every path a commit of the batch's work line touched (the project's first commit aside).
    work_files: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)  # the steps before the verify, and states

    def explain(self) -> str:
        """For a failed assertion: the steps before, then the verify's state, lines, journal."""
        before = f"before: {self.earlier}; work line: {self.work_files}"
        return f"{before}\n{self.transition} {super().explain()}"


def _config(agent: str, posture: Posture, locus: Mapping[str, Any]) -> dict[str, Any]:
    base = {"agent": agent, "agentTimeoutMs": 200_000, "permissions": {"posture": posture}}
    return {**base, **locus}


def _env(model_env: Mapping[str, str]) -> dict[str, str]:
    path = f"{NODE_BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"
    return agent_env({"PATH": path, **model_env})


def _batch_project(base: Path, agent: str, posture: Posture, locus: Mapping[str, Any]) -> Path:
    root = base / "repo"
    (root / ".pair" / "batches" / "demo").mkdir(parents=True)
    config = {"batch": _config(agent, posture, locus)}
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(config))
    (root / ".pair" / "batches" / "demo" / "batch.yaml").write_text(yaml.safe_dump(ONE_PHASE))
    init_repo(root)
    return root


def _card_project(
    base: Path, agent: str, posture: Posture, locus: Mapping[str, Any]
) -> tuple[Path, LocalForge, int]:
    root = base / "repo"
    (root / ".pair").mkdir(parents=True)
    config = project_config("local")
    config["batch"] = _config(agent, posture, locus)
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(config))
    init_repo(root, {"README.md": "# project\n"})
    forge = LocalForge(base / "forge")
    git(root, "push", "-q", str(forge.repo), "main")
    card = forge.seed_card("Add the widget", "AC-1: it says hello\n", author=MAINTAINER)
    return root, forge, card


def run_step(
    base: Path,
    agent: str,
    posture: Posture,
    kind: Kind,
    model: ModelServer,
    *,
    locus: Mapping[str, Any] = MappingProxyType({}),
) -> Outcome:
    """One step of `kind` by the real `agent` under `posture`, against `model`; `locus` are
    the `batch:` keys of another locus (`{"locus": "remote", "remote": {…}}`), else local."""
    lines: list[str] = []
    if kind == "batch":
        root = _batch_project(base, agent, posture, locus)
        step = Step(kind, root, root / ".pair" / "changes" / "alpha" / "plan.md")
        with model(step) as model_env:
            deps = EngineDeps(project_launcher(root), env=_env(model_env), on_line=lines.append)
            result = asyncio.run(asyncio.wait_for(apply_batch(root, "demo", deps), STEP_TIMEOUT_S))
        journal = _journal(root / ".pair" / "batches" / "demo" / "run" / "journal.jsonl")
        return Outcome(result.state, lines, _text(step.target), journal)
    root, forge, card = _card_project(base, agent, posture, locus)
    worktree = root / ".pair" / "worktrees" / f"card-{card}"
    step = Step(kind, worktree, worktree / ".pair" / "changes" / f"card-{card}" / "plan.md")
    with model(step) as model_env:
        deps = EngineDeps(project_launcher(root), env=_env(model_env), on_line=lines.append)
        host = forge.host()
        hosts = BoundHosts(pm=host, code=host)
        env = CycleEnv(root=root, hosts=hosts, deps=deps, remote=str(forge.repo))
        [implement] = parse_commands("/pair implement")
        assert isinstance(implement, Command), implement
        # The command takes the card's first step itself, as a comment's delivery does.
        request = PairRequest.from_command(card, implement, comment=None)
        done = asyncio.run(asyncio.wait_for(handle_request(env, request), STEP_TIMEOUT_S))
    return Outcome(done.result.state, lines, _text(step.target), card_journal(root, card))


def _text(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


def _journal(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def run_verify(
    base: Path, agent: str, model: ModelServer, *, posture: Posture = DEFAULT_POSTURE
) -> VerifyOutcome:
    """A plain batch's verify by the real `agent` under `posture`, against `model`, after the
    scripted agent's propose and apply."""
    root = base / "repo"
    (root / ".pair" / "batches" / "demo").mkdir(parents=True)
    settings = _config(agent, posture, {})
    settings["agent"] = {"propose": "command", "apply": "command", "verify": agent}
    settings["agentCommand"] = [sys.executable, str(AGENT)]
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump({"batch": settings}))
    (root / ".pair" / "batches" / "demo" / "batch.yaml").write_text(yaml.safe_dump(ONE_PHASE))
    start = init_repo(root)
    # The scripted agent's counters and call log, outside the tree the work line records.
    scratch = {"PAIR_TEST_AGENT_DIR": str(agent_dir(base / "scripted-agent"))}
    lines: list[str] = []
    step = Step("batch", root, root / REVIEW, json.dumps(dict(FINDINGS)))
    with model(step) as model_env:
        env = _env({**scratch, **model_env})
        deps = dataclasses.replace(engine_deps(env, root), on_line=lines.append)
        earlier = []
        for _ in range(2):  # propose, apply: the scripted agent's
            done = asyncio.run(asyncio.wait_for(apply_batch(root, "demo", deps), STEP_TIMEOUT_S))
            earlier.append(f"{done.transition} {done.state}")
        result = asyncio.run(asyncio.wait_for(apply_batch(root, "demo", deps), STEP_TIMEOUT_S))
    journal = _journal(root / ".pair" / "batches" / "demo" / "run" / "journal.jsonl")
    status = batch_status(root, "demo")
    touched = git(root, "log", "--name-only", "--format=", f"{start}..{work_branch('demo')}")
    return VerifyOutcome(
        result.state,
        lines,
        _text(step.target),
        journal,
        transition=result.transition,
        status=status.changes["alpha"].status,
        done=status.done,
        work_files=sorted(set(touched.split())),
        earlier=earlier,
    )
