"""Everything `python -m action` reads from its environment, read once into one typed object.

    ctx = ActionContext.from_env(os.environ)   # UserError naming the variable, value and remedy
    payload = ctx.read_event()                 # the webhook payload at GITHUB_EVENT_PATH

The Actions runner describes the run in standard variables (`GITHUB_EVENT_NAME`,
`GITHUB_EVENT_PATH`, `GITHUB_REPOSITORY`, …) and hands an action its inputs as
`INPUT_<NAME>`. A composite action gets no `INPUT_*` variables of its own: `action.yml` sets them
on its `python -m action` step, spelled with underscores (`INPUT_GITHUB_TOKEN`). The runner's
own spelling for `uses:` actions keeps the hyphen (`INPUT_GITHUB-TOKEN`: the name is upper-cased
and only spaces become underscores, https://github.com/actions/toolkit/blob/main/packages/core/src/core.ts
`getInput`), so both are accepted, the underscore form first. An empty value means "not given"
(that is what `${{ inputs.x }}` expands to for an input nobody set).

Nothing else in the Action reads the environment: the glue builds this object
once and passes values down. Secrets are `Secret` (their repr is `**********`) and are only
revealed where they are used: `agent_env()` for the agent's process, `host_settings()` for the
card cycle's hosts (`app.cycle.card_cycle.CardCycle`), `secrets()` for `::add-mask::`. Every
invalid value is a `UserError` that names the input, the value (never a secret's) and what is
allowed; nothing has run when it is raised. The hosts' own variables (docs/hosts.md) are read
by `host_settings()`, when a run builds its hosts.

This module is on the path of every run before its first API request, so it stays light:
plain dataclasses and regular expressions, no pydantic and no engine modules (the agent and
locus names are spelled here; tests hold them equal to the engine's).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from action.lockknobs import ENV_LOCK_WAIT_S, ENV_STALE_AFTER_S
from action.run.settings import CiSettings, get, read_lock_knobs, read_trigger
from app.domain.card.autonomy import ALLOWED_GATE_FORMS, GateCondition, parse_gate_condition
from app.domain.intake.comment_commands import UNTIL_VALUES
from app.engine.names import NAME_PATTERN
from app.errors import UserError

if TYPE_CHECKING:
    from app.hosting import HostSettings
    from app.settings import Locus

__all__ = [
    "AGENT_KEY_INPUTS",
    "ENV_APP_SLUG",
    "ENV_INSTALLATION_ID",
    "ENV_LOCK_WAIT_S",
    "ENV_STALE_AFTER_S",
    "ENV_TOKEN_IS_ACTIONS",
    "INPUTS",
    "ActionContext",
    "Secret",
    "Until",
]

Until = Literal["ready-for-merge", "merged"]

# input name -> the environment variable the agent CLI reads its key from.
AGENT_KEY_INPUTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "anthropic-api-key": "ANTHROPIC_API_KEY",
        "openai-api-key": "OPENAI_API_KEY",
        "gemini-api-key": "GEMINI_API_KEY",
        "cursor-api-key": "CURSOR_API_KEY",
    }
)

# Every input `python -m action` reads (action.yml declares these plus `python-version`, which
# only its setup step uses); tests/action/test_action_yml.py holds the two lists together.
INPUTS: Final[tuple[str, ...]] = (
    "github-token",
    "agent",
    "agent-command",
    "locus",
    "app-id",
    "private-key",
    "batch",
    "until",
    "merge",
    "trigger",
    "allowlist",
    *AGENT_KEY_INPUTS,
)

# Not inputs a user sets: `action.yml` passes them from the app-token step's outputs, so the
# Action knows the App's installation (to mint and refresh its own tokens) and its bot login.
ENV_INSTALLATION_ID: Final = "PAIR_GITHUB_INSTALLATION_ID"
ENV_APP_SLUG: Final = "PAIR_APP_SLUG"
ENV_TOKEN_IS_ACTIONS: Final = "PAIR_GITHUB_TOKEN_IS_ACTIONS"  # noqa: S105 - a variable name

_REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*)/[A-Za-z0-9._-]+")
_DIGITS = re.compile(r"[0-9]+")
_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_ALLOWLIST_SEPARATORS = re.compile(r"[\s,]+")
_PEM = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.+-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL
)


# The engine's agent adapters and loci (`app.runtime.adapters.ADAPTERS`, `app.settings.LOCI`),
# spelled here so that validating the inputs loads neither (tests/action/test_context.py).
AGENTS: Final[tuple[str, ...]] = ("claude", "codex", "gemini", "cursor", "opencode", "command")
LOCI: Final[tuple[Locus, ...]] = ("local", "docker", "remote")


class Secret:
    """A secret string: its repr and str are `**********`; `get_secret_value()` reveals it.

    The same face as pydantic's `Secret`, without loading pydantic on every run."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return "**********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, kw_only=True)
