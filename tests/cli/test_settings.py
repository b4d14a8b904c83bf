"""The settings cascade: env > manifest > project > default, per stage for agents, per field for
permissions, and a timeout that a typo can never shorten or remove."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.errors import ConfigError
from app.settings import (
    AGENT_STAGES,
    DEFAULT_AGENT,
    DEFAULT_AGENT_TIMEOUT_MS,
    DEFAULT_DOCKER_IMAGE,
    AgentChoice,
    AgentSpecModel,
    AgentStage,
    BatchSettings,
    PermissionsSettings,
    RemoteSettings,
    ResolvedPermissions,
    Scope,
    StrictModel,
    merge_permissions,
    resolve_agent_timeout_ms,
    resolve_settings,
)


def batch(**data: Any) -> BatchSettings:
    """A scope's settings written as the user writes them (camelCase keys)."""
    return BatchSettings.model_validate(data)


def perms(**data: Any) -> PermissionsSettings:
    return PermissionsSettings.model_validate(data)


def all_stages(name: str, scope: Scope, model: str | None = None) -> dict[AgentStage, AgentChoice]:
    return {stage: AgentChoice(name=name, model=model, scope=scope) for stage in AGENT_STAGES}


def test_constants() -> None:
    assert AGENT_STAGES == (
        "propose",
        "apply",
        "verify",
        "red",
        "verify-red",  # the red contract verifier: role redVerifier, its own agent and model
        "fix",
        "pr",
        "decompose",
    )
    assert DEFAULT_AGENT == "claude"
    assert DEFAULT_DOCKER_IMAGE == "python:3.12"
    assert DEFAULT_AGENT_TIMEOUT_MS == 600_000


def test_nothing_configured_gives_every_default() -> None:
    resolved = resolve_settings(env={}, manifest=None, project=None)
    assert resolved.agents == all_stages("claude", "default")
    assert resolved.agent_command is None
    assert resolved.locus == "local"
    assert resolved.image == "python:3.12"
    assert resolved.remote is None
    assert (resolved.agent_timeout_ms, resolved.agent_timeout_scope) == (600_000, "default")
    assert resolved.permissions == ResolvedPermissions(
        posture="repo-sandboxed-permissive", allow=(), deny=(), raw={}
    )


def test_empty_scopes_behave_like_absent_ones() -> None:
    empty = resolve_settings(env={}, manifest=batch(), project=batch())
    assert empty == resolve_settings(env={}, manifest=None, project=None)


# --- scalars: each scope wins ----------------------------------------------------------------

REMOTE_M = {"host": "manifest.example", "port": 8000, "authToken": "m-token"}
REMOTE_P = {"host": "project.example", "port": 9000, "insecure": True}


@pytest.mark.parametrize(
    ("env", "manifest", "project", "expected"),
    [
        pytest.param({}, None, None, "local", id="default"),
        pytest.param({}, None, {"locus": "docker"}, "docker", id="project"),
        pytest.param({}, {"locus": "remote"}, {"locus": "docker"}, "remote", id="manifest"),
        pytest.param(
            {"PAIR_LOCUS": "docker"}, {"locus": "remote"}, {"locus": "local"}, "docker", id="env"
        ),
        pytest.param({"PAIR_LOCUS": ""}, {"locus": "remote"}, None, "remote", id="empty-env"),
        pytest.param({"PAIR_LOCUS": "  "}, None, {"locus": "docker"}, "docker", id="blank-env"),
        pytest.param({"PAIR_LOCUS": " remote\n"}, None, None, "remote", id="env-is-stripped"),
        pytest.param({}, {}, {"locus": "docker"}, "docker", id="manifest-silent-falls-through"),
    ],
)
def test_locus(
    env: dict[str, str],
    manifest: dict[str, Any] | None,
    project: dict[str, Any] | None,
    expected: str,
) -> None:
    resolved = resolve_settings(
        env=env,
        manifest=None if manifest is None else batch(**manifest),
        project=None if project is None else batch(**project),
    )
    assert resolved.locus == expected


