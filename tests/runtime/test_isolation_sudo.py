"""The GitHub-hosted runner's case: pairbot is an ordinary user with passwordless sudo.

As root the test makes such a user (`pbt-runner-…`, `NOPASSWD: ALL` in /etc/sudoers.d, as the
hosted runners' `runner` has) and runs, as that user, the production launcher over swerex's
local runtime with the probe agent, beside a process of that user holding a fake token in its
environment. The probe runs as `pairbot-agent` through `sudo -n -u` and cannot read the token;
with PAIR_ISOLATION=off it runs as the runner's user and finds it. pairbot is imported by the
system's python3 from this checkout and its venv (this interpreter may sit under /root).
Skips with one line unless the test runs as root on a machine with sudo installed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.isolation import PROBE, SYSTEM_PYTHON, secrets_found

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sudo") is None or not Path(SYSTEM_PYTHON).exists(),
    reason="the passwordless-sudo case needs root (to make the sudoer) and sudo installed",
)

DRIVER = """
import asyncio, json, sys
from pathlib import Path
from app.engine.agent import AgentLaunch
from app.runtime import isolation
from app.runtime.launcher import Launcher
from app.runtime.rex import LocalLocus, RexRuntime
from app.settings import AgentSpecModel, BatchSettings, resolve_settings

root, journal, out, setting, probe, python = sys.argv[1:7]
settings = resolve_settings(env={}, manifest=None, project=BatchSettings.model_validate(
    {"agent": AgentSpecModel(name="command"), "agentCommand": [python, probe]}))
launch = AgentLaunch(stage="apply", command="apply", settings=settings, root=Path(root),
    instructions="go\\n", env={"PATH": "/usr/bin:/bin", "PAIR_ISOLATION": setting,
    "PAIR_PROBE_OUT": out}, pair_env={"PAIR_CHANGE": "a"}, writable=(Path(journal),))
launcher = Launcher(lambda _s: RexRuntime(LocalLocus()), host=isolation.probe_host)
lines = []
result = asyncio.run(launcher.launch(launch, lines.append))
print(json.dumps({"exit": getattr(result, "exit_code", None),
    "stderr": getattr(result, "stderr", getattr(result, "reason", "")), "lines": lines}))
"""


@pytest.fixture
def sudoer() -> Iterator[str]:
    name = "pbt-runner-" + secrets.token_hex(4)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True)
    rule = Path(f"/etc/sudoers.d/{name}")
    rule.write_text(f"{name} ALL=(ALL) NOPASSWD:ALL\n")
    rule.chmod(0o440)
    try:
        yield name
    finally:
        rule.unlink()
        subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)


def _as(user: str, argv: list[str], env: dict[str, str], **kw: object) -> subprocess.Popen[str]:
    switch = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    return subprocess.Popen([*switch, *argv], env=env, text=True, **kw)  # type: ignore[call-overload]


def _run(user: str, setting: str) -> tuple[dict[str, object], dict[str, object], str]:
    work = Path(tempfile.mkdtemp(prefix="pairbot-iso-sudo-"))
    try:
        shutil.chown(work, user, user)
        work.chmod(0o755)
        root = work / "repo"
        out = work / "out"
        journal = work / "journal.jsonl"
        for path in (root, out):
            path.mkdir()
            shutil.chown(path, user, user)
        out.chmod(0o1777)
        journal.write_text("")
        shutil.chown(journal, user, user)
        token = "ghs_" + secrets.token_hex(16)
        site = sysconfig.get_paths()["purelib"]
        env = {
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": f"/home/{user}",
            "PYTHONPATH": os.pathsep.join([str(REPO), site]),
        }
        holder = _as(
            user,
            [SYSTEM_PYTHON, "-c", "import sys; sys.stdin.read()"],
            {**env, "INPUT_GITHUB_TOKEN": token},
            stdin=subprocess.PIPE,
        )
        try:
            driver = _as(
                user,
                [
                    SYSTEM_PYTHON,
                    "-c",
                    DRIVER,
                    str(root),
                    str(journal),
                    str(out),
                    setting,
                    str(PROBE),
                    SYSTEM_PYTHON,
                ],
                env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(work),
            )
            stdout, stderr = driver.communicate(timeout=180)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=30)
        assert driver.returncode == 0, stderr
        result = json.loads(stdout.strip().splitlines()[-1])
        reports = list(out.glob("probe-*.json"))
        assert len(reports) == 1, result
        (report_file,) = reports
        report = json.loads(report_file.read_text())
        assert root.stat().st_uid == journal.stat().st_uid  # given back to the runner's user
        return result, report, token
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_through_sudo_the_agent_runs_as_its_own_user_and_finds_no_token(sudoer: str) -> None:
    import pwd

    result, report, token = _run(sudoer, "auto")
    assert result["exit"] == 0, result
    runner = pwd.getpwnam(sudoer).pw_uid
    assert report["uid"] not in (0, runner)
    assert report["uid"] == pwd.getpwnam("pairbot-agent").pw_uid
    assert secrets_found(report["found"], {"token": token}) == {}


def test_through_sudo_with_isolation_off_the_agent_is_the_runner_in_its_own_pid_namespace(
    sudoer: str,
) -> None:
    import pwd

    # off: the operator's choice to share pairbot's user; the step is still bounded by a PID
    # namespace of its own (a user namespace, as this kernel allows), whose /proc shows only it.
    result, report, token = _run(sudoer, "off")
    assert result["exit"] == 0, result
    assert report["uid"] == pwd.getpwnam(sudoer).pw_uid
    assert not secrets_found(report["found"], {"token": token})
    pids = {path.split("/")[2] for path in report["found"]}
    assert pids <= {str(n) for n in range(1, 10)}, pids  # the namespace's own few processes
