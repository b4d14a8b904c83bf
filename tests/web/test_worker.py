"""The production executor: each kind of job to the cycle's own entry for it, on the checkout
of the job's own repository (app.web.checkouts, with real git repositories)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.cycle.card_cycle import CardCycle
from app.domain.intake.pair_request import PairRequest
from app.errors import ConfigError, UserError
from app.hosting import HostSettings
from app.web.checkouts import RepoId, find_checkout, repo_of_remote
from app.web.jobs import HeadMovedJob, ScopeDecisionJob
from app.web.settings import AppSettings
from app.web.worker import cycle_executor
from tests.support.git import git


def checkout(path: Path, origin: str | None, config: str | None = None) -> Path:
    """A git work tree at `path` whose `origin` is `origin` (none for None)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if origin is not None:
        git(path, "remote", "add", "origin", origin)
    if config is not None:
        (path / ".pair").mkdir()
        (path / ".pair" / "config.yaml").write_text(config)
    return path


def test_the_cycle_executor_hands_each_kind_of_job_to_its_own_cycle_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout(tmp_path / "root", "https://github.com/octocat/Hello-World.git")
    tmp_path = tmp_path / "root"
    calls: list[tuple[Any, ...]] = []

    class Cycle:
        async def handle_request(self, request: PairRequest) -> None:
            calls.append(("request", self, request.card, request.verb))

        async def handle_scope_decision(self, pull: int, comment: str | None = None) -> None:
            calls.append(("scope-decision", self, pull, comment))

        async def handle_head_moved(self, pull: int, head: str) -> None:
            calls.append(("head-moved", self, pull, head))

        async def tick(self, batch: str | None = None) -> None:
            calls.append(("tick", self))

    env = Cycle()

    def for_checkout(root: Path, hosts: HostSettings, deps: Any, **given: Any) -> object:
        assert (root, deps) == (tmp_path, "deps")
        # Each job logs its binding line and links the App's page (none configured here).
        assert callable(given["say"]) and given["run_url"] is None
        return env

    monkeypatch.setattr(CardCycle, "for_checkout", staticmethod(for_checkout))
    execute = cycle_executor(tmp_path, {}, lambda: "deps", hosts=HostSettings())
    head = "a" * 40

    async def go() -> None:
        await execute(PairRequest(card=3, verb="status"), "octocat/Hello-World", 42)
        await execute(ScopeDecisionJob(pull=7, comment_id="123"), "octocat/Hello-World", 42)
        await execute(HeadMovedJob(pull=7, head_sha=head), "octocat/Hello-World", 42)

    asyncio.run(go())
    assert calls == [
        ("request", env, 3, "status"),
        ("scope-decision", env, 7, "123"),
        ("head-moved", env, 7, head),
    ]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("https://github.com/octocat/Hello-World.git", "github:octocat/Hello-World"),
        pytest.param("https://github.com/octocat/Hello-World/", "github:octocat/Hello-World"),
        pytest.param(
            "https://x-access-token:ghs_secret@github.com/o/n.git", "github:o/n", id="credential"
        ),
        pytest.param("git@github.com:octo-org/widgets.git", "github:octo-org/widgets", id="scp"),
        pytest.param("ssh://git@github.com/o/n.git", "github:o/n", id="ssh"),
        # A server is a GitHub Enterprise Server only when its API URL says so (as the binding).
        pytest.param("https://ghe.example.com/o/n.git", None, id="enterprise-unconfigured"),
        pytest.param(
            "https://fabrikam@dev.azure.com/fabrikam/Fabrikam%20Fiber/_git/Web",
            "azure-devops:Fabrikam Fiber/Web",
            id="dev.azure.com",
        ),
        pytest.param(
            "https://dev.azure.com/fabrikam/_git/Fabrikam",
            "azure-devops:Fabrikam/Fabrikam",
            id="default-repository",
        ),
        pytest.param(
            "https://fabrikam.visualstudio.com/DefaultCollection/Fiber/_git/Web",
            "azure-devops:Fiber/Web",
            id="visualstudio.com",
        ),
        pytest.param(
            "git@ssh.dev.azure.com:v3/fabrikam/Fiber/Web", "azure-devops:Fiber/Web", id="ado-ssh"
        ),
        pytest.param("https://tfs.example.com/tfs/Coll/Fiber/_git/Web", None, id="server"),
        pytest.param("/srv/mirrors/hello.git", None, id="path"),
        pytest.param("../forge/repo.git", None, id="relative-path"),
        pytest.param("file:///srv/mirrors/o/n.git", None, id="file-url"),
        pytest.param("https://gitlab.example.com/group/sub/n.git", None, id="three-segments"),
        pytest.param("https://dev.azure.com/fabrikam/Fiber/_git/Web/extra", None, id="ado-tail"),
    ],
)
def test_a_remote_url_names_its_repository(url: str, expected: str | None) -> None:
    found = repo_of_remote(url)
    assert (f"{found.host}:{found.name}" if found is not None else None) == expected


