"""docs/action.md: the example workflow is valid YAML and follows the rules the page states, and
the page names every input and variable the Action reads."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from action.context import (
    ENV_APP_SLUG,
    ENV_INSTALLATION_ID,
    ENV_LOCK_WAIT_S,
    ENV_STALE_AFTER_S,
)
from action.context import INPUTS as CONTEXT_INPUTS
from action.github_actions import CONTINUATION_INPUTS

INPUTS = (*CONTEXT_INPUTS, *CONTINUATION_INPUTS)

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")


def example() -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE, re.DOTALL)
    workflows = [yaml.safe_load(b) for b in blocks if "jobs:" in b]
    assert len(workflows) == 1
    workflow: dict[str, Any] = workflows[0]
    return workflow


def test_the_example_listens_to_every_event_the_action_handles() -> None:
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    on = example()[True]
    assert set(on) == {
        "schedule",
        "workflow_dispatch",
        "issue_comment",
        "repository_dispatch",
        "pull_request",
    }
    assert on["workflow_dispatch"]["inputs"]["batch"]["required"] is False
    # A continuation names the card it follows; an undeclared input would be a 422.
    assert on["workflow_dispatch"]["inputs"]["continued-from"]["required"] is False
    assert on["issue_comment"]["types"] == ["created"]
    assert on["repository_dispatch"]["types"] == ["pair"]
    assert on["pull_request"]["types"] == ["synchronize"]


def test_the_example_asks_for_least_privilege_and_never_cancels_a_running_step() -> None:
    workflow = example()
    assert workflow["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
        "statuses": "write",
        "checks": "read",
        "actions": "write",
    }
    assert workflow["concurrency"]["cancel-in-progress"] is False
    group = workflow["concurrency"]["group"]
    assert "github.event_name == 'schedule'" in group
    # A continuation (a dispatch of every batch) queues with the ticks: one pending, no pile.
    assert "github.event_name == 'workflow_dispatch' && inputs.batch == ''" in group


def test_the_example_never_interpolates_into_a_run_script() -> None:
    steps = example()["jobs"]["step"]["steps"]
    scripts = [s["run"] for s in steps if "run" in s]
    assert scripts
    for script in scripts:
        assert "${{" not in script


def test_the_example_uses_the_app_token_and_the_default_branch() -> None:
    steps = example()["jobs"]["step"]["steps"]
    pair = next(s for s in steps if s.get("id") == "pair")
    assert {"app-id", "private-key"} <= set(pair["with"])
    checkout = steps[0]
    assert checkout["uses"] == "actions/checkout@v4"
    assert checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    assert checkout["with"]["persist-credentials"] is False


def test_the_page_lists_every_input_and_variable() -> None:
    for name in INPUTS:
        assert f"| `{name}` |" in PAGE, name
        assert "`INPUT_" + name.upper().replace("-", "_") + "`" in PAGE, name
    for variable in (
        "GITHUB_EVENT_NAME",
        "GITHUB_EVENT_PATH",
        "GITHUB_REPOSITORY",
        "GITHUB_API_URL",
        "GITHUB_SERVER_URL",
        "GITHUB_RUN_ID",
        "GITHUB_WORKSPACE",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_ACTOR_ID",
        "GITHUB_WORKFLOW_REF",
        "GITHUB_REF",
        ENV_INSTALLATION_ID,
        ENV_APP_SLUG,
        ENV_LOCK_WAIT_S,
        ENV_STALE_AFTER_S,
    ):
        assert f"`{variable}`" in PAGE, variable
    for output in ("status", "card", "transition", "pr"):
        assert f"| `{output}` |" in PAGE, output
