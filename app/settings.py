"""The batch settings cascade: which agent, locus, image, timeout and permissions a step runs with.

A setting can be given in four scopes, nearest first:

    env       PAIR_AGENT, PAIR_AGENT_COMMAND, PAIR_LOCUS, PAIR_IMAGE, PAIR_AGENT_TIMEOUT_MS
              (passed in, never read here)
    manifest  `settings:` in `.pair/batches/<name>/batch.yaml` (absent for standalone steps)
    project   `batch:` in `.pair/config.yaml`
    default   the built-in values below

Scalars are nearest-wins. The agent is resolved per stage, so a stage map in one scope can
override some stages and let the others fall through. Permissions merge per field (see
`merge_permissions`) and have no env scope. The timeout ignores an env value that is not a
positive integer, so a typo never shortens or removes the guard against a hung agent.

The models here are the `batch:` / `settings:` blocks of the files a user writes; `StrictModel`
is the base every such file's model shares. Everything below the models is pure: callers load the
files and pass the environment in as a mapping.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Final, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    StringConstraints,
    Tag,
)
from pydantic.alias_generators import to_camel

from app.errors import ConfigError

__all__ = [
    "AGENT_STAGES",
    "DEFAULT_AGENT",
    "DEFAULT_AGENT_TIMEOUT_MS",
    "DEFAULT_DOCKER_IMAGE",
    "DEFAULT_LOCUS",
    "DEFAULT_POSTURE",
    "ENV_AGENT",
    "ENV_AGENT_COMMAND",
    "ENV_AGENT_TIMEOUT_MS",
    "ENV_IMAGE",
    "ENV_LOCUS",
    "LOCI",
    "POSTURES",
    "AgentChoice",
    "AgentSetting",
    "AgentSpecModel",
    "AgentStage",
    "BatchSettings",
    "Locus",
    "PermissionsSettings",
    "Posture",
    "RemoteSettings",
    "ResolvedPermissions",
    "ResolvedSettings",
    "Scope",
    "StageEntry",
    "StrictModel",
    "merge_permissions",
    "resolve_agent_timeout_ms",
    "resolve_settings",
    "stage_choice",
]

# `verify-red` is the red contract verifier (the seed's role `redVerifier`): its own agent and
# model, like the reviewer's `verify`.
AgentStage = Literal["propose", "apply", "verify", "red", "verify-red", "fix", "pr", "decompose"]
AGENT_STAGES: Final[tuple[AgentStage, ...]] = get_args(AgentStage)

Locus = Literal["local", "docker", "remote"]
LOCI: Final[tuple[Locus, ...]] = get_args(Locus)

Posture = Literal["repo-sandboxed-permissive", "curated-allowlist", "full-autonomy"]
POSTURES: Final[tuple[Posture, ...]] = get_args(Posture)

Scope = Literal["env", "manifest", "project", "default"]

DEFAULT_AGENT: Final = "claude"
DEFAULT_LOCUS: Final[Locus] = "local"
DEFAULT_DOCKER_IMAGE: Final = "python:3.12"
DEFAULT_AGENT_TIMEOUT_MS: Final = 600_000
DEFAULT_POSTURE: Final[Posture] = "repo-sandboxed-permissive"

ENV_AGENT: Final = "PAIR_AGENT"
ENV_AGENT_COMMAND: Final = "PAIR_AGENT_COMMAND"  # shell words, for the `command` agent
ENV_LOCUS: Final = "PAIR_LOCUS"
ENV_IMAGE: Final = "PAIR_IMAGE"
ENV_AGENT_TIMEOUT_MS: Final = "PAIR_AGENT_TIMEOUT_MS"


class StrictModel(BaseModel):
    """Base of every model for a file a user writes: camelCase keys, unknown keys rejected.

    snake_case names are accepted too, so code can build these models with field names.
    """

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        frozen=True,
    )


def _no_whitespace(value: str) -> str:
    # Agent names and model ids end up as argv values (`--model <id>`) and registry keys; a space
    # in one is always a typo, and a clear message beats a regex-pattern error.
    if not value or any(char.isspace() for char in value):
        raise ValueError("must be non-empty and contain no whitespace")
    return value


def _non_empty_secret(value: SecretStr) -> SecretStr:
    # An empty token makes swerex-remote skip auth: never accept one.
    if not value.get_secret_value():
        raise ValueError("must not be empty")
    return value


AgentName = Annotated[str, AfterValidator(_no_whitespace)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
# Strict: in lax mode YAML's `true` would become a 1 ms timeout (or port 1) without a word.
StrictPositiveInt = Annotated[int, Field(strict=True, gt=0)]


class AgentSpecModel(StrictModel):
    """An agent with an explicit model, e.g. `{name: claude, model: claude-opus-4-1}`."""

    name: AgentName
    model: AgentName | None = None


AgentEntry = AgentName | AgentSpecModel


def _distinct_agents(value: list[AgentEntry]) -> list[AgentEntry]:
    names = [entry if isinstance(entry, str) else entry.name for entry in value]
    if len(set(names)) != len(names):
        raise ValueError(
            "a fallback list names two different agents: the agent, then the one that takes "
            "over after a quota, auth or crash failure"
        )
    return value


# `[claude, codex]`: the first runs the stage; the second takes over once when the first fails
# on a recognised quota, auth or crash signature (app/domain/card/agent_failures.py). Two entries
# exactly: a step is retried once, so a third agent would never run.
FallbackList = Annotated[
    list[AgentEntry], Field(min_length=2, max_length=2), AfterValidator(_distinct_agents)
]


def _entry_kind(value: object) -> str:
    if isinstance(value, str):
        return "agent-name"
    if isinstance(value, list | tuple):
        return "agent-list"
    return "agent-with-model"


StageEntry = Annotated[
    Annotated[AgentName, Tag("agent-name")]
    | Annotated[AgentSpecModel, Tag("agent-with-model")]
    | Annotated[FallbackList, Tag("agent-list")],
    Discriminator(_entry_kind),
]
StageMap = dict[AgentStage, StageEntry]


def _agent_setting_kind(value: object) -> str:
    # Choosing the branch up front gives one error for the branch the user meant instead of
    # three (one per union member) for a single typo.
    if isinstance(value, str):
        return "agent-name"
    if isinstance(value, list | tuple):
        return "agent-list"
    if isinstance(value, AgentSpecModel) or (isinstance(value, Mapping) and "name" in value):
        return "agent-with-model"
    return "stage-map"


AgentSetting = Annotated[
    Annotated[AgentName, Tag("agent-name")]
    | Annotated[AgentSpecModel, Tag("agent-with-model")]
    | Annotated[FallbackList, Tag("agent-list")]
    | Annotated[StageMap, Tag("stage-map")],
    Discriminator(_agent_setting_kind),
]
"""A bare agent name, a name with a model, or a fallback list of two (every stage), or a map of
stage to any of those."""


class PermissionsSettings(StrictModel):
    """One scope's permissions; `None` means this scope does not define that field."""

    posture: Posture | None = None
    allow: list[NonEmptyStr] | None = None
    deny: list[NonEmptyStr] | None = None
    raw: dict[AgentName, list[NonEmptyStr]] | None = None


