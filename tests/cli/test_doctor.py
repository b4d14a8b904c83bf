"""`pairbot doctor`: every check state through injected probes, real probes on loopback, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from app.cli.doctor.diagnose import diagnose, render_text
from app.cli.doctor.model import Check, Report
from app.cli.doctor.needs import remote_target
from app.cli.doctor.probes import Probes, agent_version, http_get, run_command
from app.runtime import reach
from app.runtime.adapters import AGENT_BINARIES
from app.runtime.isolation import DEFAULT_AGENT_USER, AgentAccount, HostFacts, Switch
from app.runtime.supported import SUPPORTED, parse_version
from app.settings import RemoteSettings
from tests.support.project import Project, cli

TOKEN = "s3cr3t-token-value"  # noqa: S105  # a fake, to prove it is never printed
DOCKER_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
TOOLS = {"setpriv", "runuser", "setfacl", "unshare"}
EVERYTHING = {
    "git",
    "claude",
    "codex",
    "gemini",
    "cursor-agent",
    "opencode",
    sys.executable,
    *TOOLS,
}
ROOT_HOST = HostFacts(euid=0, sudo=False, setpriv=True, runuser=True, pidns=True)
AGENT = reach.Who("pairbot-agent", 999, frozenset({995}))
OPEN_DIR = 0o40755
OPEN_FILE = 0o100755


def way(path: str, shut: Mapping[str, int] | None = None, **target: Any) -> reach.Trace:
    """The trace of `path` on a fake disk: every directory 0755 root's unless `shut` gives its
    mode; the file 0755 root's unless `target` says otherwise (mode, uid, gid, acl, shebang)."""
    parts = [part for part in path.split("/") if part]
    above = ["/", *("/" + "/".join(parts[:n]) for n in range(1, len(parts)))]
    modes = shut or {}
    dirs = tuple(reach.Node(d, modes.get(d, OPEN_DIR), 0, 0) for d in above)
    shebang = target.pop("shebang", None)
    node = reach.Node(path, **{"mode": OPEN_FILE, "uid": 0, "gid": 0, **target})
    return reach.Trace(path, dirs, node, None, shebang)


@dataclass
class FakeMachine:
    """What the probes see; every call is recorded and anything unexpected raises."""

    on_path: set[str] = field(default_factory=lambda: set(EVERYTHING))
    docker: tuple[int, str] | BaseException = (0, "")
    http: Mapping[str, int | BaseException] = field(default_factory=dict)
    python: tuple[int, int, int] = (3, 11, 7)
    http_calls: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    run_calls: list[list[str]] = field(default_factory=list)
    # binary -> what its --version prints; absent: the supported version
    versions: Mapping[str, str | None] = field(default_factory=dict)
    version_calls: list[list[str]] = field(default_factory=list)
    host: HostFacts = ROOT_HOST
    agent: reach.Who = AGENT
    # path -> its trace; any other path is reachable by everyone (`way`)
    ways: Mapping[str, reach.Trace] = field(default_factory=dict)
    executable: str = "/opt/pairbot/bin/python"
    traced: list[str] = field(default_factory=list)

    def trace(self, path: str) -> reach.Trace:
        self.traced.append(path)
        return self.ways.get(path) or way(path)

    def account(self, name: str) -> reach.Who:
        return self.agent if name == self.agent.name else reach.Who(name, None)

    def which(self, name: str) -> str | None:
        return f"/bin/{name}" if name in self.on_path else None

    def run(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        self.run_calls.append(list(argv))
        assert argv[:2] == ["docker", "info"]
        assert timeout <= 10
        if isinstance(self.docker, BaseException):
            raise self.docker
        return self.docker

    def http_get(self, url: str, headers: Mapping[str, str], timeout: float) -> int:
        self.http_calls.append((url, dict(headers), timeout))
        answer = self.http[url]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def version(self, argv: Sequence[str], timeout: float) -> str | None:
        self.version_calls.append(list(argv))
        assert argv[0].startswith("/bin/") and argv[1:] == ["--version"] and timeout <= 10
        binary = argv[0].removeprefix("/bin/")
        agent = {b: a for a, b in AGENT_BINARIES.items()}[binary]
        return self.versions.get(binary, SUPPORTED[agent].version)

    def probes(self) -> Probes:
        return Probes(
            which=self.which,
            run=self.run,
            http_get=self.http_get,
            version=self.version,
            python=self.python,
            host=lambda: self.host,
            account=self.account,
            trace=self.trace,
            executable=self.executable,
            package="/opt/pairbot/lib/app",
        )


def project(root: Path, batch: Mapping[str, Any] | None = None, **batches: Any) -> Path:
    (root / ".pair").mkdir(parents=True)
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump({"batch": dict(batch or {})}))
    for name, settings in batches.items():
        (root / ".pair" / "batches" / name).mkdir(parents=True)
        manifest = {"phases": [{"name": "p", "changes": ["c"]}], "settings": settings}
        (root / ".pair" / "batches" / name / "batch.yaml").write_text(yaml.safe_dump(manifest))
    return root


