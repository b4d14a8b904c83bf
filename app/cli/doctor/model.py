"""`pairbot doctor`'s values: what the settings need, what the probes found, and the report.

Plain frozen dataclasses the other modules of `app.cli.doctor` pass between them: `Needs`
(from `needs.plan`), `Facts` (from `probes.gather`), `Check` and `Report` (from `checks` and
`isolation_checks`). No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import SecretStr

from app.runtime import isolation, reach
from app.settings import ResolvedSettings

CheckStatus = Literal["ok", "warn", "fail"]

# The tools isolation uses, and the Debian package that brings each.
ISOLATION_TOOLS: Final[Mapping[str, str]] = {
    "setpriv": "util-linux",
    "runuser": "util-linux",
    "sudo": "sudo",
    "setfacl": "acl",
    "unshare": "util-linux",
}


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
