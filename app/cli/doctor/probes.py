"""`pairbot doctor`, the shell: what this machine has, each look through an injected callable.

    gather(needs, probes, root, env) -> Facts   PATH look-ups, every agent binary's version,
                                                `docker info`, `GET /is_alive` on each remote
                                                server, and the isolation facts (the setting,
                                                the host, the agent user, a trace of every
                                                program and directory it must reach)

Tests pass fake `Probes`. The remote token is sent as `X-API-Key` and never printed; the probe
follows no redirect, so the header cannot be forwarded to another host. Nothing is run as the
agent user: the traces are stat calls.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import SecretStr

from app.cli.doctor.model import ISOLATION_TOOLS, Facts, Isolation, Needs, Outcome
from app.errors import UserError
from app.runtime import isolation, reach
from app.runtime.adapters import AGENT_BINARIES
from app.runtime.supported import SUPPORTED, parse_version

PROBE_TIMEOUT_S: Final = 5.0
VERSION_TIMEOUT_S: Final = 10.0  # a node CLI's cold start on a busy machine
# The directory of pairbot's own package, which `pairbot batch report` imports as the agent.
PAIRBOT_PACKAGE: Final = str(Path(__file__).resolve().parents[2])

Which = Callable[[str], str | None]
RunResult = tuple[int, str]
Run = Callable[[Sequence[str], float], RunResult]
"""Run argv with a timeout: (exit code, stderr). Raises OSError or subprocess.TimeoutExpired."""
HttpGet = Callable[[str, Mapping[str, str], float], int]
"""GET a URL with headers and a timeout: the HTTP status. Raises OSError when nothing answers."""
Version = Callable[[Sequence[str], float], str | None]
"""Run a CLI's version command with a timeout: the version it printed, or None. Never raises."""


def _which(name: str) -> str | None:
    return shutil.which(name)


