"""action.yml: the composite Action's inputs, outputs and steps agree with `action.context`, no
`run:` script interpolates an expression, and the pip cache is keyed on constraints.txt."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from action.context import ENV_APP_SLUG, ENV_INSTALLATION_ID, ENV_TOKEN_IS_ACTIONS
from action.context import INPUTS as CONTEXT_INPUTS
from action.github_actions import CONTINUATION_INPUTS

INPUTS = (*CONTEXT_INPUTS, *CONTINUATION_INPUTS)  # the platform reads the continuation's

ROOT = Path(__file__).resolve().parents[2]
ACTION: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
STEPS: list[dict[str, Any]] = ACTION["runs"]["steps"]


def step(step_id: str) -> dict[str, Any]:
    return next(s for s in STEPS if s.get("id") == step_id)


def env_name(input_name: str) -> str:
    return "INPUT_" + input_name.upper().replace("-", "_")


def test_it_is_a_composite_action() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert ACTION["name"] == "pairbot"


def test_the_inputs_are_the_ones_the_context_reads_plus_the_python_version() -> None:
    assert set(ACTION["inputs"]) == {*INPUTS, "python-version"}
    assert ACTION["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert ACTION["inputs"]["trigger"]["default"] == "pair"
    assert ACTION["inputs"]["python-version"]["default"] == "3.11"
    assert ACTION["inputs"]["continue"]["default"] == "true"
    assert ACTION["inputs"]["continue-limit"]["default"] == "50"
    for name, spec in ACTION["inputs"].items():
        assert spec.get("description"), name


def test_every_input_is_used_by_a_step() -> None:
    text = yaml.safe_dump(STEPS)
    for name in ACTION["inputs"]:
        assert f"inputs.{name} " in text or f"inputs.{name}}}" in text, name


def test_the_pair_step_passes_every_input_through_env() -> None:
    env: dict[str, str] = step("pair")["env"]
    assert set(env) == {env_name(n) for n in INPUTS} | {
        ENV_INSTALLATION_ID,
        ENV_APP_SLUG,
        ENV_TOKEN_IS_ACTIONS,
    }
    for name in INPUTS:
        assert re.search(rf"\binputs\.{re.escape(name)}\b", env[env_name(name)]), name
    # The App's token, when minted, replaces the default GITHUB_TOKEN.
    expected = "${{ steps.app-token.outputs.token || inputs.github-token }}"
    assert env["INPUT_GITHUB_TOKEN"] == expected
    assert env[ENV_INSTALLATION_ID] == "${{ steps.app-token.outputs.installation-id }}"
    assert env[ENV_APP_SLUG] == "${{ steps.app-token.outputs.app-slug }}"
    # Only the run's own token, with no App token minted, is known to be github-actions[bot].
    assert env[ENV_TOKEN_IS_ACTIONS] == (
        "${{ steps.app-token.outputs.token == '' && inputs.github-token == github.token }}"
    )


def test_no_run_script_interpolates_an_expression() -> None:
    # `${{ }}` in `run:` is pasted into the script before the shell sees it: an input or event
    # text would become code. Every value reaches the script through `env:`.
    runs = [s["run"] for s in STEPS if "run" in s]
    assert runs
    for script in runs:
        assert "${{" not in script, script
    for s in STEPS:
        if "run" in s:
            assert s["shell"] == "bash"


@pytest.mark.parametrize("name", ["status", "card", "transition", "pr"])
def test_each_output_maps_to_the_pair_step(name: str) -> None:
    output = ACTION["outputs"][name]
    assert output["value"] == f"${{{{ steps.pair.outputs.{name} }}}}"
    assert output["description"]


def test_the_pair_step_runs_the_entry_isolated_from_the_workspace() -> None:
    pair = step("pair")
    assert pair is STEPS[-1]
    # -I: the workspace's own `action` package or PYTHONPATH must not replace pairbot's.
    assert pair["run"].split() == ['"$RUNNER_TEMP/pairbot-venv/bin/python"', "-I", "-m", "action"]
    assert pair["working-directory"] == "${{ github.workspace }}"


def test_the_app_token_is_minted_only_when_an_app_id_is_given() -> None:
    token = step("app-token")
    assert token["uses"] == "actions/create-github-app-token@v1"
    assert token["if"] == "inputs.app-id != ''"
    assert token["with"] == {
        "app-id": "${{ inputs.app-id }}",
        "private-key": "${{ inputs.private-key }}",
    }
    assert STEPS.index(token) < STEPS.index(step("pair"))


def test_python_is_set_up_without_touching_the_jobs_python() -> None:
    python = step("python")
    assert python["uses"] == "actions/setup-python@v5"
    assert python["with"] == {
        "python-version": "${{ inputs.python-version }}",
        "update-environment": False,
    }


def test_the_pip_cache_is_keyed_on_constraints_txt() -> None:
    key_step = step("pip-cache")
    assert '"$GITHUB_ACTION_PATH/constraints.txt"' in key_step["run"]
    cache = next(s for s in STEPS if s.get("uses", "").startswith("actions/cache@"))
    assert cache["uses"] == "actions/cache@v4"
    assert cache["with"]["path"] == "${{ steps.pip-cache.outputs.dir }}"
    key = cache["with"]["key"]
    assert "${{ steps.pip-cache.outputs.hash }}" in key
    assert "${{ steps.python.outputs.python-version }}" in key
    assert "${{ runner.os }}" in key
    install = next(s for s in STEPS if s.get("name") == "Install pairbot")
    assert '-c "$GITHUB_ACTION_PATH/constraints.txt" "$GITHUB_ACTION_PATH"' in install["run"]
    order = [STEPS.index(s) for s in (step("python"), key_step, cache, install)]
    assert order == sorted(order)


@pytest.mark.skipif(shutil.which("bash") is None, reason="the Action's scripts are bash")
def test_the_cache_key_script_runs_and_hashes_constraints_txt(tmp_path: Path) -> None:
    output = tmp_path / "output"
    env = {
        **os.environ,
        "PAIRBOT_PYTHON": sys.executable,
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(output),
    }
    subprocess.run(
        ["bash", "-e", "-c", step("pip-cache")["run"]], env=env, check=True, capture_output=True
    )
    written = dict(line.split("=", 1) for line in output.read_text().splitlines())
    expected = hashlib.sha256((ROOT / "constraints.txt").read_bytes()).hexdigest()
    assert written["hash"] == expected
    assert written["dir"]


def test_every_action_used_is_pinned_to_a_major_version() -> None:
    for s in STEPS:
        if "uses" in s:
            assert re.fullmatch(r"actions/[a-z-]+@v\d+", s["uses"]), s["uses"]


def test_the_install_removes_click_after_installing_pairbot() -> None:
    install = next(s for s in STEPS if s.get("name") == "Install pairbot")
    lines = [line.strip() for line in install["run"].splitlines() if line.strip()]
    uninstall = '"$RUNNER_TEMP/pairbot-venv/bin/python" -m pip uninstall --quiet --yes click'
    assert lines[-1] == uninstall
    assert any("-m pip install" in line for line in lines[:-1])


# What `pip uninstall click` leaves: `import click` fails. Everything the Action runs (the
# entry, the GitHub host, the agent runtime) still imports, and httpx no longer loads its
# command-line tool's packages.
WITHOUT_CLICK = """
import importlib.abc, json, sys

class NoClick(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "click" or name.startswith("click."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoClick())
import httpx
extras = sorted(m for m in ("click", "rich", "pygments") if m in sys.modules)
import action.__main__, hosts.github.host, app.runtime.rex, app.cycle.card_cycle
print(json.dumps(extras))
"""


def test_without_click_the_action_imports_and_httpx_skips_its_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_CLICK],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