def run(root: Path, machine: FakeMachine, env: Mapping[str, str] | None = None) -> Report:
    return diagnose(root, env or {}, machine.probes())


def by_name(report: Report) -> dict[str, Check]:
    return {check.name: check for check in report.checks}


# ---------------------------------------------------------------- agents


def test_everything_present_is_ready(tmp_path: Path) -> None:
    report = run(project(tmp_path), FakeMachine())
    checks = by_name(report)
    assert report.exit_code == 0
    assert {c.status for c in report.checks} == {"ok"}
    assert checks["agent:claude"].detail == (
        "claude at /bin/claude (2.1.332, supported) — project settings (every stage)"
    )
    assert checks["agent:cursor"].detail.startswith(
        "cursor-agent at /bin/cursor-agent (version unknown, untested (no supported version))"
    )


def test_no_project_checks_the_defaults(tmp_path: Path) -> None:
    machine = FakeMachine(on_path=set(EVERYTHING) - {"claude"})
    report = run(tmp_path, machine)
    checks = by_name(report)
    assert checks["config"].status == "warn"
    assert checks["agent:claude"].status == "fail"
    assert "needed by built-in defaults (every stage)" in checks["agent:claude"].detail
    assert "npm install -g @anthropic-ai/claude-code" in checks["agent:claude"].remedy
    assert report.exit_code == 1


def test_unconfigured_missing_agents_only_warn(tmp_path: Path) -> None:
    machine = FakeMachine(on_path={"git", "codex"})
    report = run(project(tmp_path, {"agent": "codex"}), machine)
    checks = by_name(report)
    assert checks["agent:codex"].status == "ok"
    for agent in ("claude", "gemini", "cursor", "opencode"):
        assert checks[f"agent:{agent}"].status == "warn"
        assert checks[f"agent:{agent}"].remedy
    assert report.exit_code == 0


def test_stage_map_and_batch_override_name_who_needs_what(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {"agent": {"verify": "gemini"}},
        fast={"agent": "opencode"},
        same={},  # overrides nothing: adds no profile
    )
    machine = FakeMachine(on_path={"git", "claude"})
    checks = by_name(run(root, machine))
    assert checks["agent:gemini"].detail == (
        "gemini is not on PATH; needed by project settings (verify)"
    )
    assert checks["agent:opencode"].detail == (
        "opencode is not on PATH; needed by batch fast (every stage)"
    )
    assert checks["agent:claude"].detail.endswith(
        "project settings (propose, apply, red, verify-red, fix, pr, decompose)"
    )
    assert "batch same" not in json.dumps(run(root, machine).to_json())


def test_a_fallback_agent_must_be_installed_too(tmp_path: Path) -> None:
    machine = FakeMachine(on_path={"git", "claude"})
    report = run(project(tmp_path, {"agent": ["claude", "codex"]}), machine)
    checks = by_name(report)
    assert checks["agent:claude"].status == "ok"
    assert checks["agent:codex"].status == "fail"
    assert checks["agent:codex"].detail == (
        "codex is not on PATH; needed by project settings (fallback for every stage)"
    )
    assert report.exit_code == 1


def test_a_stage_fallback_names_its_stage(tmp_path: Path) -> None:
    machine = FakeMachine(on_path={"git", "claude"})
    root = project(tmp_path, {"agent": {"verify": ["claude", "gemini"]}})
    checks = by_name(run(root, machine))
    assert checks["agent:gemini"].detail == (
        "gemini is not on PATH; needed by project settings (verify fallback)"
    )


def test_agent_in_docker_locus_is_only_a_warning_here(tmp_path: Path) -> None:
    machine = FakeMachine(on_path={"git"})
    checks = by_name(run(project(tmp_path, {"locus": "docker"}), machine))
    assert checks["agent:claude"].status == "warn"
    assert "docker or remote locus" in checks["agent:claude"].detail
    assert checks["docker"].status == "ok"


def test_env_agent_counts(tmp_path: Path) -> None:
    machine = FakeMachine(on_path={"git"})
    checks = by_name(run(project(tmp_path), machine, {"PAIR_AGENT": "gemini"}))
    assert checks["agent:gemini"].status == "fail"
    assert checks["agent:claude"].status == "warn"


def test_unknown_agent_fails_and_lists_the_adapters(tmp_path: Path) -> None:
    report = run(project(tmp_path, {"agent": "aider"}), FakeMachine())
    check = by_name(report)["agent:aider"]
    assert check.status == "fail"
    assert check.remedy == "use one of: claude, codex, command, cursor, gemini, opencode"
    assert report.exit_code == 1


def test_command_agent_checks_its_program(tmp_path: Path) -> None:
    root = project(tmp_path, {"agent": "command", "agentCommand": ["my-agent", "--x"]})
    present = run(root, FakeMachine(on_path={"git", "my-agent"}))
    assert by_name(present)["agent:command"].status == "ok"
    assert present.exit_code == 0
    absent = by_name(run(root, FakeMachine(on_path={"git"})))["agent:command"]
    assert absent.status == "fail"
    assert "'my-agent' is not on PATH" in absent.detail