@pytest.mark.parametrize(
    ("env", "manifest", "project", "expected"),
    [
        pytest.param({}, None, None, "python:3.12", id="default"),
        pytest.param({}, None, {"image": "p:1"}, "p:1", id="project"),
        pytest.param({}, {"image": "m:1"}, {"image": "p:1"}, "m:1", id="manifest"),
        pytest.param({"PAIR_IMAGE": "e:1"}, {"image": "m:1"}, {"image": "p:1"}, "e:1", id="env"),
        pytest.param({"PAIR_IMAGE": ""}, None, {"image": "p:1"}, "p:1", id="empty-env"),
        pytest.param({"PAIR_IMAGE": " e:1 "}, None, None, "e:1", id="env-is-stripped"),
    ],
)
def test_image(
    env: dict[str, str],
    manifest: dict[str, Any] | None,
    project: dict[str, Any] | None,
    expected: str,
) -> None:
    resolved = resolve_settings(
        env=env,
        manifest=None if manifest is None else batch(**manifest),
        project=None if project is None else batch(**project),
    )
    assert resolved.image == expected


@pytest.mark.parametrize(
    ("manifest", "project", "expected"),
    [
        pytest.param(None, None, None, id="default"),
        pytest.param(None, {"agentCommand": ["p", "-x"]}, ("p", "-x"), id="project"),
        pytest.param({"agentCommand": ["m"]}, {"agentCommand": ["p", "-x"]}, ("m",), id="manifest"),
        pytest.param({"locus": "docker"}, {"agentCommand": ["p"]}, ("p",), id="falls-through"),
    ],
)
def test_agent_command(
    manifest: dict[str, Any] | None, project: dict[str, Any] | None, expected: tuple[str, ...]
) -> None:
    resolved = resolve_settings(
        env={"PAIR_AGENT": "codex"},  # the agent variable names an agent, never a command
        manifest=None if manifest is None else batch(**manifest),
        project=None if project is None else batch(**project),
    )
    assert resolved.agent_command == expected


