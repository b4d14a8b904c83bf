"""`pairbot doctor`: is this machine ready to run the agents the project is configured for?

Three layers, so the decisions are testable without this machine having any agent installed:

    plan(profiles)              pure: what the resolved settings need (agents per locus, the
                                agentCommand binary, a Docker engine, remote servers)
    gather(needs, probes)       the shell: PATH look-ups, `docker info`, `GET /is_alive`, each
                                through an injected callable (`Probes`)
    build_checks(needs, facts)  pure: one `Check` per item, ok / warn / fail with a remedy

A check fails only when something the configured settings need is missing or unreachable, so
`Report.exit_code` is 0 exactly when nothing the settings need fails. Everything else that is
missing is a warning: an agent binary nobody configured, a Docker engine when no batch uses the
docker locus, an agent that runs inside a docker or remote locus (this machine cannot see it).

Each agent binary found on PATH is asked its `--version`, which is compared with the version
pairbot supports (`app.runtime.supported`): another version is a warning naming both, since
its flags may differ from the ones the adapters were checked against.

The settings checked are the standalone ones (env > project config > defaults) plus each batch
manifest that changes them, resolved with the same cascade the engine uses. The agent binaries
come from the one registry in `app.runtime.adapters`, so doctor and the spawn cannot drift.

Who the agent runs as is the runtime's own decision (`isolation.decide` on `probe_host()` and
PAIR_ISOLATION / PAIR_AGENT_USER). When that is another OS user, `isolation_checks` asks
`app.runtime.reach` whether the user can run pairbot's interpreter and console script (which
`pairbot batch report` needs in every agent step), each configured local agent CLI (with its
`#!` interpreter) and reach the workspace, counting the directories a step opens with setfacl
(`AgentAccount.open_way`). A step that would fail every time fails its check, so doctor never
says ready then; the tools isolation uses and whether a PID namespace works are said as facts.

The remote token is sent as `X-API-Key` and never printed; the probe follows no redirect, so the
header cannot be forwarded to another host.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import SecretStr

from app.engine.manifest import PAIR_DIR, list_batches, load_manifest, load_project_config
from app.errors import UserError
from app.runtime import isolation, reach
from app.runtime.adapters import ADAPTERS, AGENT_BINARIES
from app.runtime.remote_url import RemoteUrlError, remote_base_url
from app.runtime.supported import SUPPORTED, parse_version
from app.settings import (
    AGENT_STAGES,
    BatchSettings,
    RemoteSettings,
    ResolvedSettings,
    resolve_settings,
)

__all__ = [
    "MIN_PYTHON",
    "PAIRBOT_PACKAGE",
    "PROBE_TIMEOUT_S",
    "Check",
    "CheckStatus",
    "Facts",
    "Isolation",
    "Needs",
    "Outcome",
    "Probes",
    "Profile",
    "RemoteTarget",
    "Report",
    "Version",
    "agent_version",
    "build_checks",
    "diagnose",
    "gather",
    "http_get",
    "install_hint",
    "isolation_summary",
    "load_profiles",
    "plan",
    "remote_target",
    "render_text",
    "run_command",
]

CheckStatus = Literal["ok", "warn", "fail"]

MIN_PYTHON: Final = (3, 11)
PROBE_TIMEOUT_S: Final = 5.0
VERSION_TIMEOUT_S: Final = 10.0  # a node CLI's cold start on a busy machine
# The directory of pairbot's own package, which `pairbot batch report` imports as the agent.
PAIRBOT_PACKAGE: Final = str(Path(__file__).resolve().parent.parent)
# The tools isolation uses, and the Debian package that brings each.
ISOLATION_TOOLS: Final[Mapping[str, str]] = {
    "setpriv": "util-linux",
    "runuser": "util-linux",
    "sudo": "sudo",
    "setfacl": "acl",
    "unshare": "util-linux",
}

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


Which = Callable[[str], str | None]
RunResult = tuple[int, str]
Run = Callable[[Sequence[str], float], RunResult]
"""Run argv with a timeout: (exit code, stderr). Raises OSError or subprocess.TimeoutExpired."""
HttpGet = Callable[[str, Mapping[str, str], float], int]
"""GET a URL with headers and a timeout: the HTTP status. Raises OSError when nothing answers."""
Version = Callable[[Sequence[str], float], str | None]
"""Run a CLI's version command with a timeout: the version it printed, or None. Never raises."""


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it went, and what to do about it."""

    name: str
    status: CheckStatus
    detail: str
    remedy: str = ""

    def to_json(self) -> dict[str, str]:
        """The check as a JSON object."""
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "remedy": self.remedy,
        }


@dataclass(frozen=True)
class Profile:
    """One set of resolved settings doctor checks against, and who it belongs to."""

    label: str
    settings: ResolvedSettings


@dataclass(frozen=True)
class RemoteTarget:
    """A swerex-remote server some settings run agents on; `problem` when it cannot be probed."""

    who: str
    url: str | None
    token: SecretStr | None = field(repr=False)
    problem: str | None = None


@dataclass(frozen=True)
class Needs:
    """What the configured settings need; each value lists who needs it."""

    local_agents: Mapping[str, tuple[str, ...]]
    elsewhere_agents: Mapping[str, tuple[str, ...]]
    commands: Mapping[str, tuple[str, ...]]
    missing_command: tuple[str, ...]
    docker: tuple[str, ...]
    remotes: tuple[RemoteTarget, ...]


@dataclass(frozen=True)
class Outcome:
    """The result of one probe."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class Isolation:
    """What decides who a local agent runs as, and the ways to what it must reach.

    `setting` is (PAIR_ISOLATION, PAIR_AGENT_USER) parsed, or why they were refused; `who` the
    agent user as it exists (uid None: not created yet); `ways` the trace of every program and
    directory path below, keyed by the path asked."""

    setting: tuple[isolation.Setting, str] | str
    host: isolation.HostFacts
    who: reach.Who
    executable: str  # pairbot's interpreter, as the agent's PATH names it
    script: str  # the `pairbot` console script beside it
    package: str  # pairbot's own package directory
    workspace: str  # the project root
    ways: Mapping[str, reach.Trace]


