"""`pairbot card` / `pairbot tick` bind the hosts where they run: with no `hosts:` declared, a
checkout whose `origin` is on GitHub binds GitHub (and names its repository), and says so once
on stderr; an unknown host name is refused by `pairbot validate` in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import run
from app.cycle.card_cycle import project_binding
from app.errors import ConfigError
from app.hosting import HostSettings
from tests.support.git import git, init_repo


def checkout(tmp: Path, origin: str | None, config: str = "trigger: pair\n") -> Path:
    root = tmp / "repo"
    init_repo(root, {".pair/config.yaml": config, "README.md": "# r\n"})
    if origin is not None:
        git(root, "remote", "add", "origin", origin)
    return root


# No credential in the environment: the GitHub host is bound, then refuses to build without
# its token, so the test reaches no network and the error names what the binding needs.
BASE_ENV = {"PATH": "/usr/bin:/bin"}


@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        pytest.param("https://github.com/octo/widget.git", "github.com/octo/widget", id="https"),
        pytest.param("git@github.com:octo/widget.git", "github.com/octo/widget", id="ssh"),
        pytest.param(
            "https://x-access-token:ghs_SECRET@GitHub.com/octo/widget",
            "github.com/octo/widget",
            id="token-in-url",
        ),
    ],
)
def test_a_github_origin_with_no_hosts_binds_github(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], origin: str, shown: str
) -> None:
    root = checkout(tmp_path, origin)
    with pytest.raises(ConfigError, match="the github host needs GITHUB_TOKEN"):
        run(["--root", str(root), "card", "1", "status"], BASE_ENV)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"pairbot: hosts pm=github code=github (inferred from the origin remote {shown})"
    ]
    assert "SECRET" not in err


def test_the_origin_names_the_repository_when_nothing_else_does(tmp_path: Path) -> None:
    root = checkout(tmp_path, "git@github.com:octo/widget.git")
    _, settings = project_binding(root, HostSettings())
    assert settings.github_repository == "octo/widget"
    _, named = project_binding(root, HostSettings(github_repository="other/repo"))
    assert named.github_repository == "other/repo"  # GITHUB_REPOSITORY wins


def test_inside_github_actions_with_no_origin_binds_github(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = checkout(tmp_path, None)
    env = {**BASE_ENV, "GITHUB_ACTIONS": "true"}
    with pytest.raises(ConfigError, match="GITHUB_REPOSITORY"):
        run(["--root", str(root), "tick"], env)
    assert capsys.readouterr().err.splitlines() == [
        "pairbot: hosts pm=github code=github (inferred from GitHub Actions)"
    ]


def test_a_declared_host_wins_over_the_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = "hosts:\n  pm: local\n  code: local\n"
    root = checkout(tmp_path, "https://github.com/octo/widget.git", config)
    assert run(["--root", str(root), "tick"], BASE_ENV) == 0
    err = capsys.readouterr().err
    assert "pairbot: hosts pm=local code=local (declared in .pair/config.yaml)" in err


def test_an_origin_on_a_forge_without_adapter_is_refused(tmp_path: Path) -> None:
    root = checkout(tmp_path, "https://oauth2:glpat-SECRET@gitlab.com/o/r.git")
    with pytest.raises(ConfigError) as caught:
        run(["--root", str(root), "tick"], BASE_ENV)
    assert "gitlab.com" in str(caught.value) and "SECRET" not in str(caught.value)


def test_validate_refuses_an_unknown_host_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = checkout(tmp_path, None, "hosts:\n  pm: gitlab\n")
    with pytest.raises(ConfigError) as caught:
        run(["--root", str(root), "validate"], BASE_ENV)
    path = root / ".pair" / "config.yaml"
    assert str(caught.value) == (
        f"{path}: hosts.pm: no host adapter by that name; the adapters that exist: "
        "github, azure-devops, local (got 'gitlab')"
    )
