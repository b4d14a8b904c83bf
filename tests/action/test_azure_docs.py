"""docs/azure-pipelines.md's pipeline is complete: it parses, and every piece the entry relies
on is in it (schedules, the webhook resource, a credential-free checkout, the token mapped)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

DOC = Path(__file__).resolve().parents[2] / "docs" / "azure-pipelines.md"


def pipeline() -> dict[str, Any]:
    [block] = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    loaded = yaml.safe_load(block)
    assert isinstance(loaded, dict)
    return loaded


def test_the_template_triggers_on_schedules_and_the_webhook_only() -> None:
    doc = pipeline()
    assert (doc["trigger"], doc["pr"]) == ("none", "none")
    assert doc["schedules"][0]["always"] is True
    [hook] = doc["resources"]["webhooks"]
    assert set(hook) == {"webhook", "connection"}


def test_the_job_checks_out_without_credentials_and_maps_the_token_into_the_entry() -> None:
    doc = pipeline()
    [job] = doc["jobs"]
    steps = job["steps"]
    assert steps[0] == {"checkout": "self", "persistCredentials": False, "fetchDepth": 0}
    hook = pipeline()["resources"]["webhooks"][0]["webhook"]
    [save] = [s for s in steps if "PAIR_NOTIFICATION" in s.get("env", {})]
    assert f"parameters.{hook}" in save["env"]["PAIR_NOTIFICATION"]
    assert "$PAIR_NOTIFICATION" in save["bash"]  # through the environment, not the script
    [entry] = [s for s in steps if "action.azure" in s.get("bash", "")]
    assert entry["env"]["SYSTEM_ACCESSTOKEN"] == "$(System.AccessToken)"
    assert entry["env"]["PAIR_WEBHOOK_PAYLOAD_PATH"] in save["bash"].replace('"', "")
    assert "System.AccessToken" not in entry["bash"]  # never in a command line
