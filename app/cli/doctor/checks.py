"""`pairbot doctor`, pure: one `Check` per thing the settings need, from what the probes found.

    build_checks(needs, facts) -> (Check, …)   Python, git, every agent binary (its version
                                               against `app.runtime.supported`), the
                                               agentCommand program, Docker, each remote
                                               server, then who the agent runs as
                                               (`isolation_checks`)

A check fails only when something the configured settings need is missing or unreachable;
everything else that is missing is a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from app.cli.doctor.isolation_checks import isolation_checks
from app.cli.doctor.model import Check, CheckStatus, Facts, Needs, Outcome, RemoteTarget
from app.runtime.adapters import ADAPTERS, AGENT_BINARIES
from app.runtime.supported import SUPPORTED

MIN_PYTHON: Final = (3, 11)

INSTALL_HINTS: Final[Mapping[str, str]] = {
    "claude": "install Claude Code: npm install -g {pin}",
    "codex": "install Codex CLI: npm install -g {pin}",
    "gemini": "install Gemini CLI: npm install -g {pin}",
    "cursor": "install Cursor CLI: curl https://cursor.com/install -fsS | bash",
    "opencode": "install opencode: npm install -g {pin}",
}
"""Per agent; `{pin}` is the npm package at its supported version (app.runtime.supported)."""


def install_hint(agent: str) -> str:
    """How to install `agent`'s CLI, at the supported version where there is one."""
    supported = SUPPORTED[agent]
    return INSTALL_HINTS[agent].format(pin=f"{supported.package}@{supported.version}")


def _version_note(agent: str, version: str | None) -> tuple[CheckStatus, str, str]:
    """(status, the version part of the detail, a remedy) for an installed agent binary."""
    supported = SUPPORTED[agent]
    if supported.version is None:
        shown = version or "version unknown"
        return "ok", f"{shown}, untested (no supported version)", ""
    install = install_hint(agent).split(": ", 1)[1]
    if version is None:
        return (
            "warn",
            f"version unknown (pairbot supports {supported.version})",
            f"check `{AGENT_BINARIES[agent]} --version`, or {install}",
        )
    if version != supported.version:
        return (
            "warn",
            f"{version}, pairbot supports {supported.version}",
            f"its flags may differ: {install}",
        )
    return "ok", f"{version}, supported", ""


def _agent_check(
    agent: str, binary: str, needs: Needs, path: str | None, version: str | None
) -> Check:
    name = f"agent:{agent}"
    local = needs.local_agents.get(agent, ())
    elsewhere = needs.elsewhere_agents.get(agent, ())
    if path is not None:
        used = "; ".join(local) if local else "not used by the local settings"
        status, note, remedy = _version_note(agent, version)
        return Check(name, status, f"{binary} at {path} ({note}) — {used}", remedy)
    remedy = install_hint(agent)
    if local:
        return Check(
            name,
            "fail",
            f"{binary} is not on PATH; needed by {'; '.join(local)}",
            f"{remedy}, or choose another agent (`agent:` in .pair/config.yaml `batch:`)",
        )
    if elsewhere:
        return Check(
            name,
            "warn",
            f"{binary} is not on this machine's PATH; {'; '.join(elsewhere)} run it in a "
            "docker or remote locus, which doctor cannot see into",
            f"make sure the image or remote server has {binary}",
        )
    return Check(name, "warn", f"{binary} is not on PATH (not configured)", remedy)


def _remote_check(target: RemoteTarget, facts: Facts) -> Check:
    name = f"remote:{target.who}"
    if target.url is None:
        return Check(
            name,
            "fail",
            f"{target.who} uses locus remote: {target.problem}",
            "set `remote: {host, port, authToken}` in .pair/config.yaml `batch:` "
            "(host with http:// needs `insecure: true` unless it is loopback)",
        )
    outcome = facts.remotes.get(target.url, Outcome(ok=False, detail="not probed"))
    if outcome.ok:
        return Check(name, "ok", f"{target.url} is alive ({target.who})")
    return Check(
        name,
        "fail",
        f"{target.url}: {outcome.detail} ({target.who})",
        "start swerex-remote there with the same token (`swerex-remote --auth-token …`) and "
        "check `remote.host`, `remote.port` and `remote.authToken`",
    )