class RemoteSettings(StrictModel):
    """Where the `remote` locus runs agents (a swerex-remote server)."""

    host: NonEmptyStr
    port: Annotated[int, Field(strict=True, ge=1, le=65535)]
    auth_token: Annotated[SecretStr, AfterValidator(_non_empty_secret)] | None = None
    insecure: Annotated[bool, Field(strict=True)] = False
    # The project root as the server sees it; None means the same path as on this machine.
    workdir: NonEmptyStr | None = None


class BatchSettings(StrictModel):
    """`batch:` in `.pair/config.yaml` or `settings:` in a batch manifest; every key optional."""

    agent: AgentSetting | None = None
    agent_command: Annotated[list[NonEmptyStr], Field(min_length=1)] | None = None
    locus: Locus | None = None
    image: NonEmptyStr | None = None
    remote: RemoteSettings | None = None
    agent_timeout_ms: StrictPositiveInt | None = None
    permissions: PermissionsSettings | None = None


@dataclass(frozen=True)
class AgentChoice:
    """The agent for one stage, and the scope that chose it (named in model-error remedies).

    `fallback` is the agent that takes the step over once when this one fails on a recognised
    quota, auth or crash signature; None when the setting named one agent.
    """

    name: str
    model: str | None
    scope: Scope
    fallback: AgentChoice | None = None