@pytest.mark.parametrize(
    ("manifest", "project", "expected"),
    [
        pytest.param(None, None, None, id="default"),
        pytest.param(None, {"remote": REMOTE_P}, REMOTE_P, id="project"),
        pytest.param({"remote": REMOTE_M}, {"remote": REMOTE_P}, REMOTE_M, id="manifest"),
        pytest.param({"image": "x"}, {"remote": REMOTE_P}, REMOTE_P, id="falls-through"),
    ],
)
def test_remote_is_nearest_wins_as_a_whole(
    manifest: dict[str, Any] | None, project: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    resolved = resolve_settings(
        env={},
        manifest=None if manifest is None else batch(**manifest),
        project=None if project is None else batch(**project),
    )
    assert resolved.remote == (
        None if expected is None else RemoteSettings.model_validate(expected)
    )


def test_remote_fields_are_not_mixed_across_scopes() -> None:
    # The manifest's remote has no `insecure`; it must not inherit the project's `insecure: true`.
    resolved = resolve_settings(
        env={}, manifest=batch(remote=REMOTE_M), project=batch(remote=REMOTE_P)
    )
    assert resolved.remote is not None
    assert resolved.remote.insecure is False
    assert resolved.remote.auth_token is not None
    assert resolved.remote.auth_token.get_secret_value() == "m-token"


@pytest.mark.parametrize(
    ("env", "manifest", "project", "expected"),
    [
        pytest.param({}, None, None, (600_000, "default"), id="default"),
        pytest.param({}, None, {"agentTimeoutMs": 3}, (3, "project"), id="project"),
        pytest.param(
            {}, {"agentTimeoutMs": 2}, {"agentTimeoutMs": 3}, (2, "manifest"), id="manifest"
        ),
        pytest.param(
            {"PAIR_AGENT_TIMEOUT_MS": "1"},
            {"agentTimeoutMs": 2},
            {"agentTimeoutMs": 3},
            (1, "env"),
            id="env",
        ),
        pytest.param(
            {"PAIR_AGENT_TIMEOUT_MS": "soon"},
            {"agentTimeoutMs": 2},
            None,
            (2, "manifest"),
            id="invalid-env-falls-through",
        ),
    ],
)
def test_agent_timeout_in_resolve_settings(
    env: dict[str, str],
    manifest: dict[str, Any] | None,
    project: dict[str, Any] | None,
    expected: tuple[int, str],
) -> None:
    resolved = resolve_settings(
        env=env,
        manifest=None if manifest is None else batch(**manifest),
        project=None if project is None else batch(**project),
    )
    assert (resolved.agent_timeout_ms, resolved.agent_timeout_scope) == expected


# --- the agent, per stage --------------------------------------------------------------------

CODEX_GPT5 = {"name": "codex", "model": "gpt-5"}


def _choices(
    default: tuple[str, str | None, Scope], **overrides: tuple[str, str | None, Scope]
) -> dict[AgentStage, AgentChoice]:
    expected = {stage: AgentChoice(*default) for stage in AGENT_STAGES}
    for stage, choice in overrides.items():
        assert stage in AGENT_STAGES
        expected[stage] = AgentChoice(*choice)
    return expected


@pytest.mark.parametrize(
    ("env", "manifest", "project", "expected"),
    [
        pytest.param({}, None, None, _choices(("claude", None, "default")), id="default"),
        pytest.param(
            {}, None, {"agent": "codex"}, _choices(("codex", None, "project")), id="project-scalar"
        ),
        pytest.param(
            {},
            {"agent": "gemini"},
            {"agent": "codex"},
            _choices(("gemini", None, "manifest")),
            id="manifest-scalar-beats-project-scalar",
        ),
        pytest.param(
            {"PAIR_AGENT": "cursor"},
            {"agent": {"verify": "gemini"}},
            {"agent": "codex"},
            _choices(("cursor", None, "env")),
            id="env-beats-everything-for-every-stage",
        ),
        pytest.param(
            {"PAIR_AGENT": ""},
            None,
            {"agent": "codex"},
            _choices(("codex", None, "project")),
            id="empty-env-is-unset",
        ),
        pytest.param(
            {"PAIR_AGENT": " codex "},
            None,
            None,
            _choices(("codex", None, "env")),
            id="env-is-stripped",
        ),
        pytest.param(
            {},
            None,
            {"agent": CODEX_GPT5},
            _choices(("codex", "gpt-5", "project")),
            id="project-name-with-model",
        ),
        pytest.param(
            {},
            {"agent": {"verify": "gemini"}},
            {"agent": "codex"},
            _choices(("codex", None, "project"), verify=("gemini", None, "manifest")),
            id="manifest-stage-map-over-project-scalar",
        ),
        pytest.param(
            {},
            {"agent": "gemini"},
            {"agent": {"verify": "codex"}},
            _choices(("gemini", None, "manifest")),
            id="manifest-scalar-hides-project-stage-map",
        ),
        pytest.param(
            {},
            {"agent": {"verify": {"name": "claude", "model": "opus"}}},
            None,
            _choices(("claude", None, "default"), verify=("claude", "opus", "manifest")),
            id="unmapped-stages-fall-through-to-default",
        ),
        pytest.param(
            {},
            {"agent": {"red": "gemini", "fix": "gemini"}},
            {"agent": {"red": CODEX_GPT5, "pr": "cursor"}},
            _choices(
                ("claude", None, "default"),
                red=("gemini", None, "manifest"),
                fix=("gemini", None, "manifest"),
                pr=("cursor", None, "project"),
            ),
            id="two-stage-maps-merge-per-stage",
        ),
        pytest.param(
            {},
            {"agent": {}},
            {"agent": CODEX_GPT5},
            _choices(("codex", "gpt-5", "project")),
            id="empty-stage-map-overrides-nothing",
        ),
        pytest.param(
            {},
            {"agent": {"propose": CODEX_GPT5}},
            {"agent": {"name": "claude", "model": "sonnet"}},
            _choices(("claude", "sonnet", "project"), propose=("codex", "gpt-5", "manifest")),
            id="model-and-scope-provenance-per-stage",
        ),
    ],
)
def test_agent_per_stage(
    env: dict[str, str],
    manifest: dict[str, Any] | None,
    project: dict[str, Any] | None,
    expected: dict[AgentStage, AgentChoice],
) -> None:
    resolved = resolve_settings(
        env=env,
        manifest=None if manifest is None else batch(**manifest),
        project=None if project is None else batch(**project),
    )
    assert dict(resolved.agents) == expected
    for stage in AGENT_STAGES:
        assert resolved.agent_for(stage) == expected[stage]


def test_standalone_step_has_no_manifest_scope() -> None:
    resolved = resolve_settings(
        env={}, manifest=None, project=batch(agent={"apply": "codex"}, locus="docker")
    )
    assert resolved.agent_for("apply") == AgentChoice("codex", None, "project")
    assert resolved.agent_for("verify") == AgentChoice("claude", None, "default")
    assert resolved.locus == "docker"


def test_resolved_agents_cannot_be_mutated() -> None:
    resolved = resolve_settings(env={}, manifest=None, project=None)
    with pytest.raises(TypeError):
        resolved.agents["apply"] = AgentChoice("codex", None, "env")  # type: ignore[index]


# --- env errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [pytest.param("dockr", id="typo"), pytest.param("LOCAL", id="case-differs")]
)
def test_invalid_pair_locus_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_settings(env={"PAIR_LOCUS": value}, manifest=None, project=batch(locus="local"))
    message = str(caught.value)
    assert "PAIR_LOCUS" in message
    assert repr(value) in message
    for allowed in ("local", "docker", "remote"):
        assert allowed in message


