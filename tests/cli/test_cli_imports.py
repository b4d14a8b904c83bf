"""What the `pairbot` console script loads for a verb: the heavy modules it does not need stay
out of `sys.modules`.

Each case runs the console script's entry point (`app.cli.main`, exit code and all) in a fresh
interpreter, which writes its `sys.modules` to a file at exit; so what an earlier test imported
does not count. `benchmarks/engine_scale.py` measures what this buys in time. (And the one
thing `batch status` changes in its process, the cyclic collector, is handed back in-process.)
"""

from __future__ import annotations

import gc
import importlib
import json
import os
from pathlib import Path

import pytest

from app.cli import run
from app.cli.entry import VERBS, command_of, parser
from app.errors import UnknownBatchError
from benchmarks.engine_scale import BATCH, Shape, build_project
from tests.support.fake_github import FakeGitHub
from tests.support.git import init_repo
from tests.support.github_server import github_env, serve_fake_github
from tests.support.imports import pairbot_modules as pairbot
from tests.support.imports import under

ROOT = Path(__file__).resolve().parents[2]

HOST_SDKS = ("githubkit", "httpx", "httpcore", "jwt", "hishel", "azure", "msrest", "requests")
RUNTIME = ("swerex", "aiohttp")
WEB = ("starlette", "uvicorn", "app.web")
# The manifest's models and what they pull in (the settings' models, the domain's verdicts).
MODELS = (
    "pydantic",
    "pydantic_core",
    "app.engine.manifest",
    "app.settings",
    "app.domain.review.verdict",
)
# What checking a budget needs (the spend's reduction), and reading the manifest does not.
SPEND = ("app.domain.card.budget", "app.domain.reports.metrics", "app.domain.review.regression")


def test_batch_status_loads_no_hosts_runtime_or_web(tmp_path: Path) -> None:
    project = tmp_path / "project"
    build_project(project, Shape(100, 1_000))
    code, out, modules = pairbot(["batch", "status", BATCH], project, tmp_path)
    assert code == 0, out
    assert out.startswith(f"batch {BATCH}: in progress\nnext: apply ")
    assert "app.engine.status" in modules  # it did read the status
    # The models load: the files have one model each (issue #26), benchmarks/engine_scale.py
    # holds what that costs. What only checking a budget needs does not.
    assert "app.engine.manifest" in modules
    assert under(modules, *SPEND, *HOST_SDKS, *RUNTIME, *WEB) == []
    # Nor the step machinery, the card cycle, the step lock or an event loop.
    assert under(modules, "app.engine.runner", "app.engine.step", "app.engine.lock") == []
    # (Not `traceback`: coverage's subprocess hook loads it when the suite runs with --cov.)
    assert under(modules, "app.cycle", "app.runtime", "asyncio") == []
    # Of hosts/ only its error tree (no imports of its own): the config's host-name check.
    assert under(modules, "hosts") == ["hosts", "hosts.errors"]


def test_help_loads_no_verb_module(tmp_path: Path) -> None:
    code, out, modules = pairbot(["--help"], tmp_path, tmp_path)
    assert code == 0, out
    assert "batch" in out
    assert under(modules, "app.cli") == ["app.cli", "app.cli.entry"]
    assert under(modules, *MODELS, *HOST_SDKS, *RUNTIME, *WEB, "yaml") == []


def test_an_agent_report_loads_no_step_machinery_runtime_or_host(tmp_path: Path) -> None:
    # `pairbot batch report` runs in every agent step: it writes one journal line, no more.
    project = tmp_path / "project"
    build_project(project, Shape(10, 100))
    argv = ["batch", "report", BATCH, "--change", "c0000", "--progress", "working on it"]
    code, out, modules = pairbot(argv, project, tmp_path)
    assert code == 0, out
    assert out.startswith("recorded progress for c0000 (journal entry ")
    assert "app.cycle.humans" in modules  # it did write the journal
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB) == []
    assert under(modules, "app.engine.runner", "app.engine.step", "app.runtime") == []
    assert under(modules, "app.cycle.card_cycle", "hosts.github", "hosts.azure_devops") == []