def test_command_agent_without_agent_command_fails(tmp_path: Path) -> None:
    check = by_name(run(project(tmp_path, {"agent": "command"}), FakeMachine()))["agent:command"]
    assert check.status == "fail"
    assert "agentCommand" in check.remedy


# ---------------------------------------------------------------- python, git, config


def test_old_python_fails(tmp_path: Path) -> None:
    report = run(project(tmp_path), FakeMachine(python=(3, 10, 14)))
    check = by_name(report)["python"]
    assert (check.status, check.detail) == ("fail", "Python 3.10.14; pairbot needs 3.11 or newer")
    assert report.exit_code == 1


def test_missing_git_fails(tmp_path: Path) -> None:
    report = run(project(tmp_path), FakeMachine(on_path=set(EVERYTHING) - {"git"}))
    assert by_name(report)["git"].status == "fail"
    assert report.exit_code == 1


def test_broken_config_fails_but_the_rest_is_still_checked(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / ".pair" / "config.yaml").write_text("batch: {locus: moon}\n")
    report = run(root, FakeMachine())
    checks = by_name(report)
    assert checks["config"].status == "fail"
    assert "moon" in checks["config"].detail
    assert checks["agent:claude"].status == "ok"
    assert report.exit_code == 1


def test_broken_manifest_fails_config_and_the_others_still_count(tmp_path: Path) -> None:
    root = project(tmp_path, good={"agent": "gemini"}, bad={})
    (root / ".pair" / "batches" / "bad" / "batch.yaml").write_text("gate: sometimes\n")
    checks = by_name(run(root, FakeMachine(on_path={"git", "claude"})))
    assert checks["config"].status == "fail"
    assert "bad" in checks["config"].detail
    assert checks["agent:gemini"].detail.endswith("needed by batch good (every stage)")


def test_bad_env_locus_fails_config(tmp_path: Path) -> None:
    checks = by_name(run(project(tmp_path), FakeMachine(), {"PAIR_LOCUS": "moon"}))
    assert checks["config"].status == "fail"
    assert "PAIR_LOCUS" in checks["config"].detail


# ---------------------------------------------------------------- docker


DOCKER_FAILURES = [
    pytest.param(
        (1, f"ERROR: {DOCKER_DOWN}\n"),
        f"no Docker engine reachable: ERROR: {DOCKER_DOWN}",
        id="down",
    ),
    pytest.param(FileNotFoundError("docker"), "docker is not on PATH", id="absent"),
    pytest.param(
        subprocess.TimeoutExpired(["docker"], 5), "`docker info` did not answer in 5 s", id="hung"
    ),
    pytest.param(
        PermissionError("denied"), "`docker info` could not start: denied", id="unrunnable"
    ),
]


@pytest.mark.parametrize(("answer", "detail"), DOCKER_FAILURES)
@pytest.mark.parametrize(
    "expect",
    [
        pytest.param(("local", "warn", 0), id="local"),
        pytest.param(("docker", "fail", 1), id="docker"),
    ],
)
def test_docker_unreachable(
    tmp_path: Path,
    answer: tuple[int, str] | BaseException,
    detail: str,
    expect: tuple[str, str, int],
) -> None:
    locus, status, code = expect
    report = run(project(tmp_path, {"locus": locus}), FakeMachine(docker=answer))
    check = by_name(report)["docker"]
    assert check.status == status
    assert check.detail.startswith(detail)
    assert check.remedy
    assert report.exit_code == code


# ---------------------------------------------------------------- remote


def remote_project(root: Path, **remote: Any) -> Path:
    return project(
        root, {"locus": "remote", "remote": {"port": 8000, "authToken": TOKEN, **remote}}
    )


@pytest.mark.parametrize(
    ("answer", "status", "detail"),
    [
        pytest.param(200, "ok", "http://127.0.0.1:8000/is_alive is alive", id="alive"),
        pytest.param(401, "fail", "HTTP 401: the server refused the token", id="bad-token"),
        pytest.param(500, "fail", "HTTP 500", id="error"),
        pytest.param(
            ConnectionRefusedError(111, "Connection refused"), "fail", "no answer", id="down"
        ),
    ],
)
def test_remote_is_alive(
    tmp_path: Path, answer: int | BaseException, status: str, detail: str
) -> None:
    url = "http://127.0.0.1:8000/is_alive"
    machine = FakeMachine(http={url: answer})
    report = run(remote_project(tmp_path, host="127.0.0.1"), machine)
    check = by_name(report)["remote:project settings"]
    assert check.status == status
    assert detail in check.detail
    assert machine.http_calls == [(url, {"X-API-Key": TOKEN}, 5.0)]
    assert report.exit_code == (0 if status == "ok" else 1)
    # The token never appears in what doctor prints.
    assert TOKEN not in render_text(report)
    assert TOKEN not in json.dumps(report.to_json())