def test_an_enterprise_server_is_github_when_its_api_url_is_set() -> None:
    found = repo_of_remote("git@ghe.example.com:o/n.git", "https://ghe.example.com/api/v3")
    assert found == RepoId("github", "o/n")


LOCAL_ONLY = "hosts: {pm: local, code: local}\n"


@pytest.fixture
def worker_trees(tmp_path: Path) -> tuple[Path, Path]:
    """The root (octocat/Hello-World) and a checkouts directory holding three more trees."""
    root = checkout(tmp_path / "root", "https://github.com/octocat/Hello-World.git")
    trees = tmp_path / "checkouts"
    checkout(trees / "Octo-Org" / "Widgets", "git@github.com:octo-org/widgets.git")
    checkout(trees / "Fabrikam" / "Web", "https://dev.azure.com/fabrikam/Fabrikam/_git/Web")
    # Placed as octo/gamma, but a clone of Hello-World: its origin decides, not its place.
    checkout(trees / "octo" / "gamma", "https://github.com/octocat/Hello-World.git")
    (trees / "octo" / "plain").mkdir(parents=True)  # not a work tree
    return root, trees


@pytest.mark.parametrize(
    ("repo", "installation", "where"),
    [
        pytest.param("octocat/Hello-World", 7, "root", id="root"),
        pytest.param("OCTOCAT/hello-world", 7, "root", id="root-any-case"),
        pytest.param("octo-org/WIDGETS", 7, "Octo-Org/Widgets", id="directory-any-case"),
        pytest.param("Fabrikam/Web", None, "Fabrikam/Web", id="azure-devops"),
        pytest.param("fabrikam", None, "Fabrikam/Web", id="azure-work-item-project"),
    ],
)
def test_a_job_resolves_to_the_checkout_of_its_repository(
    worker_trees: tuple[Path, Path], repo: str, installation: int | None, where: str
) -> None:
    root, trees = worker_trees
    found = find_checkout(repo, installation, root=root, directory=trees, env={})
    assert found.path == (root if where == "root" else trees / where)


@pytest.mark.parametrize(
    ("repo", "installation"),
    [
        pytest.param("octo/gamma", 7, id="placed-but-another-repository"),
        pytest.param("octo/plain", 7, id="not-a-work-tree"),
        pytest.param("octo/missing", 7, id="absent"),
        pytest.param("Fabrikam/Web", 7, id="a-github-job-never-lands-on-azure-devops"),
    ],
)
def test_a_job_without_a_checkout_of_its_repository_is_refused(
    worker_trees: tuple[Path, Path], repo: str, installation: int | None
) -> None:
    root, trees = worker_trees
    with pytest.raises(UserError, match=f"no checkout of {repo}, so nothing ran"):
        find_checkout(repo, installation, root=root, directory=trees, env={})


def test_a_work_item_in_a_project_with_two_checkouts_is_ambiguous(
    worker_trees: tuple[Path, Path],
) -> None:
    root, trees = worker_trees
    checkout(trees / "Fabrikam" / "Api", "https://dev.azure.com/fabrikam/Fabrikam/_git/Api")
    ambiguous = r"\(Fabrikam/Api, Fabrikam/Web\); comment on the pull request instead"
    with pytest.raises(UserError, match=ambiguous):
        find_checkout("Fabrikam", None, root=root, directory=trees, env={})
    # A pull request names its repository: no ambiguity.
    found = find_checkout("Fabrikam/Api", None, root=root, directory=trees, env={})
    assert found.path == trees / "Fabrikam" / "Api"


def test_the_root_may_be_named_by_the_environment_when_its_origin_is_a_path(
    tmp_path: Path,
) -> None:
    root = checkout(tmp_path / "root", "/srv/mirrors/hello.git")
    env = {"PAIR_GITHUB_REPOSITORY": "octocat/Hello-World"}
    assert find_checkout("octocat/hello-world", 7, root=root, directory=None, env=env).path == root
    with pytest.raises(UserError, match="no checkout of octocat/Hello-World"):
        find_checkout("octocat/Hello-World", 7, root=root, directory=None, env={})
    with pytest.raises(UserError, match="no checkout"):  # a subdirectory is not a checkout
        find_checkout("octocat/Hello-World", 7, root=root / ".git", directory=None, env=env)