# One command line per command the parser knows: `VERBS` names a module for exactly these.
COMMANDS = [
    ["init"],
    ["validate"],
    ["doctor"],
    ["serve"],
    ["demo"],
    *([verb, "c1"] for verb in ("propose", "apply", "verify")),
    ["card", "1", "implement"],
    ["card", "new", "a title"],
    ["tick"],
    ["report", "cohort"],
    ["report", "replay", "b"],
    ["clean"],
    ["batch", "status", "b"],
    ["batch", "status", "card-1"],
    ["batch", "apply", "b"],
    ["batch", "report", "--progress", "x"],
    *(["batch", verb, "b", "--change", "c1"] for verb in ("approve", "answer", "feedback")),
    ["batch", "retry", "b", "--change", "c1"],
    ["batch", "rerun-proof", "b", "--phase", "p"],
]


def test_every_command_runs_in_a_verb_module_of_the_cli() -> None:
    assert {command_of(parser().parse_args(argv)) for argv in COMMANDS} == set(VERBS)
    for module in set(VERBS.values()):
        assert module.startswith("app.cli."), module
        assert callable(importlib.import_module(module).run), module


def test_batch_status_reads_a_manifest_with_a_budget(tmp_path: Path) -> None:
    # A budget is read by the models, but checked only when a step runs.
    project = tmp_path / "project"
    build_project(project, Shape(10, 1_000))
    manifest = project / ".pair" / "batches" / BATCH / "batch.yaml"
    manifest.write_text(manifest.read_text() + "budget: {steps: 40}\n")
    code, out, modules = pairbot(["batch", "status", BATCH, "--json"], project, tmp_path)
    assert code == 0, out
    assert json.loads(out)["batch"] == BATCH
    assert "app.engine.manifest" in modules
    assert under(modules, *SPEND, *HOST_SDKS, *RUNTIME, *WEB) == []


def test_batch_status_refuses_a_wrong_manifest_with_the_models_line(tmp_path: Path) -> None:
    project = tmp_path / "project"
    build_project(project, Shape(10, 1_000))
    manifest = project / ".pair" / "batches" / BATCH / "batch.yaml"
    manifest.write_text("gate: sometimes\n" + manifest.read_text().replace("gate: voluntary\n", ""))
    code, out, _ = pairbot(["batch", "status", BATCH], project, tmp_path)
    assert code == 2
    assert out.startswith(f"pairbot: {manifest}: gate: Input should be 'voluntary', ")
    assert out.endswith(" (got 'sometimes')\n")


def test_a_tick_on_the_local_host_loads_no_host_sdk_or_web(tmp_path: Path) -> None:
    project = tmp_path / "project"
    init_repo(project, {".pair/config.yaml": "hosts: {pm: local, code: local}\n"})
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    code, out, modules = pairbot(["tick"], project, tmp_path, env)
    assert code == 0, out
    assert "nothing-ready" in out
    assert "app.cycle.card_cycle" in modules  # it did run the card cycle's tick
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB) == []
    assert under(modules, "hosts.github", "hosts.azure_devops", "app.store") == []


# The GitHub host is built (the fake GitHub on loopback answers it); Azure's SDK stays out.


def test_a_tick_on_github_loads_no_azure_sdk_or_web(tmp_path: Path) -> None:
    fake = FakeGitHub()
    project = tmp_path / "project"
    init_repo(project, {".pair/config.yaml": "hosts: {pm: github, code: github}\n"})
    with serve_fake_github(fake, bare_repo=None) as base_url:
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **github_env(fake, base_url)}
        code, out, modules = pairbot(["tick"], project, tmp_path, env)
    assert code == 0, out
    assert "nothing-ready" in out
    assert "hosts.github.host" in modules  # the tick did build the GitHub host
    assert under(modules, "azure", "msrest", "requests", "hosts.azure_devops", *RUNTIME, *WEB) == []


def test_batch_status_in_process_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    # The command turns the cyclic collector off while it reads; a caller in the same process
    # (a test, the demo) gets it back on, after a status and after a refused one alike.
    project = tmp_path / "project"
    build_project(project, Shape(10, 1_000))
    assert gc.isenabled()
    assert run(["--root", str(project), "batch", "status", BATCH], {}) == 0
    assert gc.isenabled()
    with pytest.raises(UnknownBatchError):
        run(["--root", str(project), "batch", "status", "ghost"], {})
    assert gc.isenabled()