@pytest.mark.parametrize(
    ("remote", "problem"),
    [
        pytest.param(
            {"host": "http://agents.example.com"},
            "refusing plain http:// to the non-local host",
            id="plain-http",
        ),
        pytest.param(
            {"host": "agents.example.com", "authToken": None}, "no `authToken`", id="no-token"
        ),
        pytest.param({"host": "ftp://agents.example.com"}, "has scheme 'ftp'", id="bad-scheme"),
    ],
)
def test_remote_not_probed_when_settings_forbid_it(
    tmp_path: Path, remote: dict[str, Any], problem: str
) -> None:
    if remote.get("authToken", "") is None:
        remote.pop("authToken")
        root = project(tmp_path, {"locus": "remote", "remote": {"port": 8000, **remote}})
    else:
        root = remote_project(tmp_path, **remote)
    machine = FakeMachine()
    check = by_name(run(root, machine))["remote:project settings"]
    assert check.status == "fail"
    assert problem in check.detail
    assert machine.http_calls == []


def test_locus_remote_without_remote_settings_fails(tmp_path: Path) -> None:
    check = by_name(run(project(tmp_path, {"locus": "remote"}), FakeMachine()))
    assert check["remote:project settings"].status == "fail"
    assert "needs `remote:" in check["remote:project settings"].detail


@pytest.mark.parametrize(
    ("host", "insecure", "url"),
    [
        pytest.param("agents.example.com", False, "https://agents.example.com", id="https"),
        # insecure allows an explicit http:// only; a bare host still gets https.
        pytest.param("agents.example.com", True, "https://agents.example.com", id="insecure"),
        pytest.param("localhost", False, "http://localhost", id="loopback"),
        pytest.param("::1", False, "http://[::1]", id="ipv6-loopback"),
        pytest.param(
            "https://agents.example.com", False, "https://agents.example.com", id="explicit-https"
        ),
        pytest.param("http://10.0.0.5", True, "http://10.0.0.5", id="explicit-http-insecure"),
    ],
)
def test_remote_url(host: str, insecure: bool, url: str) -> None:
    remote = RemoteSettings(host=host, port=8000, auth_token=SecretStr(TOKEN), insecure=insecure)
    target = remote_target("p", remote)
    assert (target.url, target.problem) == (f"{url}:8000/is_alive", None)
    assert TOKEN not in repr(target)


# ---------------------------------------------------------------- rendering


def test_render_text_puts_a_remedy_under_each_problem(tmp_path: Path) -> None:
    report = run(project(tmp_path), FakeMachine(on_path={"git", "claude"}, docker=(1, "")))
    text = render_text(report)
    lines = text.splitlines()
    docker = next(i for i, line in enumerate(lines) if line.startswith("warn  docker"))
    assert "→ start the Docker engine" in lines[docker + 1]
    assert lines[-1] == "doctor: ready (8 ok, 7 warn, 0 fail)"


# ---------------------------------------------------------------- the real probes