def test_pair_agent_with_whitespace_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"PAIR_AGENT='claude code'.*agent name"):
        resolve_settings(env={"PAIR_AGENT": "claude code"}, manifest=None, project=None)


# --- timeout resolution ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "env_value",
    [
        pytest.param(None, id="unset"),
        pytest.param("", id="empty"),
        pytest.param("   ", id="whitespace"),
        pytest.param("0", id="zero"),
        pytest.param("000", id="zeros"),
        pytest.param("-5", id="negative"),
        pytest.param("-0", id="negative-zero"),
        pytest.param("10s", id="unit-suffix"),
        pytest.param("1e3", id="exponent"),
        pytest.param("1.5", id="fraction"),
        pytest.param("1.0", id="float-integral"),
        pytest.param("abc", id="non-numeric"),
        pytest.param("0x10", id="hex"),
        pytest.param("1_000", id="underscore"),
        pytest.param("+5", id="explicit-sign"),
        pytest.param("1 000", id="inner-space"),
        pytest.param("\u0661\u0662", id="non-ascii-digits"),
        pytest.param("inf", id="infinity"),
    ],
)
@pytest.mark.parametrize(
    ("manifest", "project", "expected"),
    [
        pytest.param(2_000, 3_000, (2_000, "manifest"), id="to-manifest"),
        pytest.param(None, 3_000, (3_000, "project"), id="to-project"),
        pytest.param(None, None, (600_000, "default"), id="to-default"),
    ],
)
def test_invalid_env_timeout_falls_through(
    env_value: str | None, manifest: int | None, project: int | None, expected: tuple[int, str]
) -> None:
    assert resolve_agent_timeout_ms(env_value, manifest, project) == expected


@pytest.mark.parametrize(
    ("env_value", "expected"),
    [
        pytest.param("1", 1, id="one"),
        pytest.param("1500", 1500, id="plain"),
        pytest.param(" 1500\n", 1500, id="surrounding-whitespace"),
        pytest.param("0900", 900, id="leading-zero"),
        pytest.param("99999999999999999999", 99999999999999999999, id="huge"),
    ],
)
def test_valid_env_timeout_wins(env_value: str, expected: int) -> None:
    assert resolve_agent_timeout_ms(env_value, 2_000, 3_000) == (expected, "env")


@pytest.mark.parametrize(
    ("manifest", "project", "expected"),
    [
        pytest.param(0, 3_000, (3_000, "project"), id="zero-manifest"),
        pytest.param(-1, None, (600_000, "default"), id="negative-manifest"),
        pytest.param(None, 0, (600_000, "default"), id="zero-project"),
    ],
)
def test_non_positive_config_timeout_never_wins(
    manifest: int | None, project: int | None, expected: tuple[int, str]
) -> None:
    # The models reject these; the function still never hands one to a runtime.
    assert resolve_agent_timeout_ms(None, manifest, project) == expected


