"""The host binding: which adapter holds the cards (pm) and which the pull requests (code). Pure.

`.pair/config.yaml` declares `hosts: {pm: …, code: …}` (they may differ: cards in Azure Boards,
code on GitHub). The caller resolves the binding ONCE at the start of a run and reuses the same
value for every later call of that run: it stores `binding.to_json()` with the run-state and
reads it back with `Binding.from_json()` on the next tick, so a `config.yaml` edited mid-cycle
does not move a running card to another host (seed 004, "Resolved once").

A declared host without an adapter is `hosts.errors.HostUnsupported` (`host-unsupported`),
naming the declared value and the adapters that exist; the binding never falls back to GitHub.
Names are compared case-insensitively, with surrounding whitespace ignored (`GitHub` is
`github`); nothing else is guessed (`azure_devops` is not `azure-devops`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args

from app.errors import StateCorruptError
from hosts.errors import HostUnsupported

HostId = Literal["github", "azure-devops", "local"]
KNOWN_HOSTS: Final[tuple[HostId, ...]] = get_args(HostId)
BINDING_VERSION: Final = 1


class HostsDeclaration(Protocol):
    """What config declares: `ProjectConfig.hosts` (app.engine.manifest.HostsConfig) fits."""

    @property
    def pm(self) -> str: ...

    @property
    def code(self) -> str: ...


def host_id(declared: str) -> HostId:
    """The adapter a declared name selects; `HostUnsupported` when there is none."""
    normalised = declared.strip().lower()
    for known in KNOWN_HOSTS:
        if normalised == known:
            return known
    raise HostUnsupported(declared, KNOWN_HOSTS)


@dataclass(frozen=True)
class Binding:
    """The resolved pair of adapters for one run; frozen, resolved once, then reused."""

    pm: HostId
    code: HostId

    def to_json(self) -> dict[str, Any]:
        """The record stored with the run-state."""
        return {"version": BINDING_VERSION, "pm": self.pm, "code": self.code}

    @classmethod
    def from_json(cls, data: object) -> Binding:
        """Read a stored binding back; a damaged record is `StateCorruptError` (operator)."""
        if (
            not isinstance(data, Mapping)
            or set(data) != {"version", "pm", "code"}
            or data["version"] != BINDING_VERSION
            or type(data["version"]) is not int
            or not isinstance(data["pm"], str)
            or not isinstance(data["code"], str)
        ):
            raise StateCorruptError(
                f"the stored host binding {data!r} is not "
                f'{{"version": {BINDING_VERSION}, "pm": <host>, "code": <host>}}'
            )
        return cls(pm=host_id(data["pm"]), code=host_id(data["code"]))


def resolve_binding(config_hosts: HostsDeclaration | Mapping[str, str]) -> Binding:
    """Resolve `hosts: {pm, code}` from config; an unknown value raises `HostUnsupported`."""
    if isinstance(config_hosts, Mapping):
        missing = [key for key in ("pm", "code") if key not in config_hosts]
        if missing:
            raise ValueError(f"hosts needs both pm and code; missing: {', '.join(missing)}")
        pm, code = config_hosts["pm"], config_hosts["code"]
    else:
        pm, code = config_hosts.pm, config_hosts.code
    return Binding(pm=host_id(pm), code=host_id(code))