class _Handler(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []  # noqa: RUF012  # reset by the `loopback` fixture

    def do_GET(self) -> None:
        type(self).seen.append((self.path, self.headers.get("X-API-Key")))
        if self.path == "/is_alive":
            self.send_response(200)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
        else:
            self.send_response(404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def loopback() -> Iterator[str]:
    _Handler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_get_sends_the_key_and_follows_no_redirect(loopback: str) -> None:
    assert http_get(f"{loopback}/is_alive", {"X-API-Key": TOKEN}, 5) == 200
    assert http_get(f"{loopback}/moved", {"X-API-Key": TOKEN}, 5) == 302
    assert http_get(f"{loopback}/nope", {}, 5) == 404
    assert _Handler.seen == [("/is_alive", TOKEN), ("/moved", TOKEN), ("/nope", None)]


def test_http_get_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="not an http"):
        http_get("file:///etc/passwd", {}, 5)


def test_run_command_reports_exit_code_and_stderr() -> None:
    code, stderr = run_command(
        [sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], 5
    )
    assert (code, stderr) == (3, "boom")


def test_cli_doctor_json(make_project: Callable[..., Project]) -> None:
    project_ = make_project()
    done = cli("doctor", "--json", cwd=project_.root)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    checks = {check["name"]: check for check in report["checks"]}
    assert report["ok"] is True
    assert {"config", "python", "git", "agent:claude", "agent:command", "docker"} <= set(checks)
    assert checks["agent:command"]["status"] == "ok"
    assert checks["python"]["status"] == "ok"
    assert checks["docker"]["status"] in ("ok", "warn")
    assert all(set(check) == {"name", "status", "detail", "remedy"} for check in checks.values())


def test_cli_doctor_text_fails_for_a_missing_configured_agent(
    make_project: Callable[..., Project],
) -> None:
    project_ = make_project(config={"batch": {"agent": "command", "agentCommand": ["no-such-x"]}})
    done = cli("doctor", cwd=project_.root)
    assert done.returncode == 1
    assert "fail  agent:command" in done.stdout
    assert done.stdout.rstrip().endswith("fail)")


# ---------------------------------------------------------------- agent versions


def test_an_other_version_is_a_warning_naming_both(tmp_path: Path) -> None:
    machine = FakeMachine(versions={"codex": "0.150.0", "gemini": None, "cursor-agent": "2026.01"})
    report = run(project(tmp_path), machine)
    checks = by_name(report)
    assert report.exit_code == 0
    assert checks["agent:codex"].status == "warn"
    assert checks["agent:codex"].detail.startswith(
        "codex at /bin/codex (0.150.0, pairbot supports 0.171.0)"
    )
    assert checks["agent:codex"].remedy == (
        "its flags may differ: npm install -g @openai/codex@0.171.0"
    )
    assert checks["agent:gemini"].status == "warn"
    assert "version unknown (pairbot supports 0.61.0)" in checks["agent:gemini"].detail
    assert checks["agent:cursor"].status == "ok"
    assert "(2026.01, untested (no supported version))" in checks["agent:cursor"].detail
    assert checks["agent:claude"].status == "ok"
    assert ["/bin/claude", "--version"] in machine.version_calls


def test_a_missing_agent_is_not_asked_its_version(tmp_path: Path) -> None:
    machine = FakeMachine(on_path={"git"})
    run(project(tmp_path), machine)
    assert machine.version_calls == []


def test_agent_version_reads_a_real_programs_output(tmp_path: Path) -> None:
    script = tmp_path / "fake-cli"
    script.write_text("#!/bin/sh\necho 'codex-cli 0.171.0'\n")
    script.chmod(0o755)
    assert agent_version([str(script), "--version"], 10) == "0.171.0"
    quiet = tmp_path / "quiet-cli"
    quiet.write_text("#!/bin/sh\necho 'no version here' >&2\nexit 3\n")
    quiet.chmod(0o755)
    assert agent_version([str(quiet)], 10) is None
    assert agent_version([str(tmp_path / "absent")], 10) is None


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("2.1.332 (Claude Code)", "2.1.332"),
        ("codex-cli 0.171.0", "0.171.0"),
        ("0.61.0\n", "0.61.0"),
        ("2026.01.17-d239e66", "2026.01.17-d239e66"),
        ("no digits", None),
    ],
)
def test_parse_version(output: str, expected: str | None) -> None:
    assert parse_version(output) == expected


# ---------------------------------------------------------------- who the agent runs as


def iso_checks(report: Report) -> dict[str, Check]:
    return {c.name: c for c in report.checks if c.name.startswith(("isolation", "reach:"))}


@pytest.mark.parametrize(
    ("host", "env", "status", "detail"),
    [
        pytest.param(
            ROOT_HOST,
            {},
            "ok",
            "run as pairbot-agent (uid 999) via setpriv (pairbot is root), each step in a PID "
            "namespace of its own",
            id="root-setpriv",
        ),
        pytest.param(
            HostFacts(euid=0, sudo=False, setpriv=False, runuser=True, pidns=True),
            {},
            "ok",
            "via runuser (pairbot is root)",
            id="root-runuser",
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=True, setpriv=True, runuser=True, pidns=True),
            {},
            "ok",
            "via sudo -n -u pairbot-agent, each step in a PID namespace",
            id="runner-sudo",
        ),
        pytest.param(
            HostFacts(euid=0, sudo=False, setpriv=True, runuser=True, pidns=False),
            {},
            "ok",
            "without a PID namespace (see isolation:namespace)",
            id="root-no-namespace",
        ),
        pytest.param(
            ROOT_HOST,
            {"PAIR_AGENT_USER": "ci-agent"},
            "ok",
            "ci-agent (not created yet: pairbot creates it with `useradd --system`",
            id="user-not-created",
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=False, setpriv=True, runuser=True),
            {},
            "warn",
            "it runs as pairbot's own OS user (not root and no passwordless sudo)",
            id="plain-user",
        ),
        pytest.param(
            ROOT_HOST,
            {"PAIR_ISOLATION": "off"},
            "warn",
            "PAIR_ISOLATION=off: local agents run as pairbot's own user (uid 0)",
            id="off",
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=False, setpriv=True, runuser=True),
            {"PAIR_ISOLATION": "required"},
            "fail",
            "PAIR_ISOLATION=required, but the agent cannot run as pairbot-agent",
            id="required-refused",
        ),
        pytest.param(
            ROOT_HOST,
            {"PAIR_ISOLATION": "maybe"},
            "fail",
            "PAIR_ISOLATION='maybe' is not a setting",
            id="bad-setting",
        ),
    ],
)
def test_isolation_says_who_the_agent_runs_as(
    tmp_path: Path, host: HostFacts, env: dict[str, str], status: str, detail: str
) -> None:
    report = run(project(tmp_path), FakeMachine(host=host), env)
    check = by_name(report)["isolation"]
    assert check.status == status
    assert detail in check.detail
    assert report.exit_code == (1 if status == "fail" else 0)
    if status != "ok":
        assert check.remedy
        # Nothing runs as another user: there is nothing to reach for it.
        assert not any(name.startswith("reach:") for name in iso_checks(report))