@given(
    env_value=st.one_of(
        st.none(),
        st.text(),
        st.integers().map(str),
        st.builds(lambda n, pad: f"{pad}{n}{pad}", st.integers(), st.sampled_from(["", " ", "\t"])),
    ),
    manifest=st.one_of(st.none(), st.integers()),
    project=st.one_of(st.none(), st.integers()),
)
def test_timeout_is_always_positive_and_env_wins_only_as_a_positive_integer(
    env_value: str | None, manifest: int | None, project: int | None
) -> None:
    timeout, scope = resolve_agent_timeout_ms(env_value, manifest, project)
    assert timeout > 0
    stripped = None if env_value is None else env_value.strip()
    env_is_positive_int = (
        stripped is not None and stripped.isascii() and stripped.isdigit() and int(stripped) > 0
    )
    assert (scope == "env") == env_is_positive_int
    if scope == "env":
        assert stripped is not None
        assert timeout == int(stripped)
    elif scope == "manifest":
        assert timeout == manifest
    elif scope == "project":
        assert timeout == project
        assert manifest is None or manifest <= 0
    else:
        assert timeout == DEFAULT_AGENT_TIMEOUT_MS
        assert all(v is None or v <= 0 for v in (manifest, project))


# --- permissions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nearest_first", "expected"),
    [
        pytest.param(
            [],
            ResolvedPermissions("repo-sandboxed-permissive", (), (), {}),
            id="nothing-gives-default",
        ),
        pytest.param(
            [None, None],
            ResolvedPermissions("repo-sandboxed-permissive", (), (), {}),
            id="absent-scopes",
        ),
        pytest.param(
            [perms(), perms(posture="full-autonomy")],
            ResolvedPermissions("full-autonomy", (), (), {}),
            id="posture-falls-through-silent-scope",
        ),
        pytest.param(
            [perms(posture="curated-allowlist"), perms(posture="full-autonomy")],
            ResolvedPermissions("curated-allowlist", (), (), {}),
            id="posture-nearest-wins",
        ),
        pytest.param(
            [
                perms(deny=["Bash(git push *)", "Bash(sudo *)"]),
                None,
                perms(deny=["Bash(sudo *)", "Bash(rm -rf *)", "Bash(rm -rf *)"]),
            ],
            ResolvedPermissions(
                "repo-sandboxed-permissive",
                (),
                ("Bash(git push *)", "Bash(sudo *)", "Bash(rm -rf *)"),
                {},
            ),
            id="deny-is-a-union-nearest-first-de-duplicated",
        ),
        pytest.param(
            [perms(deny=[]), perms(deny=["Bash(sudo *)"])],
            ResolvedPermissions("repo-sandboxed-permissive", (), ("Bash(sudo *)",), {}),
            id="empty-deny-cannot-lift-a-broader-ban",
        ),
        pytest.param(
            [perms(allow=["Bash(pytest *)"]), perms(allow=["Bash", "Edit"])],
            ResolvedPermissions("repo-sandboxed-permissive", ("Bash(pytest *)",), (), {}),
            id="allow-replaced-by-nearest",
        ),
        pytest.param(
            [perms(allow=[]), perms(allow=["Bash"])],
            ResolvedPermissions("repo-sandboxed-permissive", (), (), {}),
            id="allow-replaced-by-explicit-empty-list",
        ),
        pytest.param(
            [perms(posture="full-autonomy"), perms(allow=["Bash"])],
            ResolvedPermissions("full-autonomy", ("Bash",), (), {}),
            id="allow-falls-through-silent-scope",
        ),
        pytest.param(
            [
                perms(raw={"claude": ["--verbose"]}),
                perms(raw={"claude": ["--x"], "codex": ["-c", "a=b"]}),
            ],
            ResolvedPermissions(
                "repo-sandboxed-permissive",
                (),
                (),
                {"claude": ("--verbose",), "codex": ("-c", "a=b")},
            ),
            id="raw-nearest-wins-per-agent",
        ),
        pytest.param(
            [perms(raw={"gemini": []}), perms(raw={"gemini": ["--sandbox"]})],
            ResolvedPermissions("repo-sandboxed-permissive", (), (), {"gemini": ()}),
            id="raw-empty-entry-overrides",
        ),
        pytest.param(
            [perms(raw={}), perms(raw={"my-agent": ["--flag"]})],
            ResolvedPermissions("repo-sandboxed-permissive", (), (), {"my-agent": ("--flag",)}),
            id="raw-unknown-agent-kept",
        ),
    ],
)
def test_merge_permissions(
    nearest_first: list[PermissionsSettings | None], expected: ResolvedPermissions
) -> None:
    assert merge_permissions(nearest_first) == expected


