"""Which checkout a worker job runs on: the git work tree whose own repository is the job's.

    repo_of_remote(url, github_api_url)    the repository a remote URL names (pure: the
                                           binding's own `parse_origin`)
    choose(repo, installation, found, …)   the checkout for a job, or why there is none (pure)
    find_checkout(repo, installation, root, directory, env)
                                           the shell: read the candidates' remotes, then choose
    acting_as(hosts, repo, installation)   the hosts' settings a step on that checkout uses (pure)

An App installed on several repositories runs, in `execution: worker`, every repository's jobs
in one process. A job must run on a checkout of ITS repository: a card of repository B run on
A's tree would commit A's code to B's branch and publish it on B. The candidates are the
project root and, when `PAIR_WORKER_CHECKOUTS` names a directory, the checkouts in it laid out
as `<directory>/<owner>/<name>` (`<project>/<repo>` for Azure DevOps). A candidate counts only
if it is the top of a git work tree and its `origin` remote names the job's repository
(case-insensitively, as both hosts compare names; a GitHub Enterprise Server counts when its API
URL is set, as for the binding); the root may name its repository with
`PAIR_GITHUB_REPOSITORY` (or `PAIR_AZURE_DEVOPS_PROJECT` + `_REPOSITORY`) when its `origin` is
not a host's URL (a local mirror, say). Nothing else is guessed: no checkout is a `UserError`
that says how to add one, and nothing runs.

Two cases are not one-to-one:

- An Azure Boards work-item comment names only its project: the checkout is the one in that
  project; several are ambiguous and refused.
- The root serves every job no checkout claims when the App answers on the root's local forge
  (`pairbot serve --dev`, `any_repository`), or when the root names no hosted repository and
  the binding it resolves (`app.domain.card.binding`) is `local` for both keys: either way it
  publishes to its own local forge, never to the repository a delivery names.

A GitHub job carries its installation id and an Azure DevOps job none, so a GitHub job never
lands on an Azure DevOps checkout of the same name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from app.cycle.card_cycle import project_binding
from app.domain.card.binding import parse_origin
from app.errors import UserError
from app.hosting import HostSettings
from hosts.errors import HostUnsupported
from hosts.git import GitError, run_git

HostKind = Literal["github", "azure-devops"]
_GIT_TIMEOUT_S: Final = 30.0
GITHUB_API: Final = "https://api.github.com"


@dataclass(frozen=True)
class RepoId:
    """A repository as a host names it: `owner/name` on GitHub, `project/repo` on Azure DevOps."""

    host: HostKind
    name: str

    @property
    def project(self) -> str:
        return self.name.partition("/")[0]

    def serves(self, repo: str, installation: int | None) -> bool:
        """Whether a job for `repo` (with this installation) belongs to this repository."""
        if installation is not None and self.host != "github":
            return False  # only GitHub jobs carry an installation
        if "/" not in repo:  # an Azure Boards work item names only its project
            return self.host == "azure-devops" and self.project.casefold() == repo.casefold()
        return self.name.casefold() == repo.casefold()


@dataclass(frozen=True)
class Checkout:
    """A work tree the worker may run a job on, and the repository it is a checkout of."""

    path: Path
    repo: RepoId | None  # None: the local-host root, which serves any repository


def repo_of_remote(url: str, github_api_url: str = GITHUB_API) -> RepoId | None:
    """The repository a git remote URL names; None for a path or a forge no adapter serves. Pure.

    What the URL names is `app.domain.card.binding.parse_origin`'s answer, the one every binding
    uses: github.com or the GitHub Enterprise Server `github_api_url` belongs to, Azure DevOps
    (dev.azure.com, <org>.visualstudio.com, ssh.dev.azure.com). A credential in the URL is
    never kept.
    """
    origin = parse_origin(url, github_api_url)
    if origin is None or origin.repository is None:
        return None
    if origin.host == "github":
        return RepoId("github", origin.repository)
    if origin.host == "azure-devops":
        return RepoId("azure-devops", origin.repository)
    return None


def github_api_url(env: Mapping[str, str] | None) -> str:
    """The GitHub API URL the environment names (docs/hosts.md), which says which server is a
    GitHub Enterprise Server; github.com's without one."""
    env = env or {}
    return (env.get("PAIR_GITHUB_API_URL") or env.get("GITHUB_API_URL") or GITHUB_API).strip()


def choose(
    repo: str,
    installation: int | None,
    found: Sequence[Checkout],
    *,
    local_root: Path | None,
    directory_set: bool,
) -> Checkout:
    """The checkout `repo`'s job runs on, from the candidates in preference order. Pure.

    Several checkouts of one repository (the root and one in the directory, say) resolve to
    the first, always the same, so one card's run-state never splits across two trees.
    """
    matching = [c for c in found if c.repo is not None and c.repo.serves(repo, installation)]
    names = sorted({c.repo.name for c in matching if c.repo is not None}, key=str.casefold)
    if len({n.casefold() for n in names}) > 1:
        raise UserError(
            f"a work-item comment names only its project ({repo}), and this pairbot worker "
            f"has checkouts of {len(names)} of its repositories ({', '.join(names)}); comment "
            "on the pull request instead"
        )
    if matching:
        return matching[0]
    if local_root is not None:
        return Checkout(local_root, None)
    shape = repo if "/" in repo else f"{repo}/<repository>"
    where = "in its checkouts directory" if directory_set else "in a checkouts directory"
    raise UserError(
        f"this pairbot worker has no checkout of {repo}, so nothing ran. Its operator can add "
        f"one: a clone of the repository at {shape} {where} (PAIR_WORKER_CHECKOUTS; see "
        "docs/app.md, worker mode)"
    )


