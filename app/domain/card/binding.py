"""The host binding: which adapter holds the cards (pm) and which the pull requests (code). Pure.

    choose_binding(declared, where) -> Resolution   the project's binding for this run
    for_card(stored, resolution, card) -> CardBinding  a running card keeps the one it started with
    parse_origin(url, github_api_url) -> Origin     what the `origin` remote URL names
    check_host_name(value)                          config validation: the adapters that exist

The order, first match wins, per key (`pm` and `code` may differ: cards in Azure Boards, code on
GitHub):

    1. declared    `.pair/config.yaml` `hosts: {pm: …, code: …}`
    2. stored      a card that already ran keeps the binding recorded with its run-state
    3. where       inside GitHub Actions (`GITHUB_ACTIONS=true`): github;
                   inside Azure Pipelines (`TF_BUILD=True`): azure-devops
    4. origin      the checkout's `origin` remote: github.com (or the GitHub Enterprise Server
                   whose API URL is configured): github; dev.azure.com, <org>.visualstudio.com
                   and ssh.dev.azure.com: azure-devops
    5. local       no origin, or one that is a path (the local forge's own repository)

An origin on any other forge (gitlab.com, a GitHub Enterprise Server whose API URL is not set)
is refused with the remedy, never bound to the local forge: a card published to a directory
nobody watches would look like pairbot doing nothing.

The caller resolves the binding ONCE at the start of a run, prints `describe(resolution)`, and
stores `binding.to_json()` with a card's run-state the first time the card runs; later runs read
it back with `Binding.from_json()`, so a `config.yaml` edited mid-cycle does not move a running
card to another host (docs/hosts.md).

A declared host without an adapter is `hosts.errors.HostUnsupported` (`host-unsupported`),
naming the declared value and the adapters that exist; the binding never falls back to GitHub.
Names are compared case-insensitively, with surrounding whitespace ignored (`GitHub` is
`github`); nothing else is guessed (`azure_devops` is not `azure-devops`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args
from urllib.parse import unquote, urlsplit

from app.errors import ConfigError, StateCorruptError
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


def check_host_name(value: str) -> str:
    """Config validation of `hosts.pm` / `hosts.code`: a name some adapter answers to.

    Raises `ValueError` (what the config loader turns into its one line naming the file, the
    key and the value) instead of `HostUnsupported`, so a typo is refused when the file is
    read, by `pairbot validate` too, not halfway through a run.
    """
    try:
        host_id(value)
    except HostUnsupported:
        raise ValueError(
            f"no host adapter by that name; the adapters that exist: {', '.join(KNOWN_HOSTS)}"
        ) from None
    return value


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


# ---------------------------------------------------------------- where pairbot runs

Runner = Literal["github-actions", "azure-pipelines", "checkout"]
_RUNNER_HOST: Final[Mapping[Runner, HostId]] = {
    "github-actions": "github",
    "azure-pipelines": "azure-devops",
}
_RUNNER_NAME: Final[Mapping[Runner, str]] = {
    "github-actions": "GitHub Actions",
    "azure-pipelines": "Azure Pipelines",
}
DECLARED_IN: Final = ".pair/config.yaml"


def runner_of(env: Mapping[str, str]) -> Runner:
    """Where pairbot runs, from the variable each CI service sets on every job.

    GitHub Actions sets `GITHUB_ACTIONS=true`
    (https://docs.github.com/en/actions/reference/variables-reference); Azure Pipelines sets
    `TF_BUILD=True` (https://learn.microsoft.com/en-us/azure/devops/pipelines/build/variables).
    """
    if env.get("GITHUB_ACTIONS", "").strip().lower() == "true":
        return "github-actions"
    if env.get("TF_BUILD", "").strip().lower() == "true":
        return "azure-pipelines"
    return "checkout"


@dataclass(frozen=True)
class Origin:
    """What a checkout's `origin` remote names, rebuilt from parsed parts only.

    The raw URL is never kept: it may carry a credential (`https://user:token@host/…`).
    """

    host: HostId | None  # None: a forge no adapter serves
    server: str = ""  # the host name; "" for a local path or a URL that does not parse
    repository: str | None = None  # owner/name on GitHub, project/repo on Azure DevOps
    organization_url: str | None = None  # Azure DevOps: the organization's URL

    @property
    def shown(self) -> str:
        """Safe to print: the server and the repository, nothing else of the URL."""
        if self.host == "local":
            return "a local path"
        if not self.server:
            return "an unrecognised URL"
        return f"{self.server}/{self.repository}" if self.repository else self.server


_HOSTNAME = re.compile(r"^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$")
_GITHUB_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_AZURE_SSH: Final = ("ssh.dev.azure.com", "vs-ssh.visualstudio.com")
_URL_SCHEMES: Final = ("http", "https", "ssh", "git", "git+ssh", "ssh+git")
_GITHUB_SERVERS: Final = ("github.com", "www.github.com", "ssh.github.com")


def github_server(api_url: str) -> str:
    """The git host a GitHub API URL serves: api.github.com is github.com, a GitHub Enterprise
    Server API (`https://HOST/api/v3`) is HOST, GHE.com's `api.SUB.ghe.com` is SUB.ghe.com."""
    try:
        parts = urlsplit(api_url.strip())
    except ValueError:
        return ""
    host = (parts.hostname or "").lower()
    # Only an API served at the root of an `api.` subdomain names its git host without it.
    return host.removeprefix("api.") if parts.path.strip("/") == "" else host


def _split(url: str) -> tuple[str, str] | None:
    """(host, path) of a remote URL; None for a local path; ("", "") for what does not parse."""
    transport, helper, _ = url.partition("::")
    if helper and "/" not in transport and ":" not in transport:
        return "", ""  # git's `<transport>::<address>` remote helpers name no known forge
    if "://" in url:
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
        except ValueError:
            return "", ""
        scheme = parts.scheme.lower()
        if scheme == "file":
            return None
        return (host, parts.path) if scheme in _URL_SCHEMES else ("", "")
    # git's scp-like form `[user@]host:path`: a `:` before any `/`. A one-letter head is a
    # Windows drive (`C:/src/repo`), which git also reads as a path.
    head, sep, path = url.partition(":")
    if not sep or "/" in head or len(head) < 2:
        return None
    return head.rpartition("@")[2].lower(), path


def _clean(segment: str) -> bool:
    # A segment decoded from `%2F`, `%0A` or blanks names no repository a host would serve,
    # and must never reach a printed line.
    return (
        bool(segment)
        and segment.isprintable()
        and "/" not in segment
        and segment.strip() == segment
    )


def parse_origin(url: str, github_api_url: str = "https://api.github.com") -> Origin | None:
    """What the `origin` URL names; None when there is no origin (an empty value). Pure.

    GitHub: github.com, or the server `github_api_url` belongs to (GitHub Enterprise Server),
    as `https://HOST/OWNER/NAME(.git)`, `git@HOST:OWNER/NAME(.git)`, `ssh://git@HOST/…`.
    Azure DevOps: `https://[ORG@]dev.azure.com/ORG/PROJECT/_git/REPO`,
    `https://ORG.visualstudio.com/[DefaultCollection/]PROJECT/_git/REPO`,
    `git@ssh.dev.azure.com:v3/ORG/PROJECT/REPO`. A path (or `file://`) is the local forge.
    """
    text = url.strip()
    if not text:
        return None
    split = _split(text)
    if split is None:
        return Origin("local")
    host, path = split
    if not _HOSTNAME.match(host):
        return Origin(None)
    segments = [unquote(s) for s in path.split("/") if s]
    if segments:
        segments[-1] = segments[-1].removesuffix(".git")
    if not all(_clean(s) for s in segments):
        segments = []
    if host in {*_GITHUB_SERVERS, github_server(github_api_url)}:
        named = len(segments) == 2 and all(_GITHUB_NAME.match(s) for s in segments)
        return Origin("github", host, "/".join(segments) if named else None)
    if host in _AZURE_SSH:
        if len(segments) == 4 and segments[0] == "v3":  # v3/ORG/PROJECT/REPO
            org, project, repo = segments[1:]
            org_url = (
                f"https://dev.azure.com/{org}"
                if host == "ssh.dev.azure.com"
                else f"https://{org}.visualstudio.com"
            )
            return Origin("azure-devops", host, f"{project}/{repo}", org_url)
        return Origin("azure-devops", host)
    if host == "dev.azure.com" or host.endswith(".visualstudio.com"):
        return _azure_https(host, segments)
    return Origin(None, host)


def _azure_https(host: str, segments: list[str]) -> Origin:
    if "_git" not in segments or segments.index("_git") != len(segments) - 2:
        return Origin("azure-devops", host)
    before, repo = segments[: segments.index("_git")], segments[-1]
    if host == "dev.azure.com":
        if not before:
            return Origin("azure-devops", host)
        org_url, before = f"https://dev.azure.com/{before[0]}", before[1:]
    else:
        org_url = f"https://{host}"
        if before[:1] == ["DefaultCollection"]:
            before = before[1:]
    # `…/ORG/_git/REPO` is the project's default repository, named like its project.
    project = before[-1] if before else repo
    return Origin("azure-devops", host, f"{project}/{repo}", org_url)


# ---------------------------------------------------------------- choosing the binding


@dataclass(frozen=True)
class Where:
    """Where pairbot runs, as the plain values a surface read once."""

    runner: Runner = "checkout"
    origin: Origin | None = None  # the parsed `origin` remote; None: the checkout has none


@dataclass(frozen=True)
class Resolution:
    """The project's binding for this run, and why (the printed line says it)."""

    binding: Binding
    because: str


def _inferred(where: Where) -> tuple[HostId, str]:
    origin = where.origin
    if where.runner != "checkout":
        return _RUNNER_HOST[where.runner], f"inferred from {_RUNNER_NAME[where.runner]}"
    if origin is None:
        return "local", "no origin remote: the local forge"
    if origin.host is None:
        raise ConfigError(
            f"the origin remote is on {origin.shown}, which no pairbot adapter serves; declare "
            f"`hosts: {{pm: …, code: …}}` in {DECLARED_IN} (adapters: {', '.join(KNOWN_HOSTS)}), "
            "or, for GitHub Enterprise Server, set PAIR_GITHUB_API_URL to its API URL"
        )
    if origin.host == "local":
        return "local", "the origin remote is a local path: the local forge"
    return origin.host, f"inferred from the origin remote {origin.shown}"


def choose_binding(declared: Mapping[str, str] | None, where: Where) -> Resolution:
    """The project's binding: each of `pm` and `code` as declared, else where pairbot runs.

    `declared` holds only the keys `.pair/config.yaml` writes (None or empty: no `hosts:`);
    an unknown name raises `HostUnsupported`. An origin on a forge no adapter serves raises
    `ConfigError` only when a key is left to be inferred from it.
    """
    named = {key: host_id(value) for key, value in (declared or {}).items()}
    unknown = sorted(set(named) - {"pm", "code"})
    if unknown:
        raise ValueError(f"hosts has only pm and code; unknown: {', '.join(unknown)}")
    if len(named) == 2:
        return Resolution(Binding(named["pm"], named["code"]), f"declared in {DECLARED_IN}")
    host, reason = _inferred(where)
    binding = Binding(pm=named.get("pm", host), code=named.get("code", host))
    if named:
        (key,) = named
        reason = f"{key} declared in {DECLARED_IN}, {'code' if key == 'pm' else 'pm'} {reason}"
    return Resolution(binding, reason)


def describe(resolution: Resolution) -> str:
    """The one line a run prints about its binding."""
    binding = resolution.binding
    return f"pairbot: hosts pm={binding.pm} code={binding.code} ({resolution.because})"


@dataclass(frozen=True)
class CardBinding:
    """The binding one card runs with, whether to record it, and what to say about it."""

    binding: Binding
    store: bool  # the card's first run: record the binding with its run-state
    line: str | None = None  # said when the stored binding overrides the project's


def for_card(stored: Binding | None, resolution: Resolution, card: int) -> CardBinding:
    """A card that already ran keeps the binding stored with its run-state (a running card
    never moves host); a card running for the first time takes the project's."""
    if stored is None:
        return CardBinding(resolution.binding, store=True)
    if stored == resolution.binding:
        return CardBinding(stored, store=False)
    now = resolution.binding
    return CardBinding(
        stored,
        store=False,
        line=(
            f"pairbot: card #{card} keeps hosts pm={stored.pm} code={stored.code} (stored with "
            f"its run-state when it first ran; the project now resolves pm={now.pm} "
            f"code={now.code}, {resolution.because})"
        ),
    )
