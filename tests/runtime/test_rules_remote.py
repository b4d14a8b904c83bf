"""codex's and gemini's rule files where the agent's disk is not pairbot's (docker, remote).

The files are written through the swerex runtime into the step's run directory on the agent's
side (app/runtime/rex/rulefiles.py). Here, with a real `swerex-remote` on 127.0.0.1 (and
swerex's in-process runtime), an agent program reads the files it was pointed at during its
step — CODEX_HOME, gemini's `--policy` — and reports their text and modes; after the step they
are gone. The launcher is driven through the docker locus's path with a swerex-remote server
standing in for the container's (a DockerLocus talks to the swerex-remote in its container the
same way); this machine has no Docker engine, so a real container is not started. A write that
fails, or a runtime that cannot write, never starts the agent. The real codex (its own
`execpolicy check`) reads the rule written on the server's side and allows the report by it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import stat
import sys
from collections.abc import Awaitable, Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import pytest

from app.engine.agent import (
    AgentEvent,
    AgentLaunch,
    AgentNotStarted,
    AgentSpawnRequest,
    AgentSpawnResult,
)
from app.proc import START_FAILURE_EXIT_CODE
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from app.runtime.rex import LocalLocus, RemoteLocus, RexRuntime
from app.runtime.rules import AgentRules, RuleContext, agent_rules, rules_need_files
from app.settings import (
    AgentSpecModel,
    BatchSettings,
    Locus,
    PermissionsSettings,
    Posture,
    ResolvedPermissions,
    ResolvedSettings,
    resolve_settings,
)
from tests.agents.real_cli import installed
from tests.support.swerex_server import SwerexServer, swerex_server

BASE_ENV = {"PYTHONCOERCECLOCALE": "0"}
PAIRBOT = "/opt/pairbot/bin/pairbot"
BOUNDED: tuple[Posture, ...] = ("repo-sandboxed-permissive", "curated-allowlist")
STEP_BOUND_S = 60  # every run here ends in seconds; this only stops a hang

# Run where the agent runs: finds the rules directory it was pointed at (CODEX_HOME's parent,
# or the `--policy` file's), and prints it with every file's text and mode, as one JSON line.
AGENT = r"""
import json, os, stat, sys
args = sys.argv[1:]
if "--policy" in args:
    where = os.path.dirname(args[args.index("--policy") + 1])
else:
    where = os.path.dirname(os.environ["CODEX_HOME"])
files = {}
for top, _dirs, names in os.walk(where):
    for name in names:
        path = os.path.join(top, name)
        files[os.path.relpath(path, where)] = [
            stat.S_IMODE(os.stat(path).st_mode), open(path, encoding="utf-8").read()
        ]
print(json.dumps({"where": where, "mode": stat.S_IMODE(os.stat(where).st_mode),
                  "files": files, "argv": args, "codex_home": os.environ.get("CODEX_HOME")}))
"""

_T = TypeVar("_T")


def bounded(coroutine: Awaitable[_T]) -> _T:
    async def run() -> _T:
        return await asyncio.wait_for(coroutine, STEP_BOUND_S)

    return asyncio.run(run())


def policy(posture: Posture) -> ResolvedPermissions:
    return ResolvedPermissions(posture, (), (), MappingProxyType({}))


def context(
    posture: Posture, root: str, env: dict[str, str] | None = None, rules_dir: str | None = None
) -> RuleContext:
    return RuleContext(policy(posture), PAIRBOT, root, rules_dir=rules_dir, env=env or {})


def seen(result: AgentSpawnResult) -> dict[str, Any]:
    """The agent program's report, the one JSON line of its stdout."""
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, result.stdout
    report: dict[str, Any] = json.loads(lines[0])
    return report


def assert_written(report: dict[str, Any], expected: AgentRules) -> None:
    """The files the agent found are exactly the rules' files, private to its user."""
    assert report["mode"] == 0o700
    assert {name: text for name, (_mode, text) in report["files"].items()} == dict(expected.files)
    assert {mode for mode, _text in report["files"].values()} == {0o600}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwerexServer]:
    with swerex_server(tmp_path_factory.mktemp("swerex")) as running:
        yield running


@pytest.fixture(params=["local", "remote"])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> RexRuntime:
    if request.param == "local":
        return RexRuntime(LocalLocus(), poll_interval_s=0.02)
    running: SwerexServer = request.getfixturevalue("server")
    return RexRuntime(RemoteLocus(running.settings(), tmp_path), poll_interval_s=0.02)