def _python_check(python: tuple[int, int, int]) -> Check:
    version = ".".join(str(part) for part in python)
    if python[:2] >= MIN_PYTHON:
        return Check("python", "ok", f"Python {version}")
    minimum = ".".join(str(part) for part in MIN_PYTHON)
    return Check(
        "python",
        "fail",
        f"Python {version}; pairbot needs {minimum} or newer",
        f"install Python {minimum}+ and reinstall pairbot with it",
    )


def _git_check(git: str | None) -> Check:
    if git is not None:
        return Check("git", "ok", f"git at {git}")
    return Check(
        "git", "fail", "git is not on PATH; every step needs it", "install git (git-scm.com)"
    )


def _command_checks(needs: Needs, on_path: Mapping[str, str | None]) -> list[Check]:
    """The `command` agent: an `agentCommand` where it is used, its program on PATH."""
    checks = [
        Check(
            "agent:command",
            "fail",
            f"{who} uses agent 'command' without `agentCommand`",
            "set `agentCommand: [program, arg, …]` in .pair/config.yaml `batch:` or the "
            "batch's `settings:`",
        )
        for who in needs.missing_command
    ]
    for program, needed_by in needs.commands.items():
        path = on_path.get(program)
        users = "; ".join(needed_by)
        checks.append(
            Check("agent:command", "ok", f"{program} at {path} — {users}")
            if path is not None
            else Check(
                "agent:command",
                "fail",
                f"agentCommand program {program!r} is not on PATH; needed by {users}",
                "fix `agentCommand` (an absolute path, or a program on PATH)",
            )
        )
    return checks


def _unknown_agent_checks(needs: Needs) -> list[Check]:
    """An agent name no adapter serves fails, naming who configured it."""
    known = set(ADAPTERS)
    checks: list[Check] = []
    for agent in dict.fromkeys([*needs.local_agents, *needs.elsewhere_agents]):
        if agent not in known:
            users = "; ".join(
                (*needs.local_agents.get(agent, ()), *needs.elsewhere_agents.get(agent, ()))
            )
            checks.append(
                Check(
                    f"agent:{agent}",
                    "fail",
                    f"unknown agent {agent!r} in {users}",
                    f"use one of: {', '.join(sorted(known))}",
                )
            )
    return checks


def _docker_check(needs: Needs, docker: Outcome) -> Check:
    if docker.ok:
        return Check("docker", "ok", docker.detail)
    if needs.docker:
        return Check(
            "docker",
            "fail",
            f"{docker.detail}; needed by {'; '.join(needs.docker)} (locus docker)",
            "start the Docker engine (or install Docker) and check `docker info`",
        )
    return Check(
        "docker",
        "warn",
        f"{docker.detail} (only locus docker needs it)",
        "start the Docker engine (or install Docker) before using locus docker",
    )


def build_checks(needs: Needs, facts: Facts) -> tuple[Check, ...]:
    """Every check, from what the settings need and what the probes found."""
    agents = [
        _agent_check(agent, binary, needs, facts.on_path.get(binary), facts.versions.get(agent))
        for agent, binary in AGENT_BINARIES.items()
    ]
    return (
        _python_check(facts.python),
        _git_check(facts.on_path.get("git")),
        *agents,
        *_command_checks(needs, facts.on_path),
        *_unknown_agent_checks(needs),
        _docker_check(needs, facts.docker),
        *(_remote_check(target, facts) for target in needs.remotes),
        *isolation_checks(needs, facts),
    )