# -- the shell ------------------------------------------------------------------------------------


def _git(path: Path, *args: str) -> str | None:
    """git's stdout in `path` (through `hosts.git`), or None when it fails."""
    try:
        done = run_git(["-C", str(path), *args], timeout_s=_GIT_TIMEOUT_S, check=False)
    except GitError:
        return None
    return done.stdout.strip() if done.ok else None


def is_work_tree_top(path: Path) -> bool:
    """`path` is the top of a git work tree (a subdirectory of one is not a checkout)."""
    top = _git(path, "rev-parse", "--show-toplevel")
    return top is not None and Path(top).resolve() == path.resolve()


def checkout_repo(
    path: Path, env: Mapping[str, str] | None = None, *, api_url: str | None = None
) -> RepoId | None:
    """The repository the work tree at `path` is a checkout of: its `origin` remote, else
    (for the root, given `env`) the repository the environment names. `api_url` (else the
    one `env` names) says which server is a GitHub Enterprise Server."""
    if not path.is_dir() or not is_work_tree_top(path):
        return None
    url = _git(path, "config", "--get", "remote.origin.url")
    found = repo_of_remote(url, api_url or github_api_url(env)) if url else None
    return found or (configured_repo(env) if env is not None else None)


def configured_repo(env: Mapping[str, str]) -> RepoId | None:
    """The repository the environment names (docs/hosts.md's variables), if any."""
    github = (env.get("PAIR_GITHUB_REPOSITORY") or "").strip()
    if github.count("/") == 1 and all(github.split("/")):
        return RepoId("github", github)
    project = (env.get("PAIR_AZURE_DEVOPS_PROJECT") or "").strip()
    repository = (env.get("PAIR_AZURE_DEVOPS_REPOSITORY") or "").strip()
    if project and repository:
        return RepoId("azure-devops", f"{project}/{repository}")
    return None


def acting_as(hosts: HostSettings, repo: RepoId, installation: int | None) -> HostSettings:
    """`hosts` acting as `repo`: a GitHub repository as `installation` (when known), an Azure
    DevOps one as its project and repository (a work item names only its project). Pure."""
    if repo.host == "azure-devops":
        project, _, repository = repo.name.partition("/")
        return hosts.model_copy(update={"azure_project": project, "azure_repository": repository})
    update: dict[str, object] = {"github_repository": repo.name}
    if installation is not None:
        update["github_installation_id"] = installation
    return hosts.model_copy(update=update)


def binds_only_local(root: Path) -> bool:
    """The root is a pairbot project whose cards and pull requests live on the local forge:
    the binding a run on it chooses (`app.domain.card.binding`: `hosts:` as declared, else its
    `origin` remote, `local` only when that is absent or a path) is local for both."""
    if not (root / ".pair" / "config.yaml").is_file() or not is_work_tree_top(root):
        return False

    try:
        resolution, _ = project_binding(root, HostSettings())
    except (UserError, HostUnsupported, ValueError):
        return False  # a config that does not parse, or a forge no adapter serves: not local
    return resolution.binding.pm == resolution.binding.code == "local"


def _entries(directory: Path, name: str | None) -> list[Path]:
    """Subdirectories of `directory` named `name` case-insensitively (all of them for None)."""
    try:
        children = sorted(p for p in directory.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p for p in children if name is None or p.name.casefold() == name.casefold()]


def checkout_dirs(directory: Path) -> list[Path]:
    """Every `<owner>/<name>` directory under `directory` (PAIR_WORKER_CHECKOUTS), sorted;
    none when it cannot be read. Whether each is a checkout of that repository is
    `find_checkout`'s to decide; listing them serves the status page and the ticks."""
    return [repo for owner in _entries(directory, None) for repo in _entries(owner, None)]


def find_checkout(
    repo: str,
    installation: int | None,
    *,
    root: Path,
    directory: Path | None,
    env: Mapping[str, str],
    any_repository: bool = False,
) -> Checkout:
    """The checkout a job for `repo` runs on (blocking: run it in a thread); else UserError."""
    api_url = github_api_url(env)
    root_repo = checkout_repo(root, env, api_url=api_url)
    found = [Checkout(root, root_repo)]
    if directory is not None:
        owner, _, name = repo.partition("/")
        for owner_dir in _entries(directory, owner):
            for path in _entries(owner_dir, name or None):
                found.append(Checkout(path, checkout_repo(path, api_url=api_url)))
    claimed = any(c.repo is not None and c.repo.serves(repo, installation) for c in found)
    # The fallback only for a job no checkout claims: a checkout of the repository wins.
    serves_any = not claimed and (any_repository or (root_repo is None and binds_only_local(root)))
    local_root = root if serves_any else None
    return choose(
        repo, installation, found, local_root=local_root, directory_set=directory is not None
    )
