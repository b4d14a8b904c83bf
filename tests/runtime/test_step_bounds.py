"""No process outlives its step: an agent that daemonizes leaves nothing behind.

Under the product's defaults (isolation on) an agent runs as the first process of a PID
namespace of its own (app/runtime/isolation.py `contain`). These tests run a hostile agent that
double-forks a daemon out of its process group (`setsid`, as `daemon(3)` does) and check, with
the real loci (swerex's local runtime and the plain process runtime), that the daemon is gone
when the step ends — on success, on timeout and when pairbot itself is killed mid-step — and
that two concurrent steps cannot see each other's processes. Skips with one line where this
machine cannot make a PID namespace (not root and no passwordless sudo, or unshare forbidden).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.agent import AgentLaunch, AgentRuntime, AgentSpawnResult
from app.runtime import isolation
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from app.settings import AgentSpecModel, BatchSettings, resolve_settings

REPO = Path(__file__).resolve().parents[2]
_FACTS = isolation.probe_host()

pytestmark = [
    pytest.mark.skipif(
        not _FACTS.pidns,
        reason="a PID namespace per step needs root or passwordless sudo, and unshare allowed",
    ),
    pytest.mark.xdist_group("agent-user"),
]

# A hostile agent: forks, leaves the group with setsid, forks again (the daemon), and the daemon
# beats a heart file until killed. The token in its argv is how the test finds it in /proc.
AGENT = """
import os, sys, time
token, beat, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp(sys.executable, [sys.executable, "-c",
            "import sys, time\\nwhile True:\\n    open(sys.argv[1], 'a').write('.')\\n"
            "    time.sleep(0.05)", beat, token])
    os._exit(0)
deadline = time.monotonic() + 60
while not os.path.exists(beat) and time.monotonic() < deadline:
    time.sleep(0.02)
if mode == "hang":
    time.sleep(3600)
print("daemon started")
"""

# Two concurrent agents: each says it started, waits (bounded) for the other, then looks for the
# other's token among every process it can see.
PEEK = """
import os, sys, time
me, other, where = sys.argv[1], sys.argv[2], sys.argv[3]
open(os.path.join(where, me), "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(where, other)) and time.monotonic() < deadline:
    time.sleep(0.02)
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        seen.append(open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"))
    except OSError:
        pass
others = [text for text in seen if me not in text]  # its own argv names the other
print("saw-other" if any(other in text for text in others) else "alone", len(seen))
time.sleep(0.5)  # still alive while the other one looks
"""


def _running(token: str) -> list[int]:
    """The pids of every live process whose argv holds `token` (zombies have exited)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory the agent user can reach and write (pytest's tmp is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="pairbot-bounds-"))
    path.chmod(0o777)  # the agent user writes its heartbeat here
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _project(shared: Path, name: str = "repo") -> Path:
    root = shared / name
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _launch(root: Path, argv: list[str], timeout_ms: int = 60_000) -> AgentLaunch:
    settings = resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings.model_validate(
            {
                "agent": AgentSpecModel(name="command"),
                "agentCommand": argv,
                "agentTimeoutMs": timeout_ms,
            }
        ),
    )
    return AgentLaunch(
        stage="apply",
        command="apply",
        settings=settings,
        root=root,
        instructions="go\n",
        env={"PATH": "/usr/bin:/bin"},  # no PAIR_ISOLATION: the default, auto
        pair_env={"PAIR_CHANGE": "alpha"},
    )


def _rex() -> AgentRuntime:
    from app.runtime.rex import LocalLocus, RexRuntime  # swerex

    return RexRuntime(LocalLocus())


RUNTIMES = [pytest.param(_rex, id="swerex-local"), pytest.param(ProcessRuntime, id="process")]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("mode", ["exit", "hang"])
def test_a_daemon_the_agent_left_is_gone_when_its_step_ends(
    shared: Path, runtime: type[AgentRuntime], mode: str
) -> None:
    token = "pbt-daemon-" + secrets.token_hex(6)
    script = shared / "agent.py"
    script.write_text(AGENT)
    beat = shared / f"{token}.beat"
    # "hang": the agent never ends; a short timeout ends the step (the point of the case).
    timeout_ms = 60_000 if mode == "exit" else 4_000
    launch = _launch(
        _project(shared), [sys.executable, str(script), token, str(beat), mode], timeout_ms
    )
    launcher = Launcher(lambda _s: runtime(), host=isolation.probe_host)
    lines: list[str] = []
    result = asyncio.run(launcher.launch(launch, lines.append))
    assert isinstance(result, AgentSpawnResult), result
    assert beat.exists(), (lines, result.stderr)  # the daemon did start
    if mode == "exit":
        assert result.exit_code == 0, result.stderr
    else:
        assert result.signal is not None, result
    assert _running(token) == [], "a process of the step outlived it"
    assert not any("cannot isolate" in line for line in lines), lines


def test_two_concurrent_steps_cannot_see_each_other(shared: Path) -> None:
    script = shared / "peek.py"
    script.write_text(PEEK)
    first, second = "pbt-a-" + secrets.token_hex(4), "pbt-b-" + secrets.token_hex(4)
    launcher = Launcher(lambda _s: _rex(), host=isolation.probe_host)

    async def both() -> list[AgentSpawnResult]:
        runs = [
            launcher.launch(
                _launch(
                    _project(shared, f"repo-{me}"),
                    [sys.executable, str(script), me, other, str(shared)],
                ),
                lambda _l: None,
            )
            for me, other in ((first, second), (second, first))
        ]
        done = await asyncio.gather(*runs)
        assert all(isinstance(r, AgentSpawnResult) for r in done), done
        return [r for r in done if isinstance(r, AgentSpawnResult)]

    for result in asyncio.run(both()):
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith("alone"), result.stdout


DRIVER = """
import asyncio, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.runtime.test_step_bounds import _launch, _rex
from app.runtime import isolation
from app.runtime.launcher import Launcher
root, argv = Path(sys.argv[2]), sys.argv[3:]
launcher = Launcher(lambda _s: _rex(), host=isolation.probe_host)
asyncio.run(launcher.launch(_launch(root, argv), lambda line: None))
"""


def test_a_daemon_dies_with_pairbot_killed_mid_step(shared: Path) -> None:
    token = "pbt-orphan-" + secrets.token_hex(6)
    script = shared / "agent.py"
    script.write_text(AGENT)
    beat = shared / f"{token}.beat"
    argv = [sys.executable, str(script), token, str(beat), "hang"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_", "COVERAGE"))}
    said = shared / "driver.log"
    with said.open("wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(REPO), str(_project(shared)), *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 60
        while not beat.exists() and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.05)
        assert beat.exists(), said.read_text()
        assert _running(token), "the daemon should be running while pairbot lives"
        driver.send_signal(signal.SIGKILL)  # pairbot dies without cleaning up
        driver.wait(timeout=30)
        # The watchdog notices within about a second; bounded here by 30 s, never a fixed wait.
        deadline = time.monotonic() + 30
        while _running(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _running(token) == [], "the daemon outlived the pairbot that started it"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        for pid in _running(token):
            os.kill(pid, signal.SIGKILL)