@dataclass(frozen=True)
class ResolvedPermissions:
    """The merged permissions policy; the runtime translates it into each agent's flags."""

    posture: Posture
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    raw: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class ResolvedSettings:
    """Every setting a step needs, resolved once; `agents` has an entry for every stage."""

    agents: Mapping[AgentStage, AgentChoice]
    agent_command: tuple[str, ...] | None
    locus: Locus
    image: str
    remote: RemoteSettings | None
    agent_timeout_ms: int
    agent_timeout_scope: Scope
    permissions: ResolvedPermissions

    def agent_for(self, stage: AgentStage) -> AgentChoice:
        """The agent that runs `stage`."""
        return self.agents[stage]


_DIGITS = re.compile(r"[0-9]+")


def resolve_agent_timeout_ms(
    env_value: str | None, manifest: int | None, project: int | None
) -> tuple[int, Scope]:
    """The per-agent timeout and the scope that set it: env > manifest > project > default.

    The env value counts only when it is a positive base-10 integer; anything else ("", "0",
    "-5", "10s", "1e3", "1.5") falls through, so a typo never shortens or removes the guard.
    """
    if env_value is not None:
        text = env_value.strip()
        # `int()` alone would also take "+5", "1_000" and non-ASCII digits; accept plain digits.
        if _DIGITS.fullmatch(text) and int(text) > 0:
            return int(text), "env"
    # The models already reject non-positive values; falling through here too keeps this
    # function total for any caller, for the same reason as the env rule above.
    if manifest is not None and manifest > 0:
        return manifest, "manifest"
    if project is not None and project > 0:
        return project, "project"
    return DEFAULT_AGENT_TIMEOUT_MS, "default"


def merge_permissions(nearest_first: Sequence[PermissionsSettings | None]) -> ResolvedPermissions:
    """Merge permissions scopes given nearest first.

    posture: nearest-wins (default repo-sandboxed-permissive). deny: the union of every scope, so
    no scope can lift a ban a broader scope imposed; nearest scope's entries first, de-duplicated.
    allow: the nearest scope that defines it replaces the rest; an explicit `[]` defines it (and
    so withdraws every broader allowance). raw: each agent's entry is nearest-wins on its own.
    """
    scopes = [scope for scope in nearest_first if scope is not None]
    posture = next((s.posture for s in scopes if s.posture is not None), DEFAULT_POSTURE)
    allow = next((s.allow for s in scopes if s.allow is not None), [])
    # dict.fromkeys de-duplicates while keeping first-seen (nearest) order.
    deny = dict.fromkeys(entry for s in scopes for entry in s.deny or [])
    raw: dict[str, tuple[str, ...]] = {}
    for scope in scopes:
        for agent, fragment in (scope.raw or {}).items():
            raw.setdefault(agent, tuple(fragment))
    return ResolvedPermissions(
        posture=posture,
        allow=tuple(allow),
        deny=tuple(deny),
        raw=MappingProxyType(raw),
    )


def _env(env: Mapping[str, str], name: str) -> str | None:
    # An empty (or blank) variable is how shells and CI templates spell "unset".
    value = env.get(name, "").strip()
    return value or None


def _env_locus(env: Mapping[str, str]) -> Locus | None:
    value = _env(env, ENV_LOCUS)
    if value is None:
        return None
    for locus in LOCI:
        if value == locus:
            return locus
    raise ConfigError(f"{ENV_LOCUS}={value!r} is not a locus; allowed: {', '.join(LOCI)}")