def test_permissions_in_resolve_settings_merge_manifest_over_project() -> None:
    resolved = resolve_settings(
        env={},
        manifest=batch(permissions={"allow": [], "deny": ["Bash(git push *)"]}),
        project=batch(
            permissions={
                "posture": "curated-allowlist",
                "allow": ["Bash(pytest *)"],
                "deny": ["Bash(sudo *)"],
                "raw": {"codex": ["-c", "x=1"]},
            }
        ),
    )
    assert resolved.permissions == ResolvedPermissions(
        posture="curated-allowlist",
        allow=(),
        deny=("Bash(git push *)", "Bash(sudo *)"),
        raw={"codex": ("-c", "x=1")},
    )


# --- the models ------------------------------------------------------------------------------


def test_camel_case_keys_load() -> None:
    settings = BatchSettings.model_validate(
        {
            "agentTimeoutMs": 5,
            "agentCommand": ["x"],
            "remote": {"host": "h", "port": 1, "authToken": "t", "insecure": True},
        }
    )
    assert settings.agent_timeout_ms == 5
    assert settings.agent_command == ["x"]
    assert settings.remote is not None
    assert settings.remote.auth_token is not None
    assert settings.remote.auth_token.get_secret_value() == "t"


def test_snake_case_names_load_too() -> None:
    settings = BatchSettings(agent_timeout_ms=5, agent_command=["x"])
    assert (settings.agent_timeout_ms, settings.agent_command) == (5, ["x"])


def test_the_documented_project_config_block_loads() -> None:
    # The `batch:` block of DESIGN.md's "Files a user writes", verbatim.
    document = yaml.safe_load(
        """
        batch:
          agent: claude
          locus: local
          agentTimeoutMs: 600000
          permissions: {posture: repo-sandboxed-permissive, allow: [], deny: [], raw: {}}
        """
    )
    settings = BatchSettings.model_validate(document["batch"])
    assert settings.agent == "claude"
    assert settings.permissions == PermissionsSettings(
        posture="repo-sandboxed-permissive", allow=[], deny=[], raw={}
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("codex", "codex", id="name"),
        pytest.param(CODEX_GPT5, AgentSpecModel(name="codex", model="gpt-5"), id="name-and-model"),
        pytest.param({"name": "codex"}, AgentSpecModel(name="codex"), id="name-without-model"),
        pytest.param(
            {"verify": "codex", "fix": CODEX_GPT5},
            {"verify": "codex", "fix": AgentSpecModel(name="codex", model="gpt-5")},
            id="stage-map",
        ),
        pytest.param("my-own-agent", "my-own-agent", id="unregistered-name-is-free-here"),
    ],
)
def test_agent_setting_shapes(value: object, expected: object) -> None:
    assert BatchSettings.model_validate({"agent": value}).agent == expected


