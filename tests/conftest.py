"""Shared fixtures: real git projects in temp dirs, driven by the scripted agent.

`make_project` writes `.pair/config.yaml` (agent `command` running tests/support/scripted_agent.py
with this interpreter), one batch manifest and an optional agent script, and commits it all in
a real git repository. `apply_once` runs one real `apply_batch` in-process through the real
`ProcessRuntime`; `cli` runs the installed `pairbot` console script as a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.engine.runner import apply_batch
from app.engine.step import EngineDeps, StepResult
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime

AGENT = Path(__file__).parent / "support" / "scripted_agent.py"
PAIRBOT = Path(sys.executable).parent / "pairbot"

ONE_PHASE: dict[str, Any] = {
    "gate": "voluntary",
    "prGrouping": "off",
    "phases": [{"name": "only", "changes": ["alpha"]}],
}


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


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


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    def make(
        manifest: Mapping[str, Any] | None = None,
        *,
        batch: str = "demo",
        config: Mapping[str, Any] | None = None,
        script: Mapping[str, list[str]] | None = None,
    ) -> Project:
        root = tmp_path / "repo"
        (root / ".pair" / "batches" / batch).mkdir(parents=True)
        base_config: dict[str, Any] = {
            "batch": {
                "agent": "command",
                "agentCommand": [sys.executable, str(AGENT)],
                "agentTimeoutMs": 60_000,
            }
        }
        extra = dict(config or {})
        base_config["batch"].update(extra.pop("batch", {}))  # merged: keeps the scripted agent
        base_config.update(extra)
        (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(base_config))
        (root / ".pair" / "batches" / batch / "batch.yaml").write_text(
            yaml.safe_dump(dict(manifest or ONE_PHASE), sort_keys=False)
        )
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "init")
        project = Project(root=root, batch=batch)
        if script is not None:
            project.script(script)
        return project

    return make


def apply_once(
    project: Project, *, env: Mapping[str, str] | None = None, runtime: Any = None
) -> StepResult:
    """One real `batch apply`, in-process, through the real process runtime."""
    deps = EngineDeps(
        launcher=Launcher(lambda _settings: runtime or ProcessRuntime(kill_grace_s=0.2)),
        env=agent_env(env),
    )
    return asyncio.run(apply_batch(project.root, project.batch, deps))


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
