"""A batch project on disk, and how tests run pairbot on it: in-process or as the console script.

`Project` is a real git repository with `.pair/config.yaml` (agent `command` running
tests/support/scripted_agent.py with this interpreter) and one batch manifest; the
`make_project` fixture (tests/conftest.py) builds one. `apply_once` runs one real
`apply_batch` in-process through the real `ProcessRuntime` (`run_until_idle`: until a step does
not advance); `cli` runs the installed `pairbot`
console script as a subprocess; `agent_env` is the small environment both give pairbot and its
agent, so no secret of the test runner reaches them.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.runner import apply_batch
from app.engine.step import EngineDeps, StepResult
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime

AGENT = Path(__file__).parent / "scripted_agent.py"
# How configs start the scripted agent. `-S` (no `site`): the agent is test scaffolding, yet the
# venv's coverage .pth would start coverage in each call (about 0.15 s of CPU, thousands of
# calls a suite). The COVERAGE_* environment still reaches the `pairbot batch report` it runs,
# which is measured. The agent imports only the standard library (see its `_venv_packages`).
AGENT_COMMAND: tuple[str, ...] = (sys.executable, "-S", str(AGENT))
PAIRBOT = Path(sys.executable).parent / "pairbot"

ONE_PHASE: dict[str, Any] = {
    "gate": "voluntary",
    "prGrouping": "off",
    "phases": [{"name": "only", "changes": ["alpha"]}],
}


@dataclass
class Project:
    """A real project on disk with a batch and a scripted agent."""

    root: Path
    batch: str

    def script(self, steps: Mapping[str, list[str]], default: str = "ok") -> None:
        """Set what the scripted agent does on its next calls."""
        (self.root / ".pair" / "script.json").write_text(
            json.dumps({"default": default, "steps": dict(steps)})
        )

    @property
    def run_dir(self) -> Path:
        return self.root / ".pair" / "batches" / self.batch / "run"

    def journal(self) -> list[dict[str, Any]]:
        path = self.run_dir / "journal.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def agent_calls(self) -> list[dict[str, Any]]:
        path = self.root / ".pair" / "agent-log.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


def agent_dir(path: Path) -> Path:
    """Make `path`, the scripted agent's own directory outside the repository, writable by the
    agent user: under the product's defaults the agent runs as `pairbot-agent` as soon as the
    suite runs as root, and pairbot lends it only the worktree and its journal."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def agent_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment for pairbot and its agent (no secrets of the test runner)."""
    env = {
        "PATH": f"{PAIRBOT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        # Coverage measures the console script's subprocesses through these.
        **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")},
    }
    env.update(extra or {})
    return env


def apply_once(
    project: Project, *, env: Mapping[str, str] | None = None, runtime: Any = None
) -> StepResult:
    """One real `batch apply`, in-process, through the real process runtime."""
    deps = EngineDeps(
        launcher=Launcher(lambda _settings: runtime or ProcessRuntime(kill_grace_s=0.2)),
        env=agent_env(env),
    )
    return asyncio.run(apply_batch(project.root, project.batch, deps))


def run_until_idle(project: Project, deps: EngineDeps, limit: int = 30) -> list[StepResult]:
    """`batch apply` in-process until a step does not advance (at most `limit` steps)."""
    results = []
    for _ in range(limit):
        result = asyncio.run(apply_batch(project.root, project.batch, deps))
        results.append(result)
        if result.state != "advanced":
            break
    return results


def cli(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the installed `pairbot` console script."""
    return subprocess.run(
        [str(PAIRBOT), *args],
        cwd=cwd,
        env=agent_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