def test_a_local_forge_root_serves_what_no_checkout_claims(tmp_path: Path) -> None:
    # No hosted origin, and the project binds only the local forge (a `--dev` try-out): the
    # delivery's repository name is not where it publishes.
    local = checkout(tmp_path / "local", None, LOCAL_ONLY)
    assert find_checkout("octocat/Hello-World", 7, root=local, directory=None, env={}).repo is None
    trees = tmp_path / "checkouts"
    claimed = checkout(trees / "octocat" / "Hello-World", "https://github.com/octocat/Hello-World")
    found = find_checkout("octocat/Hello-World", 7, root=local, directory=trees, env={})
    assert found.path == claimed and found.repo == RepoId("github", "octocat/Hello-World")
    # A local-forge project that IS a clone of a hosted repository serves only that one...
    named = checkout(tmp_path / "named", "https://github.com/octo/named.git", LOCAL_ONLY)
    with pytest.raises(UserError, match="no checkout of octocat/Hello-World"):
        find_checkout("octocat/Hello-World", 7, root=named, directory=None, env={})
    # ...unless the App answers on its local forge (`pairbot serve --dev`).
    dev = find_checkout(
        "octocat/Hello-World", 7, root=named, directory=None, env={}, any_repository=True
    )
    assert dev.path == named
    # A root that binds a hosted forge never serves another repository.
    hosted = checkout(tmp_path / "hosted", None, "hosts: {pm: github, code: github}\n")
    with pytest.raises(UserError, match="no checkout"):
        find_checkout("octocat/Hello-World", 7, root=hosted, directory=None, env={})
    # Without `hosts:` the binding is what a run would infer: local with no origin, but an
    # origin on a forge no adapter serves binds nothing (it is never "local by default").
    bare = checkout(tmp_path / "bare", None, "trigger: pair\n")
    assert find_checkout("octocat/Hello-World", 7, root=bare, directory=None, env={}).path == bare
    gitlab = checkout(tmp_path / "gitlab", "https://gitlab.com/o/r.git", "trigger: pair\n")
    with pytest.raises(UserError, match="no checkout"):
        find_checkout("octocat/Hello-World", 7, root=gitlab, directory=None, env={})


def test_the_executor_runs_each_job_on_its_own_checkout_with_that_checkouts_deps(
    worker_trees: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, trees = worker_trees
    ran: list[tuple[Path, str | None, str | None, Any]] = []

    class Cycle:
        async def handle_request(self, request: PairRequest) -> None:
            return None

    def for_checkout(path: Path, hosts: HostSettings, deps: Any, **_: Any) -> object:
        repo = hosts.github_repository
        ado = hosts.azure_project, hosts.azure_repository
        ran.append((path, repo, "/".join(ado) if all(ado) else None, deps))
        return Cycle()

    monkeypatch.setattr(CardCycle, "for_checkout", staticmethod(for_checkout))
    env = {"PAIR_AZURE_DEVOPS_PROJECT": "Elsewhere"}
    execute = cycle_executor(
        root,
        env,
        lambda: "root deps",
        hosts=HostSettings.from_env(env),
        checkouts=trees,
        deps_for=lambda path: f"deps of {path.name}",
    )

    async def go() -> None:
        await execute(PairRequest(card=1, verb="status"), "octocat/Hello-World", 7)
        await execute(PairRequest(card=2, verb="status"), "octo-org/widgets", 7)
        await execute(PairRequest(card=3, verb="status"), "Fabrikam", None)
        with pytest.raises(UserError, match="no checkout of octo/missing"):
            await execute(PairRequest(card=4, verb="status"), "octo/missing", 7)

    asyncio.run(go())
    assert ran == [
        (root, "octocat/Hello-World", None, "root deps"),
        (trees / "Octo-Org" / "Widgets", "octo-org/widgets", None, "deps of Widgets"),
        (trees / "Fabrikam" / "Web", None, "Fabrikam/Web", "deps of Web"),
    ]


def test_a_checkouts_directory_needs_the_deps_of_each_checkout(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="deps_for"):
        cycle_executor(tmp_path, {}, lambda: None, hosts=HostSettings(), checkouts=tmp_path)


def test_pair_worker_checkouts_is_a_directory_relative_to_the_root(tmp_path: Path) -> None:
    (tmp_path / "trees").mkdir()
    assert AppSettings.from_env({}, root=tmp_path).worker_checkouts is None
    relative = AppSettings.from_env({"PAIR_WORKER_CHECKOUTS": "trees"}, root=tmp_path)
    assert relative.worker_checkouts == tmp_path.resolve() / "trees"
    absolute = {"PAIR_WORKER_CHECKOUTS": str(tmp_path / "trees")}
    assert AppSettings.from_env(absolute, root=tmp_path / "x").worker_checkouts == (
        tmp_path.resolve() / "trees"
    )
    with pytest.raises(ConfigError, match="PAIR_WORKER_CHECKOUTS='missing' is not a directory"):
        AppSettings.from_env({"PAIR_WORKER_CHECKOUTS": "missing"}, root=tmp_path)
