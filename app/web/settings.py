"""The App's settings: one typed object read once from the environment (docs/app.md, Settings).

`AppSettings.from_env(env, root=...)` reads every `PAIR_*` variable the service knows, checks
each one and names the variable in any error; nothing else in `app/web` reads the environment.
Secrets are `SecretStr`: they never appear in a repr, a log line or an error message.

The edge's limits (`EdgeLimits`, docs/app.md "Limits") bound what a stranger can make the
server hold before a delivery is authenticated: body bytes in flight, connections, header
size and read time.

A missing webhook secret is not an error here (`pairbot serve --dev` supplies one); building
the app without one is (`require_webhook_secret`), so the server never starts unsigned.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Final, Literal, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr

from app.domain.intake.azure_hooks import parse_identity_allowlist
from app.domain.intake.comment_commands import DEFAULT_TRIGGER, parse_commands
from app.errors import ConfigError
from app.hosting import HostSettings
from app.store.urls import redact_url

Execution = Literal["actions", "worker"]
ForgeKind = Literal["github", "local"]
WorkerProcess = Literal["own", "inline"]

DEFAULT_STORE = Path(".pair") / "app" / "pairbot.sqlite3"
GITHUB_API = "https://api.github.com"
GITHUB_WEB = "https://github.com"  # where GitHub's OAuth pages are (authorize, access_token)
MIB = 1024 * 1024
SMALL_BODY = MIB  # a body up to this size may use the budget's reserve (an ordinary delivery)
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")


class EdgeLimits(BaseModel):
    """What the webhook edge lets one client, and all of them together, hold (docs/app.md).

    `max_body_bytes`: one body's cap (413 past it; GitHub caps a delivery at 25 MB).
    `body_budget_bytes`: request body bytes held at once across all requests; a request that
    would pass it is answered 503 with Retry-After instead of being buffered. A quarter of it
    is kept for bodies of at most `SMALL_BODY` bytes, so large uploads cannot crowd out
    ordinary deliveries. `read_timeout_s`: the headers must arrive within it of a request's
    start, and the body within it of the headers; a slower request is dropped.
    `max_connections`: open connections; past it the oldest idle one is closed to admit a new
    one (app.web.protocol), and `serve` lowers it to fit the open-file limit.
    `max_header_bytes`: a request's line and headers together (431 past it).
    `keep_alive_s`: how long an idle kept-alive connection stays open.
    `parse_threads`: worker threads that verify large bodies and parse deliveries, off the
    event loop. `recent_deliveries`: how many delivery ids the edge remembers in memory, so a
    redelivery is refused before it is parsed (the store stays the authority for deliveries
    that queue jobs; this only saves work).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = 25 * MIB
    body_budget_bytes: int = 64 * MIB
    read_timeout_s: float = 10.0
    max_connections: int = 500
    max_header_bytes: int = 64 * 1024
    keep_alive_s: int = 5
    parse_threads: int = 2
    recent_deliveries: int = 10_000

    @property
    def reserve_bytes(self) -> int:
        """The part of the budget only small bodies may use."""
        return self.body_budget_bytes // 4

    @property
    def retry_after_s(self) -> int:
        """What a 503 for a full budget says: by then every body held now has been read or
        dropped."""
        return max(1, math.ceil(self.read_timeout_s))

    @classmethod
    def from_env(cls, get: Callable[[str], str | None]) -> EdgeLimits:
        limits = cls(
            max_body_bytes=_int_var(get, "PAIR_MAX_BODY_BYTES", 25 * MIB, 1024, 256 * MIB),
            body_budget_bytes=_int_var(
                get, "PAIR_BODY_BUDGET_BYTES", 64 * MIB, 64 * 1024, 16 * 1024 * MIB
            ),
            read_timeout_s=_seconds_var(get, "PAIR_READ_TIMEOUT_S", 10.0, 0.1, 300.0),
            max_connections=_int_var(get, "PAIR_MAX_CONNECTIONS", 500, 8, 100_000),
            max_header_bytes=_int_var(
                get, "PAIR_MAX_HEADER_BYTES", 64 * 1024, 4 * 1024, 1024 * 1024
            ),
            keep_alive_s=_int_var(get, "PAIR_KEEP_ALIVE_S", 5, 1, 300),
            recent_deliveries=_int_var(get, "PAIR_RECENT_DELIVERIES", 10_000, 0, 1_000_000),
        )
        if limits.max_body_bytes > limits.body_budget_bytes - limits.reserve_bytes:
            raise ConfigError(
                f"PAIR_BODY_BUDGET_BYTES={limits.body_budget_bytes} is too small for "
                f"PAIR_MAX_BODY_BYTES={limits.max_body_bytes}: one body may use at most three "
                "quarters of the budget (the last quarter is kept for small deliveries); set "
                f"the budget to at least {math.ceil(limits.max_body_bytes * 4 / 3)}"
            )
        return limits