def request_for(cwd: Path, env: dict[str, str] | None = None) -> AgentSpawnRequest:
    return AgentSpawnRequest(
        command=sys.executable,
        args=("-c", AGENT),
        instructions="",
        cwd=str(cwd),
        env={**BASE_ENV, **(env or {})},
        timeout_ms=30_000,
    )


@pytest.mark.parametrize("agent", ["codex", "gemini", "opencode", "claude", "cursor", "command"])
@pytest.mark.parametrize("posture", [*BOUNDED, "full-autonomy"])
def test_rules_need_files_exactly_when_the_builders_make_files(
    agent: str, posture: Posture
) -> None:
    made = agent_rules(agent, context(posture, "/w", rules_dir="/r"))
    assert rules_need_files(agent, policy(posture)) == bool(made.files)


@pytest.mark.parametrize("posture", BOUNDED)
@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_the_rule_files_are_where_the_agent_runs_during_the_step_and_gone_after(
    runtime: RexRuntime, tmp_path: Path, agent: str, posture: Posture
) -> None:
    # The operator's own codex configuration is carried into the step's CODEX_HOME.
    own = tmp_path / "own-codex"
    (own / "rules").mkdir(parents=True)
    (own / "config.toml").write_text('model = "loopback"\n')
    (own / "rules" / "mine.rules").write_text('prefix_rule(pattern = ["ls"], decision = "allow")\n')
    step = context(posture, str(tmp_path), env={"CODEX_HOME": str(own)})
    made: list[AgentRules] = []

    def rules_for(where: str) -> AgentRules:
        rules = agent_rules(agent, dataclasses.replace(step, rules_dir=where))
        made.append(rules)
        return rules

    events: list[AgentEvent] = []
    result = bounded(runtime.spawn_with_rules(request_for(tmp_path), rules_for, events.append))
    report = seen(result)
    assert len(made) == 1
    assert_written(report, made[0])
    where = report["where"]
    if agent == "codex":
        assert report["codex_home"] == f"{where}/codex-home"
        assert {"codex-home/config.toml", "codex-home/rules/mine.rules"} <= set(report["files"])
        assert (
            'prefix_rule(pattern = ["/opt/pairbot/bin/pairbot", "batch", "report"]'
            in (report["files"]["codex-home/rules/pairbot-report.rules"][1])
        )
    else:
        assert report["argv"][-2:] == ["--policy", f"{where}/gemini-policy.toml"]
    # The runs here are on this machine (loopback), so "gone" is checked on its disk.
    assert not Path(where).exists()


def test_rules_without_files_write_nothing_and_still_apply(
    runtime: RexRuntime, tmp_path: Path
) -> None:
    rules = agent_rules("opencode", context("curated-allowlist", str(tmp_path)))
    dump = "import os; print(os.environ['OPENCODE_PERMISSION'])"
    request = AgentSpawnRequest(sys.executable, ("-c", dump), "", str(tmp_path), BASE_ENV, 30_000)
    result = bounded(runtime.spawn_with_rules(request, lambda _where: rules, lambda _e: None))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(rules.env["OPENCODE_PERMISSION"])


def test_a_rule_file_that_cannot_be_written_never_starts_the_agent(
    runtime: RexRuntime, tmp_path: Path
) -> None:
    # The rules directory already exists (made here, on the same disk as the loopback server):
    # `mkdir` fails where the agent runs, and the step ends before the launcher is written.
    ran = tmp_path / "ran"
    code = f"open({str(ran)!r}, 'w').close()"
    request = AgentSpawnRequest(sys.executable, ("-c", code), "", str(tmp_path), BASE_ENV, 30_000)

    def rules_for(where: str) -> AgentRules:
        Path(where).mkdir()
        return agent_rules("gemini", context("curated-allowlist", str(tmp_path), rules_dir=where))

    events: list[AgentEvent] = []
    result = bounded(runtime.spawn_with_rules(request, rules_for, events.append))
    assert result.exit_code == START_FAILURE_EXIT_CODE
    assert "could not create the agent's rules directory" in result.stderr
    assert [e.kind for e in events] == ["error", "exit"]
    assert not ran.exists()


