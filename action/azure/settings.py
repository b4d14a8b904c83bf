"""The Azure Pipelines entry's settings: the job's predefined variables, read and checked once.

    settings = PipelineSettings.from_env(os.environ)

Azure Pipelines sets these on every job
(https://learn.microsoft.com/en-us/azure/devops/pipelines/build/variables):

    SYSTEM_COLLECTIONURI     the organization's URL (https://dev.azure.com/<org>/)
    SYSTEM_TEAMPROJECT       the project
    BUILD_REPOSITORY_NAME    the repository the pipeline checked out
    BUILD_REASON             Schedule → a tick; ResourceTrigger → a service-hook notification;
                             Manual → a tick (a person pressed "Run pipeline")
    BUILD_SOURCESDIRECTORY   the checkout
    BUILD_BUILDID            this run (its page, and the lock's owner)
    SYSTEM_ACCESSTOKEN       the job's token; only in the step's environment when the YAML maps
                             it (`env: SYSTEM_ACCESSTOKEN: $(System.AccessToken)`)
    AGENT_TEMPDIRECTORY      where the run's Markdown summary is written

pairbot's own, set in the YAML (docs/azure-pipelines.md):

    PAIR_WEBHOOK_PAYLOAD_PATH   the file holding the notification of a ResourceTrigger run
    PAIR_TRIGGER                the command word (default `pair`, for `/pair …`)
    PAIR_ALLOWLIST              Azure DevOps accounts (alice@contoso.com) and identity ids
                                (GUIDs), comma-separated, whose comments act without a
                                permission lookup: a person without Contribute, another bot
                                or a service principal that may drive pairbot
    PAIR_STATE_LOCK_WAIT_S      how long a command waits for a running step (default 900)
    PAIR_STATE_STALE_AFTER_S    after how long a dead run's lock is reclaimed (default 1800)

Every secret is a `SecretStr`, and `secrets()` lists them for masking before anything else is
printed: the job's token and any agent API key in the environment. Every bad value is a
`UserError` naming the variable and what is allowed. What the GitHub Action reads the same way
(the trigger word, the lock's knobs, debug logging) is `action.run.settings`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from urllib.parse import urlsplit

from pydantic import SecretStr

from action.run.settings import CiSettings, get, read_lock_knobs, read_trigger
from app.domain.intake.azure_hooks import parse_identity_allowlist
from app.errors import UserError
from app.hosting import HostSettings

__all__ = ["AGENT_KEYS", "PipelineSettings", "Reason"]

Reason = Literal["tick", "webhook", "other"]
# The variables the agent CLIs read their API keys from: secrets this run masks.
AGENT_KEYS: Final = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
ENV_PAYLOAD: Final = "PAIR_WEBHOOK_PAYLOAD_PATH"
ENV_ALLOWLIST: Final = "PAIR_ALLOWLIST"
_REASONS: Final[Mapping[str, Reason]] = {
    "schedule": "tick",
    "manual": "tick",
    "resourcetrigger": "webhook",
}


@dataclass(frozen=True, kw_only=True)
class PipelineSettings(CiSettings):
    """Everything one run of the entry reads from its environment (`CiSettings`: the checkout,
    BUILD_SOURCESDIRECTORY; PAIR_TRIGGER; the lock's knobs; System.Debug)."""

    collection_uri: str
    project: str
    repository: str
    build_reason: str
    reason: Reason
    token: SecretStr = field(repr=False)
    build_id: str = ""
    payload_path: Path | None = None
    summary_dir: Path | None = None
    agent_keys: tuple[SecretStr, ...] = field(default=(), repr=False)
    allowlist: frozenset[str] = frozenset()
    hosts: HostSettings = field(default_factory=HostSettings, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PipelineSettings:
        """Read and validate every variable; `UserError` on the first invalid one."""
        collection = _required(env, "SYSTEM_COLLECTIONURI")
        parts = urlsplit(collection)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise UserError(
                f"SYSTEM_COLLECTIONURI={collection!r} is not the organization's URL; allowed: "
                "https://dev.azure.com/<organization>/ as Azure Pipelines sets it"
            )
        token = _required(env, "SYSTEM_ACCESSTOKEN")
        if token.startswith("$("):
            # An unmapped macro reaches the step as its own text.
            raise UserError(
                "SYSTEM_ACCESSTOKEN is not mapped into the step; allowed: the job's token, "
                "mapped with `env: SYSTEM_ACCESSTOKEN: $(System.AccessToken)`"
            )
        build_reason = _required(env, "BUILD_REASON")
        reason = _REASONS.get(build_reason.lower(), "other")
        payload = get(env, ENV_PAYLOAD)
        if reason == "webhook" and payload is None:
            raise UserError(
                f"BUILD_REASON={build_reason} but {ENV_PAYLOAD} is not set; allowed: the path "
                "of the file the pipeline wrote the webhook resource's payload to "
                "(docs/azure-pipelines.md)"
            )
        temp = get(env, "AGENT_TEMPDIRECTORY")
        lock_wait_s, stale_after_s = read_lock_knobs(env)
        return cls(
            collection_uri=collection.rstrip("/"),
            project=_required(env, "SYSTEM_TEAMPROJECT"),
            repository=_required(env, "BUILD_REPOSITORY_NAME"),
            build_reason=build_reason,
            reason=reason,
            token=SecretStr(token),
            workspace=Path(_required(env, "BUILD_SOURCESDIRECTORY")),
            build_id=get(env, "BUILD_BUILDID") or "",
            payload_path=Path(payload) if payload is not None else None,
            summary_dir=Path(temp) if temp is not None else None,
            trigger=read_trigger(get(env, "PAIR_TRIGGER"), "PAIR_TRIGGER"),
            lock_wait_s=lock_wait_s,
            stale_after_s=stale_after_s,
            debug=(get(env, "SYSTEM_DEBUG") or "").lower() == "true",
            agent_keys=tuple(SecretStr(v) for name in AGENT_KEYS if (v := get(env, name))),
            allowlist=_allowlist(env),
            hosts=HostSettings.from_env(env),
        )

    @property
    def run_url(self) -> str | None:
        """This run's page, linked from the tracking comment; None without a build id."""
        if not self.build_id:
            return None
        return f"{self.collection_uri}/{self.project}/_build/results?buildId={self.build_id}"

    @property
    def run_id(self) -> str:
        """This run's id (BUILD_BUILDID), or `local` outside a pipeline."""
        return self.build_id or "local"

    @property
    def sources(self) -> Path:
        """The checkout, as Azure Pipelines names it (BUILD_SOURCESDIRECTORY)."""
        return self.workspace

    def host_settings(self) -> HostSettings:
        """The hosts' settings: the environment's, with this pipeline's organization,
        project, repository and the job's token (over any `PAIR_AZURE_DEVOPS_*`)."""
        return self.hosts.model_copy(
            update={
                "azure_organization_url": self.collection_uri,
                "azure_project": self.project,
                "azure_repository": self.repository,
                "azure_token": self.token,
            }
        )

    def secrets(self) -> tuple[str, ...]:
        """Every secret value this run holds, masked before any other output."""
        return tuple(s.get_secret_value() for s in (self.token, *self.agent_keys))


def _required(env: Mapping[str, str], name: str) -> str:
    value = get(env, name)
    if value is None:
        raise UserError(
            f"{name} is not set: `python -m action.azure` runs as a step of an Azure Pipelines "
            "job, where the agent sets it (to run pairbot elsewhere, use the `pairbot` CLI)"
        )
    return value


def _allowlist(env: Mapping[str, str]) -> frozenset[str]:
    try:
        return parse_identity_allowlist(get(env, ENV_ALLOWLIST) or "", ENV_ALLOWLIST)
    except ValueError as err:
        raise UserError(str(err)) from None