HOME = "/home/runner"
VENV_IN_ROOT = "/root/.venv/bin/python"


@pytest.mark.parametrize(
    ("machine", "name", "status", "says"),
    [
        pytest.param(
            FakeMachine(
                executable=VENV_IN_ROOT,
                ways={VENV_IN_ROOT: way(VENV_IN_ROOT, {"/root": 0o40700})},
            ),
            "reach:pairbot",
            "fail",
            (
                "pairbot-agent cannot run /root/.venv/bin/python: /root (drwx------ 0:0) is closed "
                "to it, so `pairbot batch report` fails in every isolated agent step",
                "install pairbot where every user can reach it (a venv under /opt or /usr/local), "
                "or open the way: chmod o+x /root (or setfacl -m u:pairbot-agent:x /root)",
            ),
            id="pairbot-under-root",
        ),
        pytest.param(
            FakeMachine(
                ways={"/opt/pairbot/bin/pairbot": way("/opt/pairbot/bin/pairbot", mode=0o100700)}
            ),
            "reach:pairbot",
            "fail",
            (
                "/opt/pairbot/bin/pairbot (-rwx------ 0:0) is not executable by it",
                "or chmod o+x /opt/pairbot/bin/pairbot",
            ),
            id="console-script-private",
        ),
        pytest.param(
            FakeMachine(
                ways={
                    "/opt/pairbot/lib/app": way("/opt/pairbot/lib/app", mode=0o40700),
                }
            ),
            "reach:pairbot",
            "fail",
            (
                "/opt/pairbot/lib/app (drwx------ 0:0) is not readable by it",
                "chmod o+r /opt/pairbot/lib/app",
            ),
            id="package-private",
        ),
        pytest.param(
            FakeMachine(
                ways={"/opt/pairbot/bin/pairbot": reach.Trace("/opt/pairbot/bin/pairbot", (), None)}
            ),
            "reach:pairbot",
            "warn",
            ("but there is no /opt/pairbot/bin/pairbot", "install pairbot with pip"),
            id="no-console-script",
        ),
        pytest.param(
            FakeMachine(
                ways={
                    "/opt/pairbot/bin/pairbot": way(
                        "/opt/pairbot/bin/pairbot", shebang=("/opt/pairbot/bin/python",)
                    ),
                    "/opt/pairbot/bin/python": reach.Trace(
                        "/opt/pairbot/bin/python",
                        way("/usr/bin/python3.11").dirs,
                        way("/usr/bin/python3.11").target,
                    ),
                }
            ),
            "reach:pairbot",
            "ok",
            (
                "pairbot-agent can run /opt/pairbot/bin/pairbot, /opt/pairbot/bin/python "
                "(→ /usr/bin/python3.11); and read /opt/pairbot/lib/app",
                "",
            ),
            id="venv-symlink-ok",
        ),
        pytest.param(
            FakeMachine(
                on_path=EVERYTHING | {"node"},
                ways={
                    "/bin/claude": way("/bin/claude", shebang=("/usr/bin/env", "node")),
                    "/bin/node": way("/bin/node", mode=0o100700),
                },
            ),
            "reach:claude",
            "fail",
            (
                "pairbot-agent cannot run /bin/node (the interpreter of /bin/claude): /bin/node "
                "(-rwx------ 0:0) is not executable by it, so every isolated step with it fails",
                "chmod o+x /bin/node",
            ),
            id="agent-interpreter-private",
        ),
        pytest.param(
            FakeMachine(
                ways={"/bin/claude": way("/bin/claude", mode=0o100711, shebang=("/bin/sh",))}
            ),
            "reach:claude",
            "fail",
            ("/bin/claude (-rwx--x--x 0:0) is not readable by it", "chmod o+r /bin/claude"),
            id="agent-script-unreadable",
        ),
        pytest.param(
            FakeMachine(ways={"/bin/claude": way("/bin/claude", {"/bin": 0o40750})}),
            "reach:claude",
            "fail",
            (
                "/bin (drwxr-x--- 0:0) is closed to it",
                "install it where every user can reach it (/usr/local, /opt), or open the way",
            ),
            id="agent-dir-closed",
        ),
        pytest.param(
            FakeMachine(
                agent=reach.Who("pairbot-agent", None),
                ways={"/bin/claude": way("/bin/claude", mode=0o100750, gid=995)},
            ),
            "reach:claude",
            "fail",
            ("is not executable by it", "chmod o+x /bin/claude"),
            id="user-not-created-gets-other-bits",
        ),
        pytest.param(
            FakeMachine(ways={"/bin/claude": way("/bin/claude", mode=0o100750, gid=995)}),
            "reach:claude",
            "ok",
            ("pairbot-agent can run /bin/claude", ""),
            id="through-its-group",
        ),
    ],
)
def test_reach_names_what_the_agent_user_cannot_run(
    tmp_path: Path, machine: FakeMachine, name: str, status: str, says: tuple[str, str]
) -> None:
    detail, remedy = says
    report = run(project(tmp_path), machine)
    check = by_name(report)[name]
    assert check.status == status, check
    assert detail in check.detail
    assert remedy in check.remedy
    assert report.exit_code == (1 if status == "fail" else 0)
    verdict = render_text(report).splitlines()[-1]
    assert verdict.startswith("doctor: not ready" if status == "fail" else "doctor: ready")


