"""`pairbot doctor`, pure: what the resolved settings need.

    plan(profiles) -> Needs     agents per locus (and who needs each, stage by stage, a
                                fallback agent included), the agentCommand program, a Docker
                                engine, the remote servers (`remote_target`)

Each item names the profiles (and stages) that need it, so a failed check says who it fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.cli.doctor.model import Needs, Profile, RemoteTarget
from app.runtime.remote_url import RemoteUrlError, remote_base_url
from app.settings import AGENT_STAGES, RemoteSettings, ResolvedSettings


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