class AppSettings(BaseModel):
    """Everything `create_app` needs to know; secrets never appear in repr or logs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: Path
    store: Path
    # PAIR_STORE=postgresql://…: the PostgreSQL store replicas share (a secret: it may carry a
    # password). None: the SQLite file at `store`, the embedded default.
    store_url: SecretStr | None = None
    # PostgreSQL only (PAIR_STORE_LEASE_S): how long a replica's running job stays its own
    # without a renewal; a killed replica's job goes to another this long after it died.
    store_lease_s: float = 60.0
    webhook_secret: SecretStr | None = None
    app_id: int | None = None
    private_key: SecretStr | None = None
    app_slug: str | None = None
    trigger: str = DEFAULT_TRIGGER
    allowlist: frozenset[int] = frozenset()
    # PAIR_AZURE_DEVOPS_ALLOWLIST: Azure DevOps identity ids (GUIDs, lower-cased).
    azure_allowlist: frozenset[str] = frozenset()
    execution: Execution = "actions"
    github_api_url: str = GITHUB_API
    ado_username: str | None = None
    ado_password: SecretStr | None = None
    # `Name: value`: a header an Azure DevOps subscription sends instead of Basic auth.
    ado_secret_header: SecretStr | None = None
    # Where acknowledgements go: the GitHub App, or the local forge (`pairbot serve --dev`).
    forge: ForgeKind = "github"
    # The credentials of docs/hosts.md, for the worker's Azure DevOps and local hosts.
    hosts: HostSettings = HostSettings()
    # PAIR_WORKER_CONCURRENCY (1-64): how many jobs the worker runs at once.
    worker_concurrency: int = 4
    # PAIR_WORKER_PROCESS: where `pairbot serve` runs the worker — a process of its own
    # (app.web.worker_process) or the edge's (`inline`); None: the measured default
    # (`own_worker_process`). `create_app` alone always runs it inline.
    worker_process: WorkerProcess | None = None
    permission_ttl_s: float = 60.0
    # `execution: worker` on several repositories: checkouts as `<dir>/<owner>/<name>`
    # (app.web.checkouts); the root is always a candidate too.
    worker_checkouts: Path | None = None
    # `execution: worker`: seconds between the worker's own ticks (app.web.ticker); 0: none.
    tick_s: float = 60.0
    # The catch-up of lost GitHub deliveries (app.web.catchup, docs/app.md "Catch-up"): seconds
    # between passes (0: none), how far back a pass looks (GitHub keeps 3 days), and how many
    # deliveries one pass asks for again.
    catchup_s: float = 600.0
    catchup_window_s: float = 3 * 86_400.0
    catchup_max: int = 20
    # What the webhook edge lets clients hold before a delivery is authenticated.
    limits: EdgeLimits = EdgeLimits()
    # Where the App's status page is served from outside (PAIR_PUBLIC_URL): each tracking
    # comment a job writes links to it. None: no link.
    public_url: str | None = None
    # Sign-in for the status pages (app.web.signin, docs/app.md "Sign-in"): the App's OAuth
    # client (user-to-server), where GitHub's OAuth pages are, the operator token, the key the
    # session cookie is signed with (None: derived from the webhook secret), and how long a
    # signed-in user's repository list is trusted before they sign in again.
    github_client_id: str | None = None
    github_client_secret: SecretStr | None = None
    github_oauth_url: str = GITHUB_WEB
    operator_token: SecretStr | None = None
    session_secret: SecretStr | None = None
    signin_ttl_s: float = 900.0
    # PAIR_ACCESS_LOG=1: uvicorn's access log, one more line per request (off: the edge's own
    # line per delivery says what happened to it).
    access_log: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, root: Path | None = None) -> AppSettings:
        """Read the documented variables; an empty value counts as unset."""

        def get(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        base = (root or Path(env.get("PAIR_ROOT") or ".")).resolve()
        store_url = _store_url(get("PAIR_STORE"))
        store = Path(DEFAULT_STORE if store_url else get("PAIR_STORE") or DEFAULT_STORE)
        trigger = get("PAIR_TRIGGER") or DEFAULT_TRIGGER
        slug = get("PAIR_APP_SLUG")
        _check_addressing(trigger, slug)
        secret = get("PAIR_WEBHOOK_SECRET")
        username, password = get("PAIR_ADO_USERNAME"), env.get("PAIR_ADO_PASSWORD") or None
        if (username is None) != (password is None):
            raise ConfigError(
                "set both PAIR_ADO_USERNAME and PAIR_ADO_PASSWORD (Azure DevOps service hooks "
                "send both as Basic auth), or neither"
            )
        header = get("PAIR_ADO_SECRET_HEADER")
        if header is not None:
            parse_secret_header(header)
        # The hosts read PAIR_PRIVATE_KEY_FILE too (app.hosting): hand them the path this object
        # reads, relative to the root, not to whatever directory the process started in.
        key_file = get("PAIR_PRIVATE_KEY_FILE")
        host_env = env
        if key_file is not None and not Path(key_file).is_absolute():
            host_env = {**env, "PAIR_PRIVATE_KEY_FILE": str(base / key_file)}
        client_id, client_secret = get("PAIR_GITHUB_CLIENT_ID"), get("PAIR_GITHUB_CLIENT_SECRET")
        if (client_id is None) != (client_secret is None):
            raise ConfigError(
                "set both PAIR_GITHUB_CLIENT_ID and PAIR_GITHUB_CLIENT_SECRET (the App's OAuth "
                "client id and a client secret, from the App's settings page), or neither"
            )
        operator = _secret_var(get, "PAIR_OPERATOR_TOKEN", 24)
        return cls(
            github_client_id=client_id,
            github_client_secret=SecretStr(client_secret) if client_secret else None,
            github_oauth_url=_web_url(get("PAIR_GITHUB_OAUTH_URL")),
            operator_token=operator,
            session_secret=_secret_var(get, "PAIR_SESSION_SECRET", 32),
            signin_ttl_s=_seconds_var(get, "PAIR_SIGNIN_TTL_S", 900.0, 60.0, 86_400.0),
            root=base,
            store=store if store.is_absolute() else base / store,
            store_url=SecretStr(store_url) if store_url else None,
            store_lease_s=_lease_s(get("PAIR_STORE_LEASE_S")),
            webhook_secret=SecretStr(secret) if secret else None,
            app_id=_app_id(get("PAIR_APP_ID")),
            private_key=_private_key(
                env["PAIR_PRIVATE_KEY"] if get("PAIR_PRIVATE_KEY") else None,
                get("PAIR_PRIVATE_KEY_FILE"),
                base,
            ),
            app_slug=slug,
            trigger=trigger,
            allowlist=parse_allowlist(env.get("PAIR_ALLOWLIST", "")),
            azure_allowlist=parse_azure_allowlist(env.get(AZURE_ALLOWLIST, "")),
            execution=_execution(get("PAIR_EXECUTION")),
            github_api_url=(get("PAIR_GITHUB_API_URL") or GITHUB_API).rstrip("/"),
            ado_username=username,
            ado_password=SecretStr(password) if password else None,
            ado_secret_header=SecretStr(header) if header else None,
            hosts=HostSettings.from_env(host_env),
            worker_checkouts=_checkouts_dir(get("PAIR_WORKER_CHECKOUTS"), base),
            tick_s=_tick_s(get("PAIR_TICK_S")),
            catchup_s=_catchup_s(get("PAIR_CATCHUP_S")),
            catchup_window_s=_seconds_var(
                get, "PAIR_CATCHUP_WINDOW_S", 3 * 86_400.0, 600.0, 3 * 86_400.0
            ),
            catchup_max=_int_var(get, "PAIR_CATCHUP_MAX", 20, 1, 500),
            worker_concurrency=_int_var(get, "PAIR_WORKER_CONCURRENCY", 4, 1, 64),
            worker_process=_worker_process(get("PAIR_WORKER_PROCESS")),
            limits=EdgeLimits.from_env(get),
            public_url=_public_url(get("PAIR_PUBLIC_URL")),
            access_log=_flag(get, "PAIR_ACCESS_LOG"),
        )

    @property
    def own_worker_process(self) -> bool:
        """Whether `pairbot serve` runs the worker in a process of its own: as
        PAIR_WORKER_PROCESS says, else on SQLite (the edge then answers commands at 1.4-1.7x
        the rate) and not on PostgreSQL (each replica then costs up to a quarter more CPU a command,
        and replicas already spread over the cores; docs/app.md, the command path)."""
        if self.worker_process is not None:
            return self.worker_process == "own"
        return self.store_url is None

    @property
    def github_signin(self) -> bool:
        """Whether GitHub sign-in is configured (the App's OAuth client id and secret)."""
        return self.github_client_id is not None and self.github_client_secret is not None

    @property
    def store_label(self) -> str:
        """Where the store is, for a log line: the SQLite path, or the URL without password."""
        if self.store_url is None:
            return str(self.store)
        return redact_url(self.store_url.get_secret_value())

    def require_webhook_secret(self) -> bytes:
        """The webhook secret as bytes; a ConfigError naming PAIR_WEBHOOK_SECRET if unset."""
        secret = self.webhook_secret.get_secret_value() if self.webhook_secret else ""
        if not secret:
            raise ConfigError(
                "PAIR_WEBHOOK_SECRET is not set: pairbot refuses to serve webhooks it cannot "
                "verify. Set it to the App's webhook secret (or run `pairbot serve --dev` to "
                "generate one for a local try-out)"
            )
        return secret.encode()


def parse_allowlist(text: str) -> frozenset[int]:
    """`PAIR_ALLOWLIST`: comma-separated numeric user ids; anything else names the bad entry."""
    ids: set[int] = set()
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        if not entry.isascii() or not entry.isdigit():
            raise ConfigError(
                f"PAIR_ALLOWLIST entry {entry!r} is not a numeric GitHub user id: the allowlist "
                "takes ids, never logins, because a login can change hands "
                f"(find an id with `gh api users/<login> --jq .id`)"
            )
        ids.add(int(entry))
    return frozenset(ids)


AZURE_ALLOWLIST: Final = "PAIR_AZURE_DEVOPS_ALLOWLIST"


def parse_azure_allowlist(text: str) -> frozenset[str]:
    """`PAIR_AZURE_DEVOPS_ALLOWLIST`: Azure DevOps identity ids (GUIDs); a bad entry is named."""
    try:
        return parse_identity_allowlist(text, AZURE_ALLOWLIST)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def parse_secret_header(text: str) -> tuple[str, str]:
    """`PAIR_ADO_SECRET_HEADER` as (name, value); the error never shows the value."""
    name, sep, value = text.partition(":")
    if not sep or not _HEADER_NAME.fullmatch(name.strip()) or not value.strip():
        raise ConfigError(
            "PAIR_ADO_SECRET_HEADER must be `Header-Name: secret value` (the header an Azure "
            "DevOps service hook subscription sends)"
        )
    return name.strip(), value.strip()


def _check_addressing(trigger: str, slug: str | None) -> None:
    try:
        parse_commands("", trigger=trigger, app_slug=slug)
    except ValueError as err:
        variable = "PAIR_TRIGGER" if "trigger" in str(err) else "PAIR_APP_SLUG"
        raise ConfigError(f"{variable}: {err}") from None


def _app_id(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isascii() or not value.isdigit():
        raise ConfigError(f"PAIR_APP_ID={value!r} is not a number; set it to the App's numeric id")
    return int(value)


def _private_key(text: str | None, file: str | None, root: Path) -> SecretStr | None:
    if text is not None and file is not None:
        raise ConfigError("set PAIR_PRIVATE_KEY or PAIR_PRIVATE_KEY_FILE, not both")
    if file is not None:
        path = Path(file) if Path(file).is_absolute() else root / file
        try:
            text = path.read_text()
        except OSError as err:
            raise ConfigError(
                f"PAIR_PRIVATE_KEY_FILE: cannot read {path} ({err.strerror or err})"
            ) from None
    if text is None:
        return None
    if "\n" not in text and "\\n" in text:
        # A PEM pasted into a one-line variable (an .env file, a CI secret) has literal `\n`s.
        text = text.replace("\\n", "\n")
    if "-----BEGIN" not in text:
        source = "PAIR_PRIVATE_KEY_FILE" if file is not None else "PAIR_PRIVATE_KEY"
        raise ConfigError(f"{source} does not hold a PEM private key (-----BEGIN … KEY-----)")
    return SecretStr(text)


def _checkouts_dir(value: str | None, root: Path) -> Path | None:
    if value is None:
        return None
    path = Path(value) if Path(value).is_absolute() else root / value
    if not path.is_dir():
        raise ConfigError(
            f"PAIR_WORKER_CHECKOUTS={value!r} is not a directory; point it at the directory "
            "that holds the worker's checkouts as <owner>/<name> (or unset it)"
        )
    return path.resolve()


_STORE_SCHEMES = ("postgresql", "postgres")


def _store_url(value: str | None) -> str | None:
    """PAIR_STORE as a PostgreSQL URL, or None when it is a SQLite path (or unset)."""
    if value is None or "://" not in value:
        return None
    parts = urlsplit(value)
    if parts.scheme.lower() not in _STORE_SCHEMES or any(c.isspace() for c in value):
        raise ConfigError(
            f"PAIR_STORE={redact_url(value)!r} is not allowed; allowed: a SQLite file path "
            "(default .pair/app/pairbot.sqlite3) or a PostgreSQL URL postgresql://user@host/db "
            "(postgres:// too)"
        )
    return value


def _lease_s(value: str | None) -> float:
    if value is None:
        return 60.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 1 <= seconds <= 3600:  # also refuses nan and inf
        raise ConfigError(
            f"PAIR_STORE_LEASE_S={value!r} is not allowed; allowed: a number of seconds from 1 "
            "to 3600 (default 60)"
        )
    return seconds


def _public_url(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.startswith(("https://", "http://")) or any(c.isspace() for c in value):
        raise ConfigError(
            f"PAIR_PUBLIC_URL={value!r} is not an http(s) URL; set it to the address the "
            "status page is served at, e.g. https://pairbot.example.com"
        )
    return value.rstrip("/") + "/"


def _secret_var(get: Callable[[str], str | None], name: str, least: int) -> SecretStr | None:
    """A secret setting of at least `least` characters; the error never shows the value."""
    value = get(name)
    if value is None:
        return None
    if len(value) < least:
        raise ConfigError(
            f"{name} is too short ({len(value)} characters); allowed: at least {least} "
            "random characters (e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe())'`)"
        )
    return SecretStr(value)


def _web_url(value: str | None) -> str:
    if value is None:
        return GITHUB_WEB
    if not value.startswith(("https://", "http://")) or any(c.isspace() for c in value):
        raise ConfigError(
            f"PAIR_GITHUB_OAUTH_URL={value!r} is not an http(s) URL; set it to GitHub's web "
            f"address ({GITHUB_WEB}, or your GitHub Enterprise Server's)"
        )
    return value.rstrip("/")


def _interval_s(name: str, value: str | None, *, default: float, low: float, off: str) -> float:
    """A period in seconds, or 0 for `off`: `low` to a day, else a ConfigError naming both."""
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not (seconds == 0 or low <= seconds <= 86_400):  # also refuses nan and inf
        raise ConfigError(
            f"{name}={value!r} is not allowed; allowed: 0 ({off}) or a number of seconds from "
            f"{low:g} to 86400"
        )
    return seconds


_tick_s = partial(
    _interval_s, "PAIR_TICK_S", default=60.0, low=1, off="the worker never ticks on its own"
)
_catchup_s = partial(
    _interval_s, "PAIR_CATCHUP_S", default=600.0, low=60, off="no catch-up of lost deliveries"
)


def _int_var(get: Callable[[str], str | None], name: str, default: int, low: int, high: int) -> int:
    value = get(name)
    if value is None:
        return default
    if value.isascii() and value.isdigit() and low <= int(value) <= high:
        return int(value)
    raise ConfigError(
        f"{name}={value!r} is not allowed; allowed: a whole number from {low} to {high}"
    )


def _flag(get: Callable[[str], str | None], name: str) -> bool:
    value = get(name)
    if value is None:
        return False
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(
        f"{name}={value!r} is not allowed; allowed: 1, true, yes, on, 0, false, no, off"
    )


def _seconds_var(
    get: Callable[[str], str | None], name: str, default: float, low: float, high: float
) -> float:
    value = get(name)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not low <= seconds <= high:  # also refuses nan and inf
        raise ConfigError(
            f"{name}={value!r} is not allowed; allowed: a number of seconds from {low:g} to "
            f"{high:g}"
        )
    return seconds


def _execution(value: str | None) -> Execution:
    if value is None or value == "actions":
        return "actions"
    if value == "worker":
        return "worker"
    raise ConfigError(f"PAIR_EXECUTION={value!r} is not one of: actions, worker")


def _worker_process(value: str | None) -> WorkerProcess | None:
    if value is None or value in ("own", "inline"):
        return cast("WorkerProcess | None", value)
    raise ConfigError(
        f"PAIR_WORKER_PROCESS={value!r} is not allowed; allowed: own (the worker in a process "
        "of its own, the default with SQLite), inline (in the process that answers webhooks, "
        "the default with PostgreSQL)"
    )
