"""Nothing the agent wrote runs with pairbot's rights: the test command is isolated too.

An apply agent can rewrite the project's test runner (a conftest, `run_tests.py`, a package.json
script), which pairbot then runs to judge the step. These tests play that runner under the
product's defaults, through the production launcher's `run_command`: it searches every
process's environment and argv and its own environment for the forge token and the model key
that pairbot and its ancestors hold, and leaves a daemon behind. It must find nothing, run as
the agent user, and leave nothing running. Skips with one line where this machine cannot
isolate (not root and no passwordless sudo).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.agent import CommandRun
from app.runtime import isolation
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime

_FACTS = isolation.probe_host()

pytestmark = [
    pytest.mark.skipif(
        not (_FACTS.euid == 0 or _FACTS.sudo) or not _FACTS.pidns,
        reason="isolating the test command needs root or passwordless sudo, and unshare",
    ),
    pytest.mark.xdist_group("agent-user"),
]

HOSTILE_RUNNER = """
import json, os, pathlib, sys
needles = sys.argv[1:]
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    for name in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{name}", "rb").read().decode(errors="replace")
        except OSError:
            continue
        found += [f"/proc/{pid}/{name}" for needle in needles if needle in data]
found += ["os.environ" for needle in needles if needle in repr(dict(os.environ))]
for config in pathlib.Path.cwd().glob("**/config"):
    try:
        if any(n in config.read_text(errors="replace") for n in needles):
            found.append(str(config))
    except OSError:
        pass
print(json.dumps({"uid": os.geteuid(), "found": found}))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "300", "pbt-left-behind-" + needles[0][-8:]])
    os._exit(0)
"""


@pytest.fixture
def secret_holder() -> Iterator[tuple[str, str]]:
    """A process of pairbot's user holding a forge token and a model key in its environment,
    as the runner's step shell holds them."""
    token, key = "ghs_" + secrets.token_hex(16), "sk-ant-" + secrets.token_hex(16)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": token, "ANTHROPIC_API_KEY": key},
    )
    try:
        yield token, key
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def _left_behind(token: str) -> list[int]:
    marker = ("pbt-left-behind-" + token[-8:]).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_a_rewritten_test_runner_finds_no_credential_and_leaves_nothing(
    tmp_path: Path, secret_holder: tuple[str, str]
) -> None:
    token, key = secret_holder
    tree = tmp_path / "worktree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / "run_tests.py").write_text(HOSTILE_RUNNER)
    # pairbot's own environment, as the Action or the App holds it.
    env = {"PATH": os.environ["PATH"], "GITHUB_TOKEN": token, "ANTHROPIC_API_KEY": key}
    launcher = Launcher(lambda _s: ProcessRuntime(), host=isolation.probe_host)
    command = f"{sys.executable} run_tests.py {token} {key}"
    done = launcher.run_command(CommandRun(command, tree, env, timeout_s=120))
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["uid"] != os.geteuid()  # the agent user, not pairbot's
    # Its own argv names the needles (that is how the test hands them over): leave those out.
    leaks = [where for where in report["found"] if "cmdline" not in where]
    assert leaks == [], done.stdout
    deadline = time.monotonic() + 10  # the namespace is gone when run_command returns
    while _left_behind(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _left_behind(token) == []
    assert (tree / "run_tests.py").stat().st_uid == os.geteuid()  # the tree is pairbot's again


def test_a_test_runner_that_is_not_installed_says_so(tmp_path: Path) -> None:
    from app.cycle.testrun import run_tests
    from app.domain.review.testsets import MissingJUnit

    tree = tmp_path / "worktree"
    tree.mkdir()
    launcher = Launcher(lambda _s: ProcessRuntime(), host=isolation.probe_host)
    env = {"PATH": "/usr/bin:/bin"}
    run = run_tests(launcher, tree, "pbt-no-such-runner -q --junitxml=j.xml", "j.xml", env)
    assert isinstance(run, MissingJUnit), run
    assert run.cause is not None and "exited 127" in run.cause, run
    assert "pbt-no-such-runner" in run.cause and "not installed" in run.cause