def run_command(argv: Sequence[str], timeout: float) -> RunResult:
    """Run `argv` quietly; (exit code, stderr)."""
    completed = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, check=False
    )
    return completed.returncode, completed.stderr


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry X-API-Key to wherever it points; answer with the 3xx instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def http_get(url: str, headers: Mapping[str, str], timeout: float) -> int:
    """GET `url` (http or https only), following no redirect; the HTTP status."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url}")
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, headers=dict(headers), method="GET")  # noqa: S310  # scheme checked above
    try:
        with opener.open(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code


def agent_version(argv: Sequence[str], timeout: float) -> str | None:
    """The version `argv` (a CLI's version command) prints, or None if it prints none."""
    try:
        completed = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(completed.stdout) or parse_version(completed.stderr)


@dataclass(frozen=True)
class Probes:
    """How doctor looks at the machine; tests pass fakes."""

    which: Which = _which
    run: Run = run_command
    http_get: HttpGet = http_get
    version: Version = agent_version
    python: tuple[int, int, int] = (
        sys.version_info.major,
        sys.version_info.minor,
        sys.version_info.micro,
    )
    # Who the agent runs as: this machine's facts, the agent user, and the way to each file.
    host: Callable[[], isolation.HostFacts] = isolation.probe_host
    account: Callable[[str], reach.Who] = reach.account
    trace: Callable[[str], reach.Trace] = reach.trace
    # Unresolved: the agent's PATH names this directory (app/engine/step.py).
    executable: str = sys.executable
    package: str = PAIRBOT_PACKAGE


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _probe_docker(run: Run) -> Outcome:
    try:
        code, stderr = run(["docker", "info", "--format", "{{.ServerVersion}}"], PROBE_TIMEOUT_S)
    except FileNotFoundError:
        return Outcome(ok=False, detail="docker is not on PATH")
    except subprocess.TimeoutExpired:
        return Outcome(ok=False, detail=f"`docker info` did not answer in {PROBE_TIMEOUT_S:g} s")
    except OSError as err:
        return Outcome(ok=False, detail=f"`docker info` could not start: {err}")
    if code != 0:
        reason = _last_line(stderr) or f"exit {code}"
        return Outcome(ok=False, detail=f"no Docker engine reachable: {reason}")
    return Outcome(ok=True, detail="Docker engine reachable")


def _probe_remote(url: str, token: SecretStr, get: HttpGet) -> Outcome:
    try:
        status = get(url, {"X-API-Key": token.get_secret_value()}, PROBE_TIMEOUT_S)
    except (OSError, ValueError) as err:
        # URLError's reason names the host and the socket error, never the request headers.
        reason = getattr(err, "reason", None) or err
        return Outcome(ok=False, detail=f"no answer ({reason})")
    if status == 200:
        return Outcome(ok=True, detail="alive")
    if status in (401, 403):
        return Outcome(ok=False, detail=f"HTTP {status}: the server refused the token")
    return Outcome(ok=False, detail=f"HTTP {status}")


def _gather_isolation(
    root: Path,
    env: Mapping[str, str],
    needs: Needs,
    probes: Probes,
    on_path: dict[str, str | None],
) -> Isolation:
    """The isolation facts: the setting, the host, the agent user, and a trace of every program
    a local agent step starts (following `#!` interpreters and what `env` runs) and of the
    workspace. Stat calls only: nothing is run as the agent user."""
    setting: tuple[isolation.Setting, str] | str
    try:
        setting = isolation.parse_setting(env)
    except UserError as err:
        setting = str(err)
    user = setting[1] if isinstance(setting, tuple) else isolation.DEFAULT_AGENT_USER
    script = str(Path(probes.executable).parent / "pairbot")
    programs = [probes.executable, script]
    for agent in needs.local_agents:
        binary = AGENT_BINARIES.get(agent)
        path = on_path.get(binary) if binary is not None else None
        programs += [path] if path is not None else []
    programs += [path for name in needs.commands if (path := on_path.get(name)) is not None]
    ways: dict[str, reach.Trace] = {}
    while programs:
        path = programs.pop(0)
        if path in ways:
            continue
        way = ways[path] = probes.trace(path)
        if way.shebang is None:
            continue
        programs.append(way.shebang[0])
        if Path(way.shebang[0]).name == "env":
            name = next((w for w in way.shebang[1:] if not w.startswith("-")), None)
            if name is not None and name not in on_path:
                on_path[name] = probes.which(name)
            found = on_path.get(name) if name is not None else None
            programs += [found] if found is not None else []
    for directory in (probes.package, str(root)):
        ways[directory] = probes.trace(directory)
    return Isolation(
        setting=setting,
        host=probes.host(),
        who=probes.account(user),
        executable=probes.executable,
        script=script,
        package=probes.package,
        workspace=str(root),
        ways=ways,
    )


def gather(
    needs: Needs, probes: Probes, root: Path | None = None, env: Mapping[str, str] | None = None
) -> Facts:
    """Probe everything `needs` may refer to, plus every registered agent binary and git, and,
    given the project `root` and pairbot's `env`, who a local agent runs as."""
    names = dict.fromkeys(["git", *AGENT_BINARIES.values(), *needs.commands, *ISOLATION_TOOLS])
    remotes = {
        target.url: _probe_remote(target.url, target.token, probes.http_get)
        for target in needs.remotes
        if target.url is not None and target.token is not None
    }
    on_path = {name: probes.which(name) for name in names}
    versions: dict[str, str | None] = {}
    for agent, binary in AGENT_BINARIES.items():
        path = on_path.get(binary)
        if path is not None:
            argv = [path, *SUPPORTED[agent].version_args]
            versions[agent] = probes.version(argv, VERSION_TIMEOUT_S)
    iso = None if root is None else _gather_isolation(root, env or {}, needs, probes, on_path)
    return Facts(
        python=probes.python,
        on_path=on_path,
        versions=versions,
        docker=_probe_docker(probes.run),
        remotes=remotes,
        isolation=iso,
    )
