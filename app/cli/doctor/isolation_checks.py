"""`pairbot doctor`, pure: who local agents and project commands run as, and what they reach.

Who the agent runs as is the runtime's own decision (`isolation.decide` on the host's facts
and PAIR_ISOLATION / PAIR_AGENT_USER). When that is another OS user, `isolation_checks` asks
`app.runtime.reach` whether the user can run pairbot's interpreter and console script (which
`pairbot batch report` needs in every agent step), each configured local agent CLI (with its
`#!` interpreter) and reach the workspace, counting the directories a step opens with setfacl
(`AgentAccount.open_way`). A step that would fail every time fails its check, so doctor never
says ready then; the tools isolation uses and whether a PID namespace works are said as facts.
`isolation_summary` is the same decision for `--json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.cli.doctor.model import ISOLATION_TOOLS, Check, Facts, Isolation, Needs
from app.runtime import isolation, reach
from app.runtime.adapters import AGENT_BINARIES


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