@pytest.mark.parametrize(
    ("tools", "status", "detail", "remedy"),
    [
        pytest.param(
            TOOLS,
            "ok",
            "(drwxr-x--- 0:0) closed to other users; each step lets pairbot-agent through with "
            "`setfacl -m u:pairbot-agent:x` (search only)",
            "",
            id="closed-setfacl",
        ),
        pytest.param(
            TOOLS - {"setfacl"},
            "fail",
            "(drwxr-x--- 0:0) closed to other users and setfacl is not installed, so every "
            "isolated step fails",
            "install acl (apt-get install acl), or chmod o+x ",
            id="closed-no-setfacl",
        ),
    ],
)
def test_a_closed_workspace_parent_needs_setfacl(
    tmp_path: Path, tools: set[str], status: str, detail: str, remedy: str
) -> None:
    root = project(tmp_path)
    closed = str(root.parent)
    machine = FakeMachine(
        on_path=(EVERYTHING - TOOLS) | tools,
        ways={str(root): way(str(root), {closed: 0o40750}, mode=0o40755)},
    )
    report = run(root, machine)
    check = by_name(report)["reach:workspace"]
    assert check.status == status
    assert f"{closed} {detail}" in check.detail
    assert f"{remedy}{closed}" in check.remedy if remedy else not check.remedy
    assert report.exit_code == (1 if status == "fail" else 0)


def test_what_a_step_opens_for_the_workspace_is_open_for_pairbot_too(tmp_path: Path) -> None:
    # A runner: HOME 0750 holds both the checkout and pairbot's venv.
    root = project(tmp_path / "home" / "work")
    home = str(tmp_path / "home")
    python = f"{home}/venv/bin/python"
    ways = {
        str(root): way(str(root), {home: 0o40750}, mode=0o40755),
        python: way(python, {home: 0o40750}),
        f"{home}/venv/bin/pairbot": way(f"{home}/venv/bin/pairbot", {home: 0o40750}),
    }
    opened = run(root, FakeMachine(executable=python, ways=ways))
    check = by_name(opened)["reach:pairbot"]
    assert check.status == "ok"
    assert f"through {home} (which each step opens to it with setfacl)" in check.detail
    shut = run(root, FakeMachine(executable=python, ways=ways, on_path=EVERYTHING - {"setfacl"}))
    assert by_name(shut)["reach:pairbot"].status == "fail"
    assert by_name(shut)["reach:workspace"].status == "fail"


@pytest.mark.parametrize(
    ("host", "tools", "status", "detail"),
    [
        pytest.param(
            ROOT_HOST,
            TOOLS,
            "ok",
            "`unshare --pid --fork --mount-proc --kill-child true` works as root",
            id="root",
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=True, setpriv=True, runuser=True, pidns=True),
            TOOLS | {"sudo"},
            "ok",
            "works under sudo -n",
            id="sudo",
        ),
        pytest.param(
            HostFacts(euid=0, sudo=False, setpriv=True, runuser=True, pidns=False),
            TOOLS,
            "warn",
            "`unshare --pid --fork --mount-proc --kill-child true` fails as root: a process a "
            "step detaches can outlive it",
            id="forbidden",
        ),
        pytest.param(
            ROOT_HOST, TOOLS - {"unshare"}, "warn", "unshare is not installed", id="absent"
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=False, setpriv=True, runuser=True, userns=True),
            TOOLS,
            "ok",
            "through a user namespace",
            id="user-namespace",
        ),
    ],
)
def test_namespace_is_reported_as_a_fact(
    tmp_path: Path, host: HostFacts, tools: set[str], status: str, detail: str
) -> None:
    machine = FakeMachine(host=host, on_path=(EVERYTHING - TOOLS) | tools)
    report = run(project(tmp_path), machine)
    check = by_name(report)["isolation:namespace"]
    assert (check.status, detail in check.detail) == (status, True), check
    assert report.to_json()["isolation"]["unshare_works"] is host.pidns


@pytest.mark.parametrize(
    ("host", "tools", "missing"),
    [
        pytest.param(ROOT_HOST, TOOLS, None, id="root-complete"),
        pytest.param(
            ROOT_HOST, {"unshare"}, "setpriv or runuser (util-linux), setfacl (acl)", id="root-bare"
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=False, setpriv=True, runuser=True),
            TOOLS,
            "sudo (package sudo)",
            id="user-no-sudo",
        ),
        pytest.param(
            HostFacts(euid=1001, sudo=False, setpriv=True, runuser=True),
            TOOLS | {"sudo"},
            "passwordless sudo (package sudo; `sudo -n true` must succeed)",
            id="user-sudo-asks-password",
        ),
    ],
)
def test_tools_name_what_is_missing(
    tmp_path: Path, host: HostFacts, tools: set[str], missing: str | None
) -> None:
    machine = FakeMachine(host=host, on_path=(EVERYTHING - TOOLS) | tools)
    check = by_name(run(project(tmp_path), machine))["isolation:tools"]
    if missing is None:
        assert check.status == "ok"
    else:
        assert check.status == "warn"
        assert check.detail.endswith(f"missing: {missing}")
        assert "apt-get install" in check.remedy


