"""What an entry point imports before it needs it: the heavy modules stay out of `sys.modules`.

Each case runs in a fresh interpreter (a subprocess), so what an earlier test imported does not
count. A lazy import (`# noqa: PLC0415` inside the function that needs it) keeps a module off
the path until it is used; these tests hold that line for the Action's start, an event the
Action ignores, and the CLI's `batch status`. benchmarks/action_startup.py measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.engine_scale import BATCH, Shape, build_project

ROOT = Path(__file__).resolve().parents[2]

# Third-party packages no entry point needs at import time: the hosts' SDKs and transports,
# the runtime's, the App's web stack, and httpx's command-line extras.
HOST_SDKS = ("githubkit", "httpx", "httpcore", "jwt", "hishel", "azure", "msrest", "requests")
RUNTIME = ("swerex", "aiohttp")
WEB = ("starlette", "uvicorn")
CLI_EXTRAS = ("click", "rich", "pygments")


def loaded_after(code: str, *, cwd: Path = ROOT) -> set[str]:
    """Every module in `sys.modules` after running `code` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def under(modules: set[str], *prefixes: str) -> list[str]:
    """The modules that are one of `prefixes` or inside one of them."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_importing_the_action_loads_no_host_engine_or_runtime() -> None:
    modules = loaded_after("import action.__main__")
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB, *CLI_EXTRAS) == []
    # The engine's manifest (yaml, its models), the card cycle and the state branch load when
    # a run takes the lock, not before the event is known to need them.
    # (app.runtime.adapters, the agents' table that validates the `agent` input, does load.)
    assert under(modules, "yaml", "app.engine", "app.cycle", "app.runtime.launcher") == []
    assert under(modules, "app.runtime.rex", "hosts.github", "hosts.azure_devops") == []
    assert under(modules, "action.statebranch", "action.comments", "action.acks") == []


def test_an_event_the_action_ignores_loads_no_host_or_engine(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "labeled"}))
    env = {
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo/hello",
        "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    code = (
        "import io\n"
        "from action.__main__ import main\n"
        f"out = io.StringIO(); code = main({env!r}, out)\n"
        "assert code == 0 and 'pairbot: ignored' in out.getvalue(), (code, out.getvalue())\n"
    )
    modules = loaded_after(code)
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB, *CLI_EXTRAS) == []
    # The run-state lock's module (and the batch-name pattern it takes from the engine's
    # manifest) loads with the inputs; the card cycle and the hosts never do.
    assert under(modules, "app.cycle", "app.runtime.launcher", "hosts.github") == []


def test_importing_the_cli_loads_only_its_own_module() -> None:
    modules = loaded_after("import app.cli")
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB, *CLI_EXTRAS, "pydantic", "yaml") == []
    assert under(modules, "app.engine", "app.cycle", "app.runtime", "app.web", "hosts") == []


def test_batch_status_loads_no_host_runtime_or_journal_writer(tmp_path: Path) -> None:
    build_project(tmp_path, Shape(10, 1_000))
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from app.cli import run\n"
        f"assert run(['batch', 'status', {BATCH!r}], os.environ) == 0\n"
    )
    modules = loaded_after(code, cwd=tmp_path)
    assert "app.engine.runner" in modules  # it did run the status
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB, *CLI_EXTRAS) == []
    assert under(modules, "app.runtime", "app.web", "hosts.github", "app.cycle.humans") == []