@dataclass(frozen=True)
class Facts:
    """What the probes found on this machine."""

    python: tuple[int, int, int]
    on_path: Mapping[str, str | None]
    versions: Mapping[str, str | None]  # agent -> the installed binary's version, if read
    docker: Outcome
    remotes: Mapping[str, Outcome]
    isolation: Isolation | None = None


@dataclass(frozen=True)
class Report:
    """Every check, in order, and who the agent runs as (`isolation_summary`)."""

    checks: tuple[Check, ...]
    isolation: Mapping[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        """0 when nothing the configured settings need failed, else 1."""
        return 1 if any(check.status == "fail" for check in self.checks) else 0

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object."""
        body: dict[str, Any] = {
            "ok": self.exit_code == 0,
            "checks": [c.to_json() for c in self.checks],
        }
        if self.isolation is not None:
            body["isolation"] = dict(self.isolation)
        return body


# ---------------------------------------------------------------- pure: what is needed


def remote_target(who: str, remote: RemoteSettings | None) -> RemoteTarget:
    """Where to probe `remote`, or the reason it cannot be probed.

    The scheme rules are the runtime's own (`app.runtime.remote_url`), so doctor refuses exactly
    what a spawn would refuse, plain http to a non-loopback host without `insecure: true` first.
    """
    if remote is None:
        return RemoteTarget(who, None, None, "locus remote needs `remote: {host, port, authToken}`")
    if remote.auth_token is None:
        return RemoteTarget(who, None, None, "remote has no `authToken`")
    try:
        base = remote_base_url(remote.host, insecure=remote.insecure)
    except RemoteUrlError as err:
        return RemoteTarget(who, None, None, str(err).removeprefix("remote locus: "))
    return RemoteTarget(who, f"{base}:{remote.port}/is_alive", remote.auth_token)


def _stages_by_agent(settings: ResolvedSettings) -> dict[str, list[str]]:
    """Each agent with the stages it runs, a fallback agent's stages marked as such: a step
    fails over to it exactly when the first agent broke, so it must be installed too."""
    stages: dict[str, list[str]] = {}
    for stage in AGENT_STAGES:
        choice = settings.agent_for(stage)
        stages.setdefault(choice.name, []).append(stage)
        if choice.fallback is not None:
            stages.setdefault(choice.fallback.name, []).append(f"{stage} fallback")
    return stages


def plan(profiles: Sequence[Profile]) -> Needs:
    """What `profiles` need, each item with the profiles (and stages) that need it."""
    local: dict[str, list[str]] = {}
    elsewhere: dict[str, list[str]] = {}
    commands: dict[str, list[str]] = {}
    missing_command: list[str] = []
    docker: list[str] = []
    remotes: list[RemoteTarget] = []
    for profile in profiles:
        settings = profile.settings
        for agent, stages in _stages_by_agent(settings).items():
            every = list(AGENT_STAGES)
            if stages == every:
                scope = "every stage"
            elif stages == [f"{stage} fallback" for stage in every]:
                scope = "fallback for every stage"
            else:
                scope = ", ".join(stages)
            who = f"{profile.label} ({scope})"
            target = local if settings.locus == "local" else elsewhere
            target.setdefault(agent, []).append(who)
            if agent == "command":
                if not settings.agent_command:
                    missing_command.append(who)
                elif settings.locus == "local":
                    commands.setdefault(settings.agent_command[0], []).append(who)
        if settings.locus == "docker":
            docker.append(profile.label)
        if settings.locus == "remote":
            remotes.append(remote_target(profile.label, settings.remote))

    def frozen(table: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
        return {key: tuple(value) for key, value in table.items()}

    return Needs(
        local_agents=frozen(local),
        elsewhere_agents=frozen(elsewhere),
        commands=frozen(commands),
        missing_command=tuple(missing_command),
        docker=tuple(docker),
        remotes=tuple(remotes),
    )


# ---------------------------------------------------------------- pure: the checks


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


def build_checks(needs: Needs, facts: Facts) -> tuple[Check, ...]:
    """Every check, from what the settings need and what the probes found."""
    checks: list[Check] = []
    version = ".".join(str(part) for part in facts.python)
    if facts.python[:2] >= MIN_PYTHON:
        checks.append(Check("python", "ok", f"Python {version}"))
    else:
        minimum = ".".join(str(part) for part in MIN_PYTHON)
        checks.append(
            Check(
                "python",
                "fail",
                f"Python {version}; pairbot needs {minimum} or newer",
                f"install Python {minimum}+ and reinstall pairbot with it",
            )
        )
    git = facts.on_path.get("git")
    checks.append(
        Check("git", "ok", f"git at {git}")
        if git is not None
        else Check(
            "git", "fail", "git is not on PATH; every step needs it", "install git (git-scm.com)"
        )
    )
    for agent, binary in AGENT_BINARIES.items():
        checks.append(
            _agent_check(agent, binary, needs, facts.on_path.get(binary), facts.versions.get(agent))
        )
    for who in needs.missing_command:
        checks.append(
            Check(
                "agent:command",
                "fail",
                f"{who} uses agent 'command' without `agentCommand`",
                "set `agentCommand: [program, arg, …]` in .pair/config.yaml `batch:` or the "
                "batch's `settings:`",
            )
        )
    for program, needed_by in needs.commands.items():
        path = facts.on_path.get(program)
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
    known = set(ADAPTERS)
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
    if facts.docker.ok:
        checks.append(Check("docker", "ok", facts.docker.detail))
    elif needs.docker:
        checks.append(
            Check(
                "docker",
                "fail",
                f"{facts.docker.detail}; needed by {'; '.join(needs.docker)} (locus docker)",
                "start the Docker engine (or install Docker) and check `docker info`",
            )
        )
    else:
        checks.append(
            Check(
                "docker",
                "warn",
                f"{facts.docker.detail} (only locus docker needs it)",
                "start the Docker engine (or install Docker) before using locus docker",
            )
        )
    checks.extend(_remote_check(target, facts) for target in needs.remotes)
    checks.extend(isolation_checks(needs, facts))
    return tuple(checks)


# ---------------------------------------------------------------- pure: who the agent runs as


def _local_plan(iso: Isolation) -> isolation.Plan | str:
    """The runtime's own decision for a local step (project commands always run locally)."""
    if isinstance(iso.setting, str):
        return iso.setting
    setting, user = iso.setting
    return isolation.decide(setting, "local", iso.host, user)


def _runs_as(plan: isolation.Switch, who: reach.Who) -> str:
    made = (
        f"uid {who.uid}"
        if who.uid is not None
        else "not created yet: pairbot creates it with `useradd --system` at the first step"
    )
    via = f"sudo -n -u {plan.user}" if plan.via == "sudo" else f"{plan.via} (pairbot is root)"
    return f"{plan.user} ({made}) via {via}"


def _isolation_check(plan: isolation.Plan | str, iso: Isolation) -> Check:
    if isinstance(plan, str):
        return Check(
            "isolation",
            "fail",
            plan,
            "fix PAIR_ISOLATION / PAIR_AGENT_USER in pairbot's environment",
        )
    if isinstance(plan, isolation.Switch):
        box = (
            ", each step in a PID namespace of its own"
            if plan.namespace
            else ", without a PID namespace (see isolation:namespace)"
        )
        return Check(
            "isolation",
            "ok",
            f"local agents and project commands (tests, proof-of-work) run as "
            f"{_runs_as(plan, iso.who)}{box}",
        )
    if isinstance(plan, isolation.Refused):
        return Check(
            "isolation",
            "fail",
            f"{plan.reason}: no agent or project command starts",
            "run pairbot as root or a user with passwordless sudo, or set PAIR_ISOLATION=auto",
        )
    if isinstance(plan, isolation.NoIsolation):
        if plan.warning is None:
            return Check(
                "isolation",
                "warn",
                f"PAIR_ISOLATION=off: local agents run as pairbot's own user (uid "
                f"{iso.host.euid}) and can read the credentials in its environment",
                "unset PAIR_ISOLATION (docs/security.md)",
            )
        reason = plan.warning.removeprefix("pairbot: warning: ")
        return Check(
            "isolation",
            "warn",
            reason.split("; run as ", 1)[0],
            "run as root or with passwordless sudo, or use `locus: docker` (docs/security.md)",
        )
    return Check("isolation", "ok", f"the {plan.locus} locus isolates the agent")


def _obstacle(found: reach.Blocked, who: reach.Who, asked: str) -> tuple[str, str]:
    """(why `who` cannot run `asked`, the fix for that one obstacle)."""
    if found.what == "missing":
        return f"{found.path} does not exist", f"reinstall {asked}"
    assert found.node is not None  # noqa: S101  # only a missing target has no node
    shown = f"{found.path} ({reach.describe(found.node)})"
    if found.what == "search":
        return (
            f"{shown} is closed to it",
            f"open the way: chmod o+x {found.path} (or setfacl -m u:{who.name}:x {found.path})",
        )
    able, bits = ("readable", "o+r") if found.what == "read" else ("executable", "o+x")
    return f"{shown} is not {able} by it", f"chmod {bits} {found.path}"


def _program_chain(path: str, iso: Isolation, on_path: Mapping[str, str | None]) -> list[str]:
    """`path`, then the interpreter its `#!` names, then what `env` runs (each traced)."""
    chain = [path]
    way = iso.ways.get(path)
    while way is not None and way.shebang is not None and len(chain) < 4:
        interpreter = way.shebang[0]
        chain.append(interpreter)
        if Path(interpreter).name == "env":
            name = next((word for word in way.shebang[1:] if not word.startswith("-")), None)
            found = on_path.get(name) if name is not None else None
            if found is not None:
                chain.append(found)
        way = iso.ways.get(chain[-1])
    return chain


def _first_obstacle(
    paths: Sequence[str], iso: Isolation, opened: frozenset[str], need_dir: bool = False
) -> tuple[str, reach.Blocked] | None:
    """The first of `paths` `iso.who` cannot run (or, `need_dir`, list), and what stops it;
    `opened` are the directories each step opens to it first (`_opened`)."""
    for path in paths:
        way = iso.ways.get(path)
        if way is None:
            continue
        script = way.shebang is not None
        need = reach.READ | reach.EXEC if need_dir or script else reach.EXEC
        found = reach.blocked(iso.who, way, need, opened)
        if found is not None:
            return path, found
    return None


def _shown(path: str, iso: Isolation) -> str:
    way = iso.ways.get(path)
    real = way.target.path if way is not None and way.target is not None else path
    return path if real == path else f"{path} (→ {real})"


def _shut(iso: Isolation) -> tuple[reach.Node, ...]:
    """The directories above the workspace that each step opens to the agent with setfacl: the
    runtime's own rule (AgentAccount.open_way) is "no o+x", even for one the agent could pass
    as a member of its group."""
    way = iso.ways.get(iso.workspace)
    return tuple(node for node in way.dirs if not node.mode & 0o001) if way is not None else ()


def _through(paths: Sequence[str], iso: Isolation, opened: frozenset[str]) -> str:
    """ ", through DIR (opened by each step)" when reaching `paths` relies on such a directory."""
    used = dict.fromkeys(
        node.path
        for path in paths
        if (way := iso.ways.get(path)) is not None
        for node in way.dirs
        if node.path in opened and not reach.allows(iso.who, node, reach.SEARCH)
    )
    if not used:
        return ""
    return f", through {', '.join(used)} (which each step opens to it with setfacl)"


def _pairbot_check(
    iso: Isolation, on_path: Mapping[str, str | None], opened: frozenset[str]
) -> Check:
    user = iso.who.name
    script = iso.ways.get(iso.script)
    programs = [iso.executable]
    if script is not None and script.target is not None:
        programs = _program_chain(iso.script, iso, on_path)
        programs += [p for p in [iso.executable] if p not in programs]
    stop = _first_obstacle(programs, iso, opened) or _first_obstacle(
        [iso.package], iso, opened, need_dir=True
    )
    if stop is not None:
        asked, found = stop
        why, fix = _obstacle(found, iso.who, asked)
        return Check(
            "reach:pairbot",
            "fail",
            f"{user} cannot run {asked}: {why}, so `pairbot batch report` fails in every "
            "isolated agent step",
            f"install pairbot where every user can reach it (a venv under /opt or /usr/local), "
            f"or {fix}",
        )
    ran = ", ".join(_shown(path, iso) for path in dict.fromkeys(programs))
    ran += _through([*programs, iso.package], iso, opened)
    if script is None or script.target is None:
        return Check(
            "reach:pairbot",
            "warn",
            f"{user} can run {ran}, but there is no {iso.script}: agents find `pairbot` only if "
            "another one is on PATH",
            "install pairbot with pip (its console script goes beside the interpreter)",
        )
    return Check("reach:pairbot", "ok", f"{user} can run {ran}; and read {iso.package}")


def _program_check(
    name: str,
    path: str,
    iso: Isolation,
    on_path: Mapping[str, str | None],
    opened: frozenset[str],
) -> Check:
    chain = _program_chain(path, iso, on_path)
    stop = _first_obstacle(chain, iso, opened)
    user = iso.who.name
    if stop is None:
        ran = ", ".join(_shown(step, iso) for step in chain) + _through(chain, iso, opened)
        return Check(f"reach:{name}", "ok", f"{user} can run {ran}")
    asked, found = stop
    why, fix = _obstacle(found, iso.who, asked)
    role = "" if asked == path else f" (the interpreter of {path})"
    where = "install it where every user can reach it (/usr/local, /opt), or "
    return Check(
        f"reach:{name}",
        "fail",
        f"{user} cannot run {asked}{role}: {why}, so every isolated step with it fails",
        f"{where if found.what == 'search' else ''}{fix}",
    )


def _workspace_check(iso: Isolation, setfacl: str | None) -> Check:
    user = iso.who.name
    way = iso.ways.get(iso.workspace)
    if way is None or way.target is None:
        return Check("reach:workspace", "warn", f"{iso.workspace} does not exist")
    shut = _shut(iso)
    if not shut:
        return Check("reach:workspace", "ok", f"{user} can reach {iso.workspace}")
    listed = ", ".join(f"{node.path} ({reach.describe(node)})" for node in shut)
    if setfacl is not None:
        return Check(
            "reach:workspace",
            "ok",
            f"{listed} closed to other users; each step lets {user} through with "
            f"`setfacl -m u:{user}:x` (search only)",
        )
    return Check(
        "reach:workspace",
        "fail",
        f"{user} cannot reach {iso.workspace}: {listed} closed to other users and setfacl is "
        "not installed, so every isolated step fails",
        f"install acl (apt-get install acl), or chmod o+x {' '.join(n.path for n in shut)}",
    )


def _tools_check(iso: Isolation, on_path: Mapping[str, str | None]) -> Check:
    root = iso.host.euid == 0
    present = [tool for tool in ISOLATION_TOOLS if on_path.get(tool) is not None]
    missing: list[str] = []
    if root and not (on_path.get("setpriv") or on_path.get("runuser")):
        missing.append("setpriv or runuser (util-linux)")
    if not root and not iso.host.sudo:
        missing.append(
            "passwordless sudo (package sudo; `sudo -n true` must succeed)"
            if on_path.get("sudo")
            else "sudo (package sudo)"
        )
    missing += [
        f"{tool} ({ISOLATION_TOOLS[tool]})"
        for tool in ("setfacl", "unshare")
        if on_path.get(tool) is None
    ]
    detail = f"present: {', '.join(present) or 'none'}"
    if not missing:
        return Check("isolation:tools", "ok", detail)
    return Check(
        "isolation:tools",
        "warn",
        f"{detail}; missing: {', '.join(missing)}",
        "install what is missing (apt-get install util-linux acl sudo)",
    )


def _namespace_check(
    plan: isolation.Plan | str, iso: Isolation, on_path: Mapping[str, str | None]
) -> Check:
    name = "isolation:namespace"
    probe = "`unshare --pid --fork --mount-proc --kill-child true`"
    where = "as root" if iso.host.euid == 0 else "under sudo -n"
    if on_path.get("unshare") is None:
        return Check(
            name,
            "warn",
            "unshare is not installed: a process a step detaches can outlive it",
            "install util-linux",
        )
    if isinstance(plan, isolation.NoIsolation):
        if plan.namespace:
            return Check(name, "ok", "each step runs in a PID namespace (through a user namespace)")
        return Check(
            name,
            "warn",
            "no PID namespace as pairbot's own user: a process a step detaches can outlive it",
            "run as root or with passwordless sudo, or allow unprivileged user namespaces",
        )
    if isinstance(plan, isolation.Switch) and not iso.host.pidns:
        return Check(
            name,
            "warn",
            f"{probe} fails {where}: a process a step detaches can outlive it",
            "let this machine make PID namespaces (a container needs --privileged or "
            "CAP_SYS_ADMIN; seccomp or AppArmor may forbid unshare)",
        )
    if isinstance(plan, isolation.Switch) and not plan.namespace:
        return Check(
            name,
            "warn",
            f"{probe} works {where}, but neither setpriv nor runuser is there to become "
            f"{plan.user} inside the namespace",
            "install util-linux",
        )
    return Check(name, "ok", f"{probe} works {where}: no process of a step outlives it")


def _contained_checks(needs: Needs) -> list[Check]:
    checks = [
        Check(
            f"isolation:{label}",
            "ok",
            f"{label}: agents run in a docker container (locus docker), the container is the "
            "boundary; project commands still run here, as `isolation` says",
        )
        for label in needs.docker
    ]
    checks += [
        Check(
            f"isolation:{target.who}",
            "ok",
            f"{target.who}: agents run on the swerex-remote server"
            f"{f' {target.url}' if target.url else ''} (locus remote), which is the boundary; "
            "project commands still run here, as `isolation` says",
        )
        for target in needs.remotes
    ]
    return checks


def isolation_checks(needs: Needs, facts: Facts) -> tuple[Check, ...]:
    """Who local agents and project commands run as, whether that user can reach pairbot, each
    configured local agent and the workspace, and what isolation lacks on this machine."""
    iso = facts.isolation
    if iso is None:
        return ()
    plan = _local_plan(iso)
    checks = [_isolation_check(plan, iso), *_contained_checks(needs)]
    if isinstance(plan, isolation.Switch):
        setfacl = facts.on_path.get("setfacl")
        checks.append(_workspace_check(iso, setfacl))
        # What a step opens for the workspace is open for the programs too, by the time they run.
        opened = frozenset(n.path for n in _shut(iso)) if setfacl is not None else frozenset()
        if needs.local_agents:
            checks.append(_pairbot_check(iso, facts.on_path, opened))
        for agent in needs.local_agents:
            binary = AGENT_BINARIES.get(agent)
            path = facts.on_path.get(binary) if binary is not None else None
            if path is not None:
                checks.append(_program_check(agent, path, iso, facts.on_path, opened))
        for program in needs.commands:
            path = facts.on_path.get(program)
            if path is not None:
                checks.append(_program_check("command", path, iso, facts.on_path, opened))
    if not isinstance(plan, str):
        checks.append(_tools_check(iso, facts.on_path))
        checks.append(_namespace_check(plan, iso, facts.on_path))
    return tuple(checks)


def isolation_summary(needs: Needs, facts: Facts) -> dict[str, Any] | None:
    """Who the agent runs as, for `--json`: the local decision and each other locus."""
    iso = facts.isolation
    if iso is None:
        return None
    plan = _local_plan(iso)
    local: dict[str, Any]
    if isinstance(plan, str):
        local = {"runs_as": None, "refused": plan}
    elif isinstance(plan, isolation.Switch):
        local = {
            "runs_as": plan.user,
            "uid": iso.who.uid,
            "exists": iso.who.uid is not None,
            "via": plan.via,
            "pid_namespace": plan.namespace,
        }
    elif isinstance(plan, isolation.NoIsolation):
        local = {
            "runs_as": "pairbot",
            "uid": iso.host.euid,
            "via": None,
            "pid_namespace": plan.namespace,
            "warning": plan.warning,
        }
    elif isinstance(plan, isolation.Refused):
        local = {"runs_as": None, "refused": plan.reason}
    else:  # pragma: no cover  # decide("local") never answers Contained
        local = {"runs_as": plan.locus}
    elsewhere = dict.fromkeys(needs.docker, "docker container")
    elsewhere |= {
        target.who: f"remote server {target.url or ''}".strip() for target in needs.remotes
    }
    return {
        "local": local,
        "elsewhere": elsewhere,
        "tools": {tool: facts.on_path.get(tool) for tool in ISOLATION_TOOLS},
        "sudo": iso.host.sudo,
        "unshare_works": iso.host.pidns,
    }


# ---------------------------------------------------------------- the shell: probes


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


# ---------------------------------------------------------------- the shell: settings


def load_profiles(root: Path, env: Mapping[str, str]) -> tuple[tuple[Profile, ...], Check]:
    """The settings to check (standalone, then each batch that changes them) and a config check.

    Broken files do not stop doctor: the config check fails naming them, and the rest is
    checked against whatever resolved (at worst the built-in defaults).
    """
    problems: list[str] = []

    def resolve(manifest: BatchSettings | None, project: BatchSettings | None) -> ResolvedSettings:
        try:
            return resolve_settings(env=env, manifest=manifest, project=project)
        except UserError as err:  # a bad PAIR_LOCUS / PAIR_AGENT
            problems.append(str(err))
            return resolve_settings(env={}, manifest=manifest, project=project)

    if not (root / PAIR_DIR).is_dir():
        profile = Profile("built-in defaults", resolve(None, None))
        note = Check(
            "config",
            "warn",
            f"no {PAIR_DIR}/ in {root}: checked against the built-in defaults",
            "run pairbot doctor in the project root, or pass --root",
        )
        return (profile,), _config_check(problems, 0) if problems else note

    project: BatchSettings | None = None
    try:
        project = load_project_config(root).batch
    except UserError as err:
        problems.append(str(err))
    standalone = Profile("project settings", resolve(None, project))
    profiles = [standalone]
    batches = list_batches(root)
    for name in batches:
        try:
            manifest = load_manifest(root, name).settings
        except UserError as err:
            problems.append(str(err))
            continue
        settings = resolve(manifest, project)
        if settings != standalone.settings:
            profiles.append(Profile(f"batch {name}", settings))
    return tuple(profiles), _config_check(problems, len(batches))


def _config_check(problems: Sequence[str], batches: int) -> Check:
    unique = list(dict.fromkeys(problems))
    if unique:
        return Check(
            "config",
            "fail",
            "; ".join(unique),
            "fix the file named above (`pairbot validate` checks them all)",
        )
    return Check("config", "ok", f"{PAIR_DIR}/config.yaml and {batches} batch(es) load")


def diagnose(root: Path, env: Mapping[str, str], probes: Probes | None = None) -> Report:
    """Check this machine against the settings of the project at `root`."""
    profiles, config = load_profiles(root, env)
    needs = plan(profiles)
    facts = gather(needs, probes or Probes(), root, env)
    return Report((config, *build_checks(needs, facts)), isolation_summary(needs, facts))


def render_text(report: Report) -> str:
    """The report for a terminal: one line per check, a remedy under each that is not ok."""
    width = max(len(check.name) for check in report.checks)
    lines: list[str] = []
    for check in report.checks:
        lines.append(f"{check.status:<4}  {check.name:<{width}}  {check.detail}")
        if check.status != "ok" and check.remedy:
            lines.append(f"{'':<4}  {'':<{width}}  → {check.remedy}")
    counts = dict.fromkeys(("ok", "warn", "fail"), 0)
    for check in report.checks:
        counts[check.status] += 1
    verdict = "ready" if report.exit_code == 0 else "not ready"
    lines.append(
        f"doctor: {verdict} ({counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail)"
    )
    return "\n".join(lines)