@pytest.mark.parametrize(
    ("model", "data", "bad_key"),
    [
        pytest.param(BatchSettings, {"agentTimeout": 5}, "agentTimeout", id="batch-typo"),
        pytest.param(BatchSettings, {"gate": "voluntary"}, "gate", id="batch-manifest-key"),
        pytest.param(
            BatchSettings, {"remote": {"host": "h", "port": 1, "token": "t"}}, "token", id="remote"
        ),
        pytest.param(
            BatchSettings, {"permissions": {"allowed": ["Bash"]}}, "allowed", id="permissions"
        ),
        pytest.param(
            BatchSettings, {"agent": {"name": "codex", "modle": "x"}}, "modle", id="agent-spec"
        ),
        pytest.param(AgentSpecModel, {"name": "codex", "effort": "high"}, "effort", id="spec"),
    ],
)
def test_unknown_keys_are_rejected(model: type[StrictModel], data: object, bad_key: str) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    errors = caught.value.errors()
    assert [error["type"] for error in errors] == ["extra_forbidden"]
    assert errors[0]["loc"][-1] == bad_key


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"agent": ""}, id="empty-agent"),
        pytest.param({"agent": "claude code"}, id="agent-with-space"),
        pytest.param({"agent": {"name": ""}}, id="spec-empty-name"),
        pytest.param({"agent": {"name": "a\tb"}}, id="spec-name-with-tab"),
        pytest.param({"agent": {"name": "codex", "model": ""}}, id="spec-empty-model"),
        pytest.param({"agent": {"model": "gpt-5"}}, id="spec-without-name"),
        pytest.param({"agent": {"review": "codex"}}, id="unknown-stage"),
        pytest.param({"agent": {"verify": "two words"}}, id="stage-map-bad-name"),
        pytest.param({"agent": {"verify": {"verify": "codex"}}}, id="nested-stage-map"),
        pytest.param({"agent": ["codex"]}, id="agent-list"),
        pytest.param({"agent": 5}, id="agent-number"),
        pytest.param({"agentCommand": []}, id="empty-command"),
        pytest.param({"agentCommand": ["run", ""]}, id="empty-command-word"),
        pytest.param({"agentCommand": "run agent"}, id="command-string"),
        pytest.param({"locus": "cloud"}, id="unknown-locus"),
        pytest.param({"image": ""}, id="empty-image"),
        pytest.param({"agentTimeoutMs": 0}, id="zero-timeout"),
        pytest.param({"agentTimeoutMs": -1}, id="negative-timeout"),
        pytest.param({"agentTimeoutMs": True}, id="bool-timeout"),
        pytest.param({"agentTimeoutMs": "600000"}, id="string-timeout"),
        pytest.param({"agentTimeoutMs": 1.5}, id="float-timeout"),
        pytest.param({"remote": {"host": "h"}}, id="remote-without-port"),
        pytest.param({"remote": {"host": "", "port": 1}}, id="remote-empty-host"),
        pytest.param({"remote": {"host": "h", "port": 0}}, id="port-zero"),
        pytest.param({"remote": {"host": "h", "port": 65536}}, id="port-too-big"),
        pytest.param({"remote": {"host": "h", "port": True}}, id="port-bool"),
        pytest.param({"remote": {"host": "h", "port": 1, "authToken": ""}}, id="empty-token"),
        pytest.param({"remote": {"host": "h", "port": 1, "insecure": "yes"}}, id="insecure-str"),
        pytest.param({"permissions": {"posture": "yolo"}}, id="unknown-posture"),
        pytest.param({"permissions": {"deny": [""]}}, id="empty-deny-entry"),
        pytest.param({"permissions": {"allow": "Bash"}}, id="allow-string"),
        pytest.param({"permissions": {"raw": {"claude": "--x"}}}, id="raw-string"),
        pytest.param({"permissions": {"raw": {"my agent": ["--x"]}}}, id="raw-bad-agent"),
    ],
)
def test_invalid_values_are_rejected(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        BatchSettings.model_validate(data)


def test_one_typo_in_an_agent_setting_reports_one_error() -> None:
    with pytest.raises(ValidationError) as caught:
        BatchSettings.model_validate({"agent": {"verfy": "codex"}})
    assert len(caught.value.errors()) == 1


def test_models_are_frozen() -> None:
    settings = batch(locus="docker")
    with pytest.raises(ValidationError):
        settings.locus = "local"  # type: ignore[misc]


def test_auth_token_is_not_printed() -> None:
    remote = RemoteSettings.model_validate({"host": "h", "port": 1, "authToken": "hunter2"})
    assert "hunter2" not in repr(remote)
    assert "hunter2" not in str(batch(remote={"host": "h", "port": 1, "authToken": "hunter2"}))


def test_strict_model_is_a_reusable_base() -> None:
    class Phase(StrictModel):
        proof_of_work: str

    assert Phase.model_validate({"proofOfWork": "pytest"}).proof_of_work == "pytest"
    assert Phase.model_validate({"proof_of_work": "pytest"}).proof_of_work == "pytest"
    with pytest.raises(ValidationError):
        Phase.model_validate({"proofOfWork": "pytest", "extra": 1})