class ActionContext(CiSettings):
    """The run (standard Actions variables) and the Action's inputs, validated.

    `CiSettings` holds what the Azure Pipelines entry reads too: the checkout
    (GITHUB_WORKSPACE), the `trigger` input, the `pair-state` lock's knobs (docs/action.md,
    "The state branch") and debug logging (RUNNER_DEBUG=1, "Re-run with debug logging")."""

    # -- the run ---------------------------------------------------------------------------
    event_name: str
    event_path: Path
    repository: str  # owner/name
    api_url: str
    server_url: str
    run_id: str
    output_path: Path | None  # GITHUB_OUTPUT; None outside Actions (outputs are not written)
    summary_path: Path | None  # GITHUB_STEP_SUMMARY; likewise
    actor_id: int | None  # GITHUB_ACTOR_ID: who triggered the run (numeric, stable)

    # -- the inputs ------------------------------------------------------------------------
    github_token: Secret | None
    # action.yml: no App token was minted and the github-token input is the run's own token.
    token_is_actions: bool
    agent: str | None
    agent_command: tuple[str, ...] | None
    locus: Locus | None
    app_id: str | None
    private_key: Secret | None
    installation_id: int | None
    app_slug: str | None
    batch: str | None
    until: Until | None
    merge: GateCondition | None
    allowlist: frozenset[int]
    agent_keys: Mapping[str, Secret]  # environment variable name -> key, only those given

    # Azure DevOps identity ids: none in a GitHub workflow (its allowlist is numeric).
    identity_allowlist: frozenset[str] = frozenset()

    # -- the hosts -------------------------------------------------------------------------
    # The job's environment, for docs/hosts.md's variables (an Azure DevOps binding, the local
    # forge, the write spacing): `host_settings()` reads them and lays the inputs above over
    # them. It holds secrets: never in the repr.
    host_env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ActionContext:
        """Read and validate every variable; `UserError` on the first invalid one."""
        event_name = _required(env, "GITHUB_EVENT_NAME")
        event_path = Path(_required(env, "GITHUB_EVENT_PATH"))
        repository = _required(env, "GITHUB_REPOSITORY")
        if not _REPOSITORY.fullmatch(repository):
            raise UserError(f"GITHUB_REPOSITORY={repository!r} is not 'owner/name'")
        workspace = Path(_required(env, "GITHUB_WORKSPACE"))
        actor = get(env, "GITHUB_ACTOR_ID")
        if actor is not None and not _DIGITS.fullmatch(actor):
            raise UserError(f"GITHUB_ACTOR_ID={actor!r} is not a numeric user id")

        app_id = _input(env, "app-id")
        private_key = _input(env, "private-key")
        if app_id is not None and not _DIGITS.fullmatch(app_id):
            raise UserError(
                f"input app-id={app_id!r} is not a GitHub App id; allowed: the App's numeric id "
                "(its settings page, 'App ID')"
            )
        if (app_id is None) != (private_key is None):
            given, missing = ("app-id", "private-key") if app_id else ("private-key", "app-id")
            raise UserError(
                f"input {given} is set but {missing} is not; allowed: both (to act as the "
                "GitHub App, so pushes and pull requests trigger CI) or neither (github-token)"
            )
        if private_key is not None:
            private_key = _pem(private_key)
        installation = get(env, ENV_INSTALLATION_ID)
        if installation is not None and not _DIGITS.fullmatch(installation):
            raise UserError(f"{ENV_INSTALLATION_ID}={installation!r} is not a numeric id")
        slug = get(env, ENV_APP_SLUG)
        if slug is not None and not _SLUG.fullmatch(slug):
            raise UserError(
                f"{ENV_APP_SLUG}={slug!r} is not a GitHub App slug "
                "(lowercase letters, digits and '-')"
            )

        agent, agent_command = _agent(env)
        lock_wait_s, stale_after_s = read_lock_knobs(env)
        token = _input(env, "github-token")
        return cls(
            event_name=event_name,
            event_path=event_path,
            repository=repository,
            api_url=(get(env, "GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
            server_url=(get(env, "GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
            run_id=get(env, "GITHUB_RUN_ID") or "",
            workspace=workspace,
            output_path=_path(env, "GITHUB_OUTPUT"),
            summary_path=_path(env, "GITHUB_STEP_SUMMARY"),
            actor_id=int(actor) if actor is not None else None,
            github_token=Secret(token) if token is not None else None,
            token_is_actions=get(env, ENV_TOKEN_IS_ACTIONS) == "true",
            agent=agent,
            agent_command=agent_command,
            locus=_locus(env),
            app_id=app_id,
            private_key=Secret(private_key) if private_key is not None else None,
            installation_id=int(installation) if installation is not None else None,
            app_slug=slug,
            batch=_batch(env),
            until=_until(env),
            merge=_merge(env),
            trigger=read_trigger(_input(env, "trigger"), "input trigger"),
            allowlist=_allowlist(env),
            agent_keys=MappingProxyType(
                {
                    variable: Secret(value)
                    for name, variable in AGENT_KEY_INPUTS.items()
                    if (value := _input(env, name)) is not None
                }
            ),
            lock_wait_s=lock_wait_s,
            stale_after_s=stale_after_s,
            debug=get(env, "RUNNER_DEBUG") == "1",
            host_env=MappingProxyType(dict(env)),
        )

    # -- reading the event -----------------------------------------------------------------

    def read_event(self) -> dict[str, Any]:
        """The event payload the runner wrote to GITHUB_EVENT_PATH: a JSON object."""
        try:
            text = self.event_path.read_text(encoding="utf-8")
        except OSError as err:
            raise UserError(
                f"GITHUB_EVENT_PATH={str(self.event_path)!r} cannot be read ({err.strerror}); "
                "the Actions runner writes the event payload there"
            ) from None
        except UnicodeDecodeError:
            raise UserError(
                f"GITHUB_EVENT_PATH={str(self.event_path)!r} is not UTF-8 text"
            ) from None
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(
                f"GITHUB_EVENT_PATH={str(self.event_path)!r} is not valid JSON "
                f"(line {err.lineno}, column {err.colno}: {err.msg})"
            ) from None
        except RecursionError:  # no payload GitHub sends nests this deep
            raise UserError(
                f"GITHUB_EVENT_PATH={str(self.event_path)!r} nests arrays and objects too deep "
                "to be an event payload; the Actions runner writes the event there"
            ) from None
        if not isinstance(payload, dict):
            raise UserError(
                f"GITHUB_EVENT_PATH={str(self.event_path)!r} holds a JSON "
                f"{type(payload).__name__}, not the event object"
            )
        return payload

    # -- handing values on -----------------------------------------------------------------

    @property
    def run_url(self) -> str | None:
        """This workflow run's page (`GITHUB_SERVER_URL/GITHUB_REPOSITORY/actions/runs/ID`),
        linked from the tracking comment; None outside a run."""
        if not self.run_id or not self.repository:
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    def agent_env(self) -> dict[str, str]:
        """The API keys, as the variables the agent CLIs read; only the keys given."""
        return {name: key.get_secret_value() for name, key in self.agent_keys.items()}

    def settings_env(self) -> dict[str, str]:
        """The `env` scope of `app.settings.resolve_settings`: agent and locus when given.

        `agent_command` has no env scope there: the caller applies `self.agent_command`.
        """
        from app.settings import ENV_AGENT, ENV_LOCUS  # noqa: PLC0415  # loads pydantic

        env: dict[str, str] = {}
        if self.agent is not None:
            env[ENV_AGENT] = self.agent
        if self.locus is not None:
            env[ENV_LOCUS] = self.locus
        return env

    def host_settings(self) -> HostSettings:
        """The hosts' settings for the card cycle: the environment's (`hosts`), with the GitHub
        host's credentials from the inputs — the App (minting and refreshing its own tokens)
        when app-id and its installation are known, else the token."""
        from pydantic import SecretStr  # noqa: PLC0415  # the hosts' settings are pydantic's

        from app.hosting import HostSettings  # noqa: PLC0415

        use_app = self.app_id is not None and self.installation_id is not None
        given: dict[str, object] = {
            "github_repository": self.repository,
            "github_api_url": self.api_url,
            # Always set: an inherited "true" must not survive a run that minted an App token.
            "github_token_is_actions": self.token_is_actions and not use_app,
        }
        if self.github_token is not None:
            given["github_token"] = SecretStr(self.github_token.get_secret_value())
        if use_app:
            given["github_app_id"] = self.app_id
            key = self.private_key
            given["github_private_key"] = SecretStr(key.get_secret_value()) if key else None
            given["github_installation_id"] = self.installation_id
        return HostSettings.from_env(self.host_env).model_copy(update=given)

    def secrets(self) -> tuple[str, ...]:
        """Every secret value this run holds, for `action.workflow.mask` before any output."""
        values = [self.github_token, self.private_key, *self.agent_keys.values()]
        return tuple(v.get_secret_value() for v in values if v is not None)


# -- reading one variable ------------------------------------------------------------------


def _required(env: Mapping[str, str], name: str) -> str:
    value = get(env, name)
    if value is None:
        raise UserError(
            f"{name} is not set: `python -m action` runs as a step of a GitHub Actions job, "
            "where the runner sets it (to run pairbot elsewhere, use the `pairbot` CLI)"
        )
    return value


def _path(env: Mapping[str, str], name: str) -> Path | None:
    value = get(env, name)
    return Path(value) if value is not None else None


def _input(env: Mapping[str, str], name: str) -> str | None:
    """`INPUT_<NAME>` with hyphens as underscores, else the runner's hyphenated spelling."""
    upper = name.upper()
    return get(env, "INPUT_" + upper.replace("-", "_")) or get(env, "INPUT_" + upper)


def _agent(env: Mapping[str, str]) -> tuple[str | None, tuple[str, ...] | None]:
    agent = _input(env, "agent")
    raw_command = _input(env, "agent-command")
    allowed = ", ".join(sorted(AGENTS))
    if agent is not None and agent not in AGENTS:
        raise UserError(f"input agent={agent!r} is not an agent; allowed: {allowed}")
    if raw_command is None:
        if agent == "command":
            raise UserError(
                "input agent='command' needs agent-command: the command line that runs your "
                "agent (it reads its instructions on stdin)"
            )
        return agent, None
    if agent not in (None, "command"):
        raise UserError(
            f"input agent-command is set but agent={agent!r}; allowed: agent-command with "
            "agent 'command' (or agent left empty), or no agent-command"
        )
    try:
        argv = tuple(shlex.split(raw_command))
    except ValueError as err:
        raise UserError(
            f"input agent-command={raw_command!r} is not a command line ({err}); allowed: "
            "words separated by spaces, quoted as in a POSIX shell"
        ) from None
    if not argv or not argv[0]:
        raise UserError(
            f"input agent-command={raw_command!r} names no program; allowed: the command line "
            "that runs your agent, e.g. 'python tools/agent.py'"
        )
    return "command", argv


def _locus(env: Mapping[str, str]) -> Locus | None:
    value = _input(env, "locus")
    if value is None:
        return None
    for locus in LOCI:
        if value == locus:
            return locus
    raise UserError(f"input locus={value!r} is not a locus; allowed: {', '.join(LOCI)}")


def _batch(env: Mapping[str, str]) -> str | None:
    value = _input(env, "batch")
    if value is not None and not NAME_PATTERN.match(value):
        raise UserError(
            f"input batch={value!r} is not a batch name; allowed: lowercase letters, digits, "
            "'.', '_' and '-', starting with a letter or digit (at most 100 characters)"
        )
    return value


def _until(env: Mapping[str, str]) -> Until | None:
    value = _input(env, "until")
    if value is None:
        return None
    if value == "ready-for-merge":
        return "ready-for-merge"
    if value == "merged":
        return "merged"
    raise UserError(f"input until={value!r} is not allowed; allowed: {' | '.join(UNTIL_VALUES)}")


def _merge(env: Mapping[str, str]) -> GateCondition | None:
    value = _input(env, "merge")
    if value is None:
        return None
    try:
        return parse_gate_condition(value)
    except ValueError:
        raise UserError(
            f"input merge={value!r} is not a gate; allowed: {ALLOWED_GATE_FORMS}"
        ) from None


def _allowlist(env: Mapping[str, str]) -> frozenset[int]:
    value = _input(env, "allowlist")
    if value is None:
        return frozenset()
    ids: set[int] = set()
    for item in _ALLOWLIST_SEPARATORS.split(value):
        if not item:
            continue
        if not _DIGITS.fullmatch(item):
            raise UserError(
                f"input allowlist: {item!r} is not a numeric user id; allowed: GitHub user ids "
                "separated by commas or spaces, e.g. '583231, 9919' (ids, not logins: a login "
                "can change hands; `gh api users/<login> --jq .id` prints one)"
            )
        ids.add(int(item))
    return frozenset(ids)


def _pem(value: str) -> str:
    # A key pasted into a secret as one line with literal `\n` (a common way to store it) is
    # accepted the way actions/create-github-app-token accepts it.
    if "\n" not in value and "\\n" in value:
        value = value.replace("\\n", "\n").strip()
    if not _PEM.search(value):
        raise UserError(
            "input private-key is not a PEM private key; allowed: the App's key file as "
            "downloaded (-----BEGIN RSA PRIVATE KEY----- … -----END RSA PRIVATE KEY-----)"
        )
    return value
