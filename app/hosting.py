"""Build the bound hosts from one typed settings object, read once from the environment.

    HostSettings.from_env(env)        every credential as a SecretStr, nothing else reads env
    bind_checkout(declared, settings, root, runner) -> (Resolution, HostSettings)
                                      the binding where pairbot runs (app.domain.card.binding), and
                                      the settings with the repository the origin names
    build_hosts(binding, settings, root) -> BoundHosts(pm, code)

The adapters are imported only for the hosts the binding names: a GitHub tick never imports the
Azure DevOps SDK. When the PM tool and the code host are the same adapter, one instance serves
both (one token cache, one rate-limit window). A missing credential is a `ConfigError` naming
the variable to set; the binding itself (which names exist) is `app.domain.card.binding`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from app.domain.card.binding import (
    Binding,
    Origin,
    Resolution,
    Runner,
    Where,
    choose_binding,
    parse_origin,
)
from app.errors import ConfigError
from hosts.base import Host
from hosts.git import GitError, run_git

LOCAL_FORGE_DIR = Path(".pair") / "forge"


class HostSettings(BaseModel):
    """Credentials and addresses of every host; secrets never appear in repr or logs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    github_repository: str | None = None
    github_api_url: str = "https://api.github.com"
    github_token: SecretStr | None = None
    github_app_id: str | None = None
    github_private_key: SecretStr | None = None
    github_installation_id: int | None = None
    # The token is a workflow's own GITHUB_TOKEN: it acts as github-actions[bot], known without
    # asking GitHub (whose GET /user refuses that token, and counts the refusal).
    github_token_is_actions: bool = False
    azure_organization_url: str | None = None
    azure_project: str | None = None
    azure_repository: str | None = None
    azure_token: SecretStr | None = None
    # The SDK's on-disk resource-location cache. The SDK reads AZURE_DEVOPS_CACHE_DIR only when
    # it is first imported, into module singletons; passed explicitly, it holds for every host.
    azure_cache_dir: str | None = None
    # Completing a card's pull request moves its linked work item to its resolved or done
    # state (`transitionWorkItems`); PAIR_AZURE_DEVOPS_TRANSITION_WORK_ITEMS=false leaves it.
    azure_transition_work_items: bool = True
    local_forge: str | None = None
    # GitHub asks for a pause between mutations (secondary rate limits); tests set 0.
    github_write_spacing_s: float = 1.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HostSettings:
        """Read the documented variables (docs/hosts.md); empty values count as unset."""

        def get(*names: str) -> str | None:
            return next((env[n] for n in names if env.get(n)), None)

        installation = get("PAIR_GITHUB_INSTALLATION_ID")
        if installation is not None and not installation.isdigit():
            raise ConfigError(
                f"PAIR_GITHUB_INSTALLATION_ID={installation!r} is not a number; "
                "set it to the App installation's numeric id"
            )
        token = get("PAIR_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN")
        # The App's own names (docs/app.md) work too: one set of credentials serves the
        # webhook edge and the worker's hosts.
        key = get("PAIR_GITHUB_PRIVATE_KEY", "PAIR_PRIVATE_KEY") or _read_key_file(
            get("PAIR_PRIVATE_KEY_FILE")
        )
        azure_token = get("PAIR_AZURE_DEVOPS_TOKEN", "AZURE_DEVOPS_EXT_PAT", "SYSTEM_ACCESSTOKEN")
        spacing = get("PAIR_GITHUB_WRITE_SPACING_S")
        try:
            spacing_s = float(spacing) if spacing is not None else 1.0
        except ValueError:
            spacing_s = -1.0
        if not 0 <= spacing_s <= 60:  # a minute between writes is already absurd
            raise ConfigError(
                f"PAIR_GITHUB_WRITE_SPACING_S={spacing!r} is not a number of seconds from 0 to 60"
            )
        transition = (get("PAIR_AZURE_DEVOPS_TRANSITION_WORK_ITEMS") or "true").lower()
        if transition not in ("true", "false"):
            raise ConfigError(
                f"PAIR_AZURE_DEVOPS_TRANSITION_WORK_ITEMS={transition!r} is not a switch; "
                "allowed: true (completing a pull request moves its work item on, the default) "
                "or false"
            )
        return cls(
            github_write_spacing_s=spacing_s,
            github_repository=get("PAIR_GITHUB_REPOSITORY", "GITHUB_REPOSITORY"),
            github_api_url=get("PAIR_GITHUB_API_URL", "GITHUB_API_URL") or cls().github_api_url,
            github_token=SecretStr(token) if token else None,
            github_app_id=get("PAIR_GITHUB_APP_ID", "PAIR_APP_ID"),
            github_private_key=SecretStr(key) if key else None,
            github_installation_id=int(installation) if installation else None,
            github_token_is_actions=(get("PAIR_GITHUB_TOKEN_IS_ACTIONS") or "").lower() == "true",
            azure_organization_url=get("PAIR_AZURE_DEVOPS_ORG_URL", "SYSTEM_COLLECTIONURI"),
            azure_project=get("PAIR_AZURE_DEVOPS_PROJECT", "SYSTEM_TEAMPROJECT"),
            azure_repository=get("PAIR_AZURE_DEVOPS_REPOSITORY", "BUILD_REPOSITORY_NAME"),
            azure_token=SecretStr(azure_token) if azure_token else None,
            azure_cache_dir=get("AZURE_DEVOPS_CACHE_DIR"),
            azure_transition_work_items=transition == "true",
            local_forge=get("PAIR_LOCAL_FORGE"),
        )


