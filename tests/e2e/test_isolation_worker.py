"""Issue #14's acceptance in the App's worker mode: the agent reaches no credential of the App.

`pairbot serve` runs as root with `PAIR_EXECUTION=worker`, the App's private key and webhook
secret in its environment, and an operator checkout fetching through a credential file in the
App's HOME. A signed `/pair implement` delivery makes its worker run the card's first step with
the probe as the agent (tests/support/probe_agent.py): isolated, the probe runs under another
uid and finds neither the key, the webhook secret, the operator's token nor a token the App
minted. Where the test is neither root nor a passwordless sudoer it skips with one line.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.app_harness import SECRET, AppWorld, app_world
from tests.support.card_project import project_config
from tests.support.fake_github import rsa_key
from tests.support.isolation import PROBE, SYSTEM_PYTHON, needs_isolation, secrets_found

pytestmark = [pytest.mark.slow, needs_isolation]


def _report(out: Path, world: AppWorld, within_s: float = 240.0) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while not (reports := sorted(out.glob("probe-*.json"))):
        assert time.monotonic() < deadline, f"the probe never ran\n{world.log_text()}"
        time.sleep(0.05)
    return dict(json.loads(reports[0].read_text()))


def _probe_worker(shared_dir: Path, isolation: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Run the card's first step in the worker with the probe as its agent: its report, and the
    secrets it must not find."""
    config = project_config("github", agent_timeout_ms=120_000)
    config["batch"]["agentCommand"] = [SYSTEM_PYTHON, str(PROBE)]
    files = {".pair/config.yaml": yaml.safe_dump(config), "README.md": "# Hello\n"}
    out = shared_dir / "probe-out"
    out.mkdir()
    out.chmod(0o1777)
    extra = {
        "PAIR_ISOLATION": isolation,
        "PAIR_PROBE_OUT": str(out),
        "PAIR_PROBE_SCAN": str(shared_dir),  # the App's HOME, its checkout, its store
    }
    # A token of this test's own: the fake's fixed one shows up in other runs' git argv.
    pat = "ghp_" + secrets.token_hex(18)
    with app_world(shared_dir, files=files, extra_env=extra, pat=pat) as world:
        _, _, answer = world.comment("/pair implement")
        assert answer.status_code == 202, answer.text
        report = _report(out, world)
        world.settle(1)
        minted = list(world.fake.minted)
    assert minted  # the App did act as its installation while the agent ran
    pem = rsa_key()[0]
    body = [line for line in pem.splitlines() if line and "PRIVATE KEY" not in line]
    needles = {
        "webhook secret": SECRET,
        "private key": body[1],
        "operator token": world.fake.pat,
        **{f"minted {token[:12]}": token for token in minted},
    }
    return report, needles


def test_an_isolated_agent_in_the_worker_finds_no_credential(shared_dir: Path) -> None:
    report, needles = _probe_worker(shared_dir, "auto")
    assert report["uid"] != os.geteuid(), "the probe ran as the App's own user"
    found = secrets_found(report["found"], needles)
    assert found == {}, found
    assert any(path.startswith("/proc/") for path in report["found"])


def test_with_isolation_off_the_probe_finds_the_apps_secrets(shared_dir: Path) -> None:
    report, needles = _probe_worker(shared_dir, "off")
    assert report["uid"] == os.geteuid()
    found = secrets_found(report["found"], needles)
    assert "webhook secret" in found and "private key" in found, found
