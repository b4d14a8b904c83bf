"""What an entry point imports before it needs it: the heavy modules stay out of `sys.modules`.

Each case runs in a fresh interpreter (a subprocess), so what an earlier test imported does not
count. A module stays off the path until it is used either by structure (the CLI: a module per
verb with its imports at the top, loaded through the entry's one table, `app.cli.entry.VERBS`)
or by a lazy import inside the function that needs it; these tests hold that line for the
Action's start, an event the Action ignores, and the CLI's import and `batch status`.
benchmarks/action_startup.py measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.engine_scale import BATCH, Shape, build_project
from tests.support.fake_github import FakeGitHub
from tests.support.github_server import serve_fake_github
from tests.support.imports import under

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


def test_importing_the_action_loads_no_host_engine_or_runtime() -> None:
    modules = loaded_after("import action.__main__")
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB, *CLI_EXTRAS) == []
    # The engine's manifest (yaml, its models), the card cycle and the state branch load when
    # a run takes the lock, not before the event is known to need them.
    assert under(modules, "yaml", "app.cycle", "app.runtime.launcher") == []
    assert under(modules, "app.engine") == ["app.engine", "app.engine.names"]  # the name rule
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
    assert "app.engine.status" in modules  # it did run the status
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB, *CLI_EXTRAS) == []
    assert under(modules, "app.runtime", "app.web", "hosts.github", "app.cycle.humans") == []
    # Reading a plain batch's status needs neither the step machinery, nor the card cycle's
    # status, nor an event loop.
    assert under(modules, "app.engine.runner", "app.engine.step", "app.engine.instructions") == []
    assert under(modules, "app.cycle.card_status", "app.cycle.state", "asyncio", "app.proc") == []


def test_an_idle_scheduled_tick_loads_no_card_cycle_or_manifest(tmp_path: Path) -> None:
    # The tick's one catch-up listing (action.run.catchup) is answered by the fake GitHub.
    fake = FakeGitHub()
    with serve_fake_github(fake, bare_repo=None) as api:
        _idle_tick(tmp_path, fake, api)


def _idle_tick(tmp_path: Path, fake: FakeGitHub, api: str) -> None:
    # A real run on a real state branch: a bare origin, a checkout of it, a schedule event.
    origin, workspace = tmp_path / "origin.git", tmp_path / "ws"
    git_env = {"HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"]}

    def git(*args: str, cwd: Path = tmp_path) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=git_env, check=True, capture_output=True)

    git("init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    git("clone", "--quiet", str(origin), str(workspace))
    (workspace / "README.md").write_text("project\n")
    git("add", "README.md", cwd=workspace)
    git("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "i", cwd=workspace)
    git("push", "--quiet", "origin", "HEAD:refs/heads/main", cwd=workspace)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"schedule": "*/5 * * * *"}))
    env = {
        **git_env,
        "GITHUB_EVENT_NAME": "schedule",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}",
        "GITHUB_API_URL": api,
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_RUN_ID": "7",
        "INPUT_GITHUB_TOKEN": fake.pat,
    }
    code = (
        "import io, os\n"
        f"os.environ.update({git_env!r})\n"
        "from action.__main__ import main\n"
        f"out = io.StringIO(); code = main({env!r}, out)\n"
        "assert code == 0 and 'pairbot: nothing-ready' in out.getvalue(), out.getvalue()\n"
    )
    modules = loaded_after(code)
    assert "action.statebranch" in modules  # it read the state branch (without the lock)
    # Deliberately changed with the catch-up: an idle tick now lists the repository's recent
    # comments (one request), so it builds that listing's GitHub client (githubkit, httpx —
    # and, in this venv only, httpx's click; action.yml uninstalls it). Nothing else loads.
    assert [p for p, _, _ in fake.gets] == [f"/repos/{fake.owner}/{fake.repo}/issues/comments"]
    assert "hosts.github.recent" in modules
    assert under(modules, *RUNTIME, *WEB, "azure", "msrest", "requests", "yaml") == []
    # No card cycle is built and no manifest is read: the card cycle, the engine's step
    # machinery and the manifest's models stay unloaded.
    assert under(modules, "app.cycle.card_cycle", "app.cycle.driver", "app.engine.step") == []
    assert under(modules, "app.engine.manifest", "app.engine.runner", "app.runtime.launcher") == []
    assert under(modules, "hosts.azure_devops") == []