def _read_key_file(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(
            f"PAIR_PRIVATE_KEY_FILE={path!r} cannot be read ({err.strerror}); point it at the "
            "App's PEM private key"
        ) from None


def origin_url(root: Path) -> str | None:
    """The checkout's `origin` URL (`insteadOf` rewrites applied, as git itself pushes to it),
    read through the one git runner; None when `root` has no origin or is no checkout."""
    try:
        done = run_git(["-C", str(root), "remote", "get-url", "origin"], timeout_s=30, check=False)
    except GitError:
        return None
    return (done.stdout.strip() or None) if done.ok else None


def with_origin(settings: HostSettings, binding: Binding, origin: Origin | None) -> HostSettings:
    """`settings` with the repository the origin names, for a bound host nothing else named it
    for (`GITHUB_REPOSITORY`, `PAIR_AZURE_DEVOPS_*` and an App job's repository win). Pure."""
    if origin is None or origin.repository is None or origin.host not in (binding.pm, binding.code):
        return settings
    update: dict[str, object] = {}
    if origin.host == "github" and not settings.github_repository:
        update["github_repository"] = origin.repository
    if origin.host == "azure-devops":
        project, _, repository = origin.repository.partition("/")
        given = {
            "azure_organization_url": origin.organization_url,
            "azure_project": project,
            "azure_repository": repository,
        }
        update = {k: v for k, v in given.items() if v and not getattr(settings, k)}
    return settings.model_copy(update=update) if update else settings


def bind_checkout(
    declared: Mapping[str, str] | None, settings: HostSettings, root: Path, runner: Runner
) -> tuple[Resolution, HostSettings]:
    """The project's binding where pairbot runs (`app.domain.card.binding.choose_binding`, fed the
    checkout's origin), and `settings` with the repository that origin names."""
    url = origin_url(root)
    origin = parse_origin(url, settings.github_api_url) if url is not None else None
    resolution = choose_binding(declared, Where(runner, origin))
    return resolution, with_origin(settings, resolution.binding, origin)


@dataclass(frozen=True)
class BoundHosts:
    """The PM tool (cards) and the code host (pull requests) for this run."""

    pm: Host
    code: Host


def _need(value: object, variable: str, host: str) -> None:
    if value in (None, ""):
        raise ConfigError(f"the {host} host needs {variable}; set it in the environment")


def _secret(value: SecretStr | None, variable: str, host: str) -> str:
    if value is None or not value.get_secret_value():
        raise ConfigError(f"the {host} host needs {variable}; set it in the environment")
    return value.get_secret_value()


def build_host(name: str, settings: HostSettings, root: Path) -> Host:
    """One adapter by binding name; imports only that adapter."""
    if name == "local":
        from hosts.local import LocalHost  # noqa: PLC0415  # lazy: one adapter per run

        forge = Path(settings.local_forge) if settings.local_forge else root / LOCAL_FORGE_DIR
        return LocalHost(forge)
    if name == "github":
        from hosts.github import GitHubCredentials, GitHubHost, GitHubOptions  # noqa: PLC0415

        _need(settings.github_repository, "GITHUB_REPOSITORY (owner/name)", name)
        repo = str(settings.github_repository)
        options = GitHubOptions(write_spacing_s=settings.github_write_spacing_s)
        if settings.github_app_id:
            key = _secret(settings.github_private_key, "PAIR_GITHUB_PRIVATE_KEY", name)
            _need(settings.github_installation_id, "PAIR_GITHUB_INSTALLATION_ID", name)
            credentials = GitHubCredentials.app(
                settings.github_app_id, key, int(str(settings.github_installation_id))
            )
        else:
            token = _secret(settings.github_token, "GITHUB_TOKEN (or PAIR_GITHUB_APP_ID)", name)
            credentials = (
                GitHubCredentials.actions(token)
                if settings.github_token_is_actions
                else GitHubCredentials.token(token)
            )
        return GitHubHost(repo, credentials, base_url=settings.github_api_url, options=options)
    if name == "azure-devops":
        from hosts.azure_devops import AzureDevOpsHost  # noqa: PLC0415  # the SDK only here

        _need(settings.azure_organization_url, "PAIR_AZURE_DEVOPS_ORG_URL", name)
        _need(settings.azure_project, "PAIR_AZURE_DEVOPS_PROJECT", name)
        _need(settings.azure_repository, "PAIR_AZURE_DEVOPS_REPOSITORY", name)
        token = _secret(
            settings.azure_token, "PAIR_AZURE_DEVOPS_TOKEN (or AZURE_DEVOPS_EXT_PAT)", name
        )
        return AzureDevOpsHost(
            organization_url=str(settings.azure_organization_url),
            project=str(settings.azure_project),
            repository=str(settings.azure_repository),
            token=token,
            cache_dir=settings.azure_cache_dir,
            transition_work_items=settings.azure_transition_work_items,
        )
    # The binding has already refused unknown names; this guards direct callers.
    raise ConfigError(f"no adapter named {name!r}")


def build_hosts(binding: Binding, settings: HostSettings, root: Path) -> BoundHosts:
    """Both hosts of a binding; one shared instance when they are the same adapter."""
    code = build_host(binding.code, settings, root)
    pm = code if binding.pm == binding.code else build_host(binding.pm, settings, root)
    return BoundHosts(pm=pm, code=code)
