"""Issue #14's acceptance: an agent in the Action reaches no credential (driven as a subprocess).

The Action runs as root here, as in a container job or on a self-hosted runner, with a fake
`github-token` and a fake App private key in the environment of `python -m action`, exactly as
action.yml's `env:` passes them, and a checkout whose `.git/config` holds the persisted token
(actions/checkout's default). The card's agent is the probe (tests/support/probe_agent.py): it
reads every `/proc/*/environ` and `/proc/*/cmdline`, its HOME, the runner's HOME and temp
directory, the workspace and every `.git/config` it can find. Isolated, it runs under another
uid and finds nothing; with PAIR_ISOLATION=off the same probe finds the token, so the probe
can fail. Where the test is neither root nor a passwordless sudoer it skips with one line.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from hosts.secrets import basic_encodings
from tests.e2e.action_harness import MAINTAINER, ActionRepo, Invocation, seed_bare
from tests.support.card_project import project_config
from tests.support.fake_github import FakeGitHub, rsa_key
from tests.support.github_server import WallClock, accept_actions_token, serve_fake_github
from tests.support.isolation import PROBE, SYSTEM_PYTHON, needs_isolation, secrets_found

pytestmark = [pytest.mark.slow, needs_isolation]

APP_ID = "424242"


@contextmanager
def probe_repo() -> Iterator[tuple[ActionRepo, Path]]:
    """An Action repository whose agent is the probe, in a directory another user can reach."""
    tmp = Path(tempfile.mkdtemp(prefix="pairbot-iso-action-"))
    tmp.chmod(0o755)
    try:
        config = project_config("github", agent_timeout_ms=120_000)
        config["batch"]["agentCommand"] = [SYSTEM_PYTHON, str(PROBE)]
        files = {".pair/config.yaml": yaml.safe_dump(config), "README.md": "# Hello\n"}
        bare = seed_bare(tmp, files)
        # A token of this test's own: the fake's fixed one is in other runs' `git -c` argv,
        # which every user can read in /proc/<pid>/cmdline.
        fake = FakeGitHub(clock=WallClock(), pat="ghp_" + secrets.token_hex(18))
        accept_actions_token(fake)
        fake.user(MAINTAINER)
        card = fake.seed_issue("Add the widget", "AC-1: it works\n", author=MAINTAINER)
        scratch = tmp / "agent"
        scratch.mkdir()
        out = tmp / "probe-out"
        out.mkdir()
        out.chmod(0o1777)
        with serve_fake_github(fake, bare_repo=bare) as base_url:
            yield (
                ActionRepo(
                    tmp=tmp, fake=fake, bare=bare, base_url=base_url, card=card, scratch=scratch
                ),
                out,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_probe(repo: ActionRepo, out: Path, isolation: str) -> tuple[Invocation, dict[str, Any]]:
    run_home = repo.tmp / "run-1"  # the harness's first runner HOME
    runner_temp = repo.tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    pem = rsa_key()[0]
    done = repo.run(
        repo.comment_event("/pair implement"),
        extra_env={
            "PAIR_ISOLATION": isolation,
            # action.yml's `env:` for `python -m action`: the App's key beside the token.
            "INPUT_APP_ID": APP_ID,
            "INPUT_PRIVATE_KEY": pem,
            "RUNNER_TEMP": str(runner_temp),
            "PAIR_PROBE_OUT": str(out),
            "PAIR_PROBE_SCAN": os.pathsep.join([str(run_home), str(repo.tmp)]),
        },
    )
    reports = sorted(out.glob("probe-*.json"))
    assert reports, done.stdout + done.stderr
    report = json.loads(reports[-1].read_text())
    report["pem"] = pem
    return done, report


def _needles(repo: ActionRepo, pem: str) -> dict[str, str]:
    token = repo.fake.pat
    body = [line for line in pem.splitlines() if line and "PRIVATE KEY" not in line]
    needles = {"token": token, "private key": body[1]}
    for index, encoded in enumerate(basic_encodings(token)):
        needles[f"token (basic {index})"] = encoded
    return needles


def test_an_isolated_agent_in_the_action_finds_no_credential() -> None:
    with probe_repo() as (repo, out):
        done, report = _run_probe(repo, out, "auto")
        log = f"exit {done.code}\n{done.stdout}\n{done.stderr}"
        assert report["uid"] != os.geteuid(), f"the probe ran as the test's own user\n{log}"
        found = secrets_found(report["found"], _needles(repo, report["pem"]))
        assert found == {}, f"{found}\n{log}"
        # It did look: its own process, and the checkout's git config (token removed).
        looked = sorted(report["found"])
        assert any(path.endswith("/.git/config") for path in looked), f"{looked}\n{log}"
        assert any(path.startswith("/proc/") for path in looked), log
        assert done.code in (0, 1), log  # the probe never reports: the step blocks
        assert "pairbot: warning: the agent runs as" not in done.stdout, log


def test_with_isolation_off_the_same_probe_finds_the_token() -> None:
    with probe_repo() as (repo, out):
        _, report = _run_probe(repo, out, "off")
        assert report["uid"] == os.geteuid()
        found = secrets_found(report["found"], _needles(repo, report["pem"]))
        assert "token" in found and "private key" in found, found