def test_docker_and_remote_loci_name_their_boundary(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8000/is_alive"
    root = project(
        tmp_path,
        {"locus": "docker"},
        far={"locus": "remote", "remote": {"host": "127.0.0.1", "port": 8000, "authToken": TOKEN}},
    )
    report = run(root, FakeMachine(http={url: 200}))
    checks = by_name(report)
    assert "agents run in a docker container" in checks["isolation:project settings"].detail
    assert f"swerex-remote server {url}" in checks["isolation:batch far"].detail
    # No agent runs locally: pairbot's own reach is not needed, the workspace's still is
    # (project commands run here).
    assert "reach:pairbot" not in checks
    assert checks["reach:workspace"].status == "ok"
    summary = report.to_json()["isolation"]
    assert summary["elsewhere"] == {
        "project settings": "docker container",
        "batch far": f"remote server {url}",
    }
    assert TOKEN not in json.dumps(report.to_json())


def test_json_says_who_and_how(tmp_path: Path) -> None:
    report = run(project(tmp_path), FakeMachine())
    summary = report.to_json()["isolation"]
    assert summary["local"] == {
        "runs_as": "pairbot-agent",
        "uid": 999,
        "exists": True,
        "via": "setpriv",
        "pid_namespace": True,
    }
    assert summary["tools"]["setfacl"] == "/bin/setfacl"
    assert summary["tools"]["sudo"] is None


# ---------------------------------------------------------------- as root, on this machine


as_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setfacl") is None or shutil.which("setpriv") is None,
    reason="needs root, setfacl and setpriv (the agent user is real here)",
)


def agent_runs(program: str) -> bool:
    """Whether the kernel lets a process of the agent user run `program`, as the agent runs
    `pairbot batch report`: the truth doctor must predict. Through a shell, because setpriv
    starts the program it is handed even through a directory closed to the user (seen with
    util-linux 2.38); what the agent starts itself gets no such pass."""
    done = subprocess.run(
        [
            *Switch(DEFAULT_AGENT_USER, "setpriv").argv(),
            "/bin/sh",
            "-c",
            'exec "$0" -c pass',
            program,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


@as_root
def test_as_root_doctor_predicts_what_the_agent_user_can_run(tmp_path: Path) -> None:
    account = AgentAccount(Switch(DEFAULT_AGENT_USER, "setpriv"))
    account.ensure()
    root = project(tmp_path / "work")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    python = private / "python"
    python.symlink_to(os.path.realpath(sys.executable))

    report = diagnose(root, {}, Probes(executable=str(python)))
    check = by_name(report)["reach:pairbot"]
    assert check.status == "fail"
    assert f"{private} (drwx------ 0:0) is closed to it" in check.detail
    assert report.exit_code == 1
    assert not agent_runs(str(python))
    # The workspace sits under pytest's 0700 directories: each step opens them with setfacl.
    assert by_name(report)["reach:workspace"].status == "ok"

    subprocess.run(["setfacl", "-m", f"u:{DEFAULT_AGENT_USER}:x", str(private)], check=True)
    opened = by_name(diagnose(root, {}, Probes(executable=str(python))))["reach:pairbot"]
    # Reachable now; it warns only that no `pairbot` script sits beside this bare interpreter.
    assert opened.status == "warn", opened
    assert opened.detail.startswith(f"{DEFAULT_AGENT_USER} can run {python} (→ ")
    # pytest's 0700 directories above both are what a step opens for the workspace: open them
    # as a step does, then the kernel agrees.
    assert "which each step opens to it with setfacl" in opened.detail
    account.open_way([root])
    assert agent_runs(str(python))


@as_root
@pytest.mark.skipif(
    not Path("/work/main/.venv/bin/python").exists(), reason="this machine's shared venv"
)
def test_as_root_the_shared_venv_interpreter_is_reported_executable(tmp_path: Path) -> None:
    AgentAccount(Switch(DEFAULT_AGENT_USER, "setpriv")).ensure()
    venv = "/work/main/.venv/bin/python"
    report = diagnose(project(tmp_path), {}, Probes(executable=venv))
    check = by_name(report)["reach:pairbot"]
    assert check.status == "ok", check
    assert f"{venv} (→ {os.path.realpath(venv)})" in check.detail
    assert agent_runs(venv)
    # /root is 0700: what lives there is reported out of the agent's reach.
    assert reach.blocked(reach.account(DEFAULT_AGENT_USER), reach.trace("/root"), reach.SEARCH)