def _env_agent(env: Mapping[str, str]) -> str | None:
    value = _env(env, ENV_AGENT)
    if value is not None and any(char.isspace() for char in value):
        raise ConfigError(
            f"{ENV_AGENT}={value!r} is not an agent name; "
            "allowed: one agent name without whitespace (e.g. claude, codex)"
        )
    return value


def _env_agent_command(env: Mapping[str, str]) -> list[str] | None:
    value = _env(env, ENV_AGENT_COMMAND)
    if value is None:
        return None
    try:
        words = shlex.split(value)
    except ValueError as err:
        raise ConfigError(
            f"{ENV_AGENT_COMMAND}={value!r} is not a command line ({err}); allowed: shell words, "
            "e.g. `python agent.py --fast`"
        ) from None
    return words or None


_T = TypeVar("_T")


def _agent_for_stage(
    stage: AgentStage, nearest_first: Sequence[tuple[Scope, AgentSetting | None]]
) -> AgentChoice:
    for scope, setting in nearest_first:
        # A stage map covers only the stages it names; the others fall through to the next scope.
        entry = setting.get(stage) if isinstance(setting, dict) else setting
        if entry is not None:
            return stage_choice(entry, scope)
    return AgentChoice(name=DEFAULT_AGENT, model=None, scope="default")


def stage_choice(entry: StageEntry, scope: Scope) -> AgentChoice:
    """The agent one stage entry names (a name, `{name, model}` or a fallback list of two)."""
    if isinstance(entry, list):
        first, second = (_choice(item, scope) for item in entry)
        return dataclasses.replace(first, fallback=second)
    return _choice(entry, scope)


def _choice(entry: AgentEntry, scope: Scope) -> AgentChoice:
    if isinstance(entry, str):
        return AgentChoice(name=entry, model=None, scope=scope)
    return AgentChoice(name=entry.name, model=entry.model, scope=scope)


def resolve_settings(
    *, env: Mapping[str, str], manifest: BatchSettings | None, project: BatchSettings | None
) -> ResolvedSettings:
    """Resolve every setting across env > manifest > project > default.

    `manifest` is None for standalone (headless) steps. Raises `ConfigError` when `PAIR_LOCUS`
    is not a locus or `PAIR_AGENT` is not a single name.
    """
    layers = [layer for layer in (manifest, project) if layer is not None]

    def nearest(pick: Callable[[BatchSettings], _T | None]) -> _T | None:
        return next((value for layer in layers if (value := pick(layer)) is not None), None)

    agent_scopes: list[tuple[Scope, AgentSetting | None]] = [
        ("env", _env_agent(env)),
        ("manifest", manifest.agent if manifest is not None else None),
        ("project", project.agent if project is not None else None),
    ]
    agents = {stage: _agent_for_stage(stage, agent_scopes) for stage in AGENT_STAGES}

    timeout_ms, timeout_scope = resolve_agent_timeout_ms(
        env.get(ENV_AGENT_TIMEOUT_MS),
        manifest.agent_timeout_ms if manifest is not None else None,
        project.agent_timeout_ms if project is not None else None,
    )
    agent_command = _env_agent_command(env) or nearest(lambda layer: layer.agent_command)
    return ResolvedSettings(
        agents=MappingProxyType(agents),
        agent_command=tuple(agent_command) if agent_command is not None else None,
        locus=_env_locus(env) or nearest(lambda layer: layer.locus) or DEFAULT_LOCUS,
        image=_env(env, ENV_IMAGE) or nearest(lambda layer: layer.image) or DEFAULT_DOCKER_IMAGE,
        remote=nearest(lambda layer: layer.remote),
        agent_timeout_ms=timeout_ms,
        agent_timeout_scope=timeout_scope,
        permissions=merge_permissions([layer.permissions for layer in layers]),
    )