def test_a_rule_file_named_outside_its_directory_is_refused(
    runtime: RexRuntime, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    code = f"open({str(ran)!r}, 'w').close()"
    request = AgentSpawnRequest(sys.executable, ("-c", code), "", str(tmp_path), BASE_ENV, 30_000)
    escape = AgentRules(files={"../escaped": "x"})
    result = bounded(runtime.spawn_with_rules(request, lambda _w: escape, lambda _e: None))
    assert result.exit_code == START_FAILURE_EXIT_CODE
    assert "'../escaped' is not a relative path" in result.stderr
    assert not ran.exists() and not (tmp_path / "escaped").exists()


# --- the launcher, through the docker locus's path --------------------------------------------


def settings(agent: str, posture: Posture, locus: Locus = "docker") -> ResolvedSettings:
    return resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings.model_validate(
            {
                "agent": AgentSpecModel(name=agent),
                "locus": locus,
                "permissions": PermissionsSettings.model_validate({"posture": posture}),
            }
        ),
    )


def launch(resolved: ResolvedSettings, root: Path) -> AgentLaunch:
    return AgentLaunch(
        stage="apply",
        command="apply",
        settings=resolved,
        root=root,
        instructions="do it\n",
        env={"PATH": "/usr/bin:/bin", **BASE_ENV},
        pair_env={"PAIR_CHANGE": "alpha", "PAIRBOT": PAIRBOT},
    )


@pytest.fixture(scope="module")
def agents_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwerexServer]:
    """A swerex-remote whose PATH finds the agent program as `codex` and `gemini`."""
    bin_dir = tmp_path_factory.mktemp("agents-bin")
    for name in ("codex", "gemini"):
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\n{AGENT}")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.MonkeyPatch.context() as patch:
        # The server takes this process's environment when it starts (tests/support).
        patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        with swerex_server(tmp_path_factory.mktemp("swerex-agents")) as running:
            patch.undo()
            yield running


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_the_launcher_gives_codex_and_gemini_their_rules_off_this_disk(
    agents_server: SwerexServer, tmp_path: Path, agent: str
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    runtime = RexRuntime(RemoteLocus(agents_server.settings(), root), poll_interval_s=0.02)
    launcher = Launcher(lambda _s: runtime)
    resolved = settings(agent, "curated-allowlist")
    result = bounded(launcher.launch(launch(resolved, root), lambda _line: None))
    assert isinstance(result, AgentSpawnResult)
    report = seen(result)
    where = report["where"]
    # What the agent found is what the rules say for a docker step (the tree at /workspace).
    step = context("curated-allowlist", "/workspace", rules_dir=where)
    assert_written(report, agent_rules(agent, step))
    assert not Path(where).exists()


def test_a_runtime_that_cannot_write_rules_there_does_not_start_codex(tmp_path: Path) -> None:
    # ProcessRuntime runs on this disk and writes nothing for a docker step: no rules, no start.
    launcher = Launcher(lambda _s: ProcessRuntime())
    result = bounded(
        launcher.launch(launch(settings("codex", "curated-allowlist"), tmp_path), lambda _l: None)
    )
    assert isinstance(result, AgentNotStarted)
    assert "codex's rules for the curated-allowlist posture are files" in result.reason
    assert "does not start codex without its rules" in result.reason


def test_the_real_codex_allows_the_report_by_the_rule_written_on_the_remote_side(
    server: SwerexServer, tmp_path: Path
) -> None:
    binary = installed("codex")
    if binary is None:
        pytest.skip("codex CLI not installed (python3 dev.py test installs it with npm)")
    runtime = RexRuntime(RemoteLocus(server.settings(), tmp_path), poll_interval_s=0.02)
    step = context("curated-allowlist", str(tmp_path))

    def rules_for(where: str) -> AgentRules:
        return agent_rules("codex", dataclasses.replace(step, rules_dir=where))

    # codex's own check, run where it runs, against the rule file its CODEX_HOME holds there.
    check = shlex.join([str(binary), "execpolicy", "check", "--rules"])
    rule = '"$CODEX_HOME/rules/pairbot-report.rules"'
    script = "\n".join(
        [
            f"{check} {rule} {PAIRBOT} batch report --complete done",
            f"{check} {rule} {PAIRBOT} batch status",
        ]
    )
    request = AgentSpawnRequest("/bin/sh", ("-c", script), "", str(tmp_path), BASE_ENV, 60_000)
    result = bounded(runtime.spawn_with_rules(request, rules_for, lambda _e: None))
    assert result.exit_code == 0, result.stderr
    verdicts = [json.loads(line).get("decision") for line in result.stdout.splitlines()]
    assert verdicts == ["allow", None]
