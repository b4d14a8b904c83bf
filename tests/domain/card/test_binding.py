"""The host binding: resolved from config once, stored with the run-state, never a fallback."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.card.binding import KNOWN_HOSTS, Binding, host_id, resolve_binding
from app.engine.manifest import HostsConfig, ProjectConfig
from app.errors import StateCorruptError
from hosts.errors import HostError, HostUnsupported


def test_known_hosts() -> None:
    assert KNOWN_HOSTS == ("github", "azure-devops", "local")


@pytest.mark.parametrize(
    ("pm", "code", "expected"),
    [
        pytest.param("github", "github", Binding("github", "github"), id="github"),
        pytest.param(
            "azure-devops", "github", Binding("azure-devops", "github"), id="boards-and-github"
        ),
        pytest.param("local", "azure-devops", Binding("local", "azure-devops"), id="mixed"),
        pytest.param(" GitHub ", "LOCAL", Binding("github", "local"), id="case-and-blanks"),
    ],
)
def test_resolve(pm: str, code: str, expected: Binding) -> None:
    assert resolve_binding(HostsConfig(pm=pm, code=code)) == expected
    assert resolve_binding({"pm": pm, "code": code}) == expected


def test_config_defaults_bind_the_local_forge() -> None:
    assert resolve_binding(ProjectConfig().hosts) == Binding("local", "local")


@pytest.mark.parametrize(
    ("pm", "code", "declared"),
    [
        pytest.param("gitlab", "github", "gitlab", id="unknown-pm"),
        pytest.param("github", "bitbucket", "bitbucket", id="unknown-code"),
        pytest.param("azure_devops", "github", "azure_devops", id="no-guessing"),
        pytest.param("jira", "gitea", "jira", id="pm-reported-first"),
        pytest.param(" ", "github", " ", id="blank"),
    ],
)
def test_unknown_host_halts_and_never_falls_back(pm: str, code: str, declared: str) -> None:
    # A mapping: `HostsConfig` itself refuses the name when the file is read (below).
    with pytest.raises(HostUnsupported) as caught:
        resolve_binding({"pm": pm, "code": code})
    err = caught.value
    assert isinstance(err, HostError)
    assert err.declared == declared
    assert err.available == KNOWN_HOSTS
    assert str(err).startswith("host-unsupported:")
    assert repr(declared) in str(err)
    assert "github, azure-devops, local" in str(err)


def test_a_mapping_needs_both_keys() -> None:
    with pytest.raises(ValueError, match="missing: code"):
        resolve_binding({"pm": "github"})


def test_binding_is_frozen() -> None:
    binding = Binding("github", "github")
    with pytest.raises(dataclasses.FrozenInstanceError):
        binding.pm = "local"  # type: ignore[misc]


@pytest.mark.parametrize(
    "binding", [Binding(pm, code) for pm in KNOWN_HOSTS for code in KNOWN_HOSTS]
)
def test_round_trip_through_json(binding: Binding) -> None:
    stored = json.loads(json.dumps(binding.to_json()))
    assert stored == {"version": 1, "pm": binding.pm, "code": binding.code}
    assert Binding.from_json(stored) == binding


def test_a_stored_binding_outlives_a_config_edit() -> None:
    # Resolved at the start of the run and stored with the run-state ...
    stored = resolve_binding(HostsConfig(pm="azure-devops", code="github")).to_json()
    # ... config.yaml is edited mid-cycle to a host that does not exist ...
    with pytest.raises(HostUnsupported):
        resolve_binding({"pm": "gitlab", "code": "gitlab"})
    # ... and the run keeps the binding it started with.
    assert Binding.from_json(stored) == Binding("azure-devops", "github")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(None, id="null"),
        pytest.param([], id="list"),
        pytest.param({"pm": "github", "code": "github"}, id="no-version"),
        pytest.param({"version": 2, "pm": "github", "code": "github"}, id="future-version"),
        pytest.param({"version": True, "pm": "github", "code": "github"}, id="bool-version"),
        pytest.param({"version": 1, "pm": 1, "code": "github"}, id="pm-not-text"),
        pytest.param({"version": 1, "pm": "github", "code": None}, id="code-not-text"),
        pytest.param({"version": 1, "pm": "github", "code": "github", "x": 1}, id="extra-key"),
    ],
)
def test_a_damaged_record_is_an_operator_error(data: Any) -> None:
    with pytest.raises(StateCorruptError, match="stored host binding"):
        Binding.from_json(data)


def test_a_stored_unknown_host_is_still_host_unsupported() -> None:
    with pytest.raises(HostUnsupported):
        Binding.from_json({"version": 1, "pm": "gitlab", "code": "github"})


@given(st.text(max_size=20))
def test_host_id_accepts_exactly_the_known_hosts(declared: str) -> None:
    if declared.strip().lower() in KNOWN_HOSTS:
        assert host_id(declared) == declared.strip().lower()
    else:
        with pytest.raises(HostUnsupported) as caught:
            host_id(declared)
        assert caught.value.declared == declared


@given(st.sampled_from(KNOWN_HOSTS), st.sampled_from(KNOWN_HOSTS))
def test_resolved_bindings_round_trip(pm: str, code: str) -> None:
    binding = resolve_binding({"pm": pm, "code": code})
    assert Binding.from_json(binding.to_json()) == binding
