"""Choosing the host binding: declared > stored for a running card > where pairbot runs > origin
> local. Pure, table-driven, with hostile and odd origin URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.card.binding import (
    Binding,
    Origin,
    Resolution,
    Runner,
    Where,
    choose_binding,
    describe,
    for_card,
    github_server,
    parse_origin,
    runner_of,
)
from app.engine.manifest import load_project_config
from app.errors import ConfigError
from hosts.errors import HostUnsupported

GHES_API = "https://ghe.example.com/api/v3"


@pytest.mark.parametrize(
    ("env", "runner"),
    [
        pytest.param({}, "checkout", id="plain"),
        pytest.param({"GITHUB_ACTIONS": "true"}, "github-actions", id="actions"),
        pytest.param({"GITHUB_ACTIONS": "True "}, "github-actions", id="actions-case"),
        pytest.param({"GITHUB_ACTIONS": "false"}, "checkout", id="actions-false"),
        pytest.param({"TF_BUILD": "True"}, "azure-pipelines", id="pipelines"),
        pytest.param({"TF_BUILD": "1"}, "checkout", id="pipelines-not-true"),
        pytest.param(
            {"GITHUB_ACTIONS": "true", "TF_BUILD": "True"}, "github-actions", id="both-github-first"
        ),
    ],
)
def test_runner_of(env: dict[str, str], runner: Runner) -> None:
    assert runner_of(env) == runner


@pytest.mark.parametrize(
    ("api", "server"),
    [
        pytest.param("https://api.github.com", "github.com", id="dotcom"),
        pytest.param("https://api.github.com/", "github.com", id="dotcom-slash"),
        pytest.param(GHES_API, "ghe.example.com", id="ghes"),
        pytest.param("https://api.corp.example/api/v3", "api.corp.example", id="ghes-named-api"),
        pytest.param("https://api.octo.ghe.com", "octo.ghe.com", id="ghe-com"),
        pytest.param("http://[::1", "", id="does-not-parse"),
    ],
)
def test_github_server(api: str, server: str) -> None:
    assert github_server(api) == server


GH = "github"
AZ = "azure-devops"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # GitHub, every form git accepts
        pytest.param("https://github.com/o/r", Origin(GH, "github.com", "o/r"), id="https"),
        pytest.param("https://github.com/o/r.git", Origin(GH, "github.com", "o/r"), id="dot-git"),
        pytest.param("https://github.com/o/r.git/", Origin(GH, "github.com", "o/r"), id="slash"),
        pytest.param("git@github.com:o/r.git", Origin(GH, "github.com", "o/r"), id="scp"),
        pytest.param("github.com:o/r", Origin(GH, "github.com", "o/r"), id="scp-no-user"),
        pytest.param("ssh://git@github.com/o/r", Origin(GH, "github.com", "o/r"), id="ssh"),
        pytest.param(
            "ssh://git@ssh.github.com:443/o/r.git",
            Origin(GH, "ssh.github.com", "o/r"),
            id="ssh-443",
        ),
        pytest.param(
            "HTTPS://GitHub.COM/Oct/Repo", Origin(GH, "github.com", "Oct/Repo"), id="upper"
        ),
        pytest.param("  https://github.com/o/r \n", Origin(GH, "github.com", "o/r"), id="blanks"),
        pytest.param(
            "https://x-access-token:ghs_SECRET@github.com/o/r.git",
            Origin(GH, "github.com", "o/r"),
            id="token-in-url",
        ),
        pytest.param("https://github.com/o", Origin(GH, "github.com"), id="no-name"),
        pytest.param("https://github.com/o/r/x", Origin(GH, "github.com"), id="three-segments"),
        pytest.param("https://github.com/o/r%0A::x", Origin(GH, "github.com"), id="newline"),
        pytest.param("https://github.com/o%2Fp/r", Origin(GH, "github.com"), id="encoded-slash"),
        pytest.param("https://github.com/o/r%20x", Origin(GH, "github.com"), id="space"),
        pytest.param(
            "https://ghe.example.com/o/r", Origin(GH, "ghe.example.com", "o/r"), id="ghes"
        ),
        # Azure DevOps
        pytest.param(
            "https://dev.azure.com/org/proj/_git/repo",
            Origin(AZ, "dev.azure.com", "proj/repo", "https://dev.azure.com/org"),
            id="azure-https",
        ),
        pytest.param(
            "https://org@dev.azure.com/org/My%20Project/_git/repo",
            Origin(AZ, "dev.azure.com", "My Project/repo", "https://dev.azure.com/org"),
            id="azure-user-and-space",
        ),
        pytest.param(
            "https://dev.azure.com/org/_git/proj",
            Origin(AZ, "dev.azure.com", "proj/proj", "https://dev.azure.com/org"),
            id="azure-default-repo",
        ),
        pytest.param(
            "https://org.visualstudio.com/DefaultCollection/proj/_git/repo",
            Origin(AZ, "org.visualstudio.com", "proj/repo", "https://org.visualstudio.com"),
            id="visualstudio",
        ),
        pytest.param(
            "https://ORG.VisualStudio.com/proj/_git/repo",
            Origin(AZ, "org.visualstudio.com", "proj/repo", "https://org.visualstudio.com"),
            id="visualstudio-upper",
        ),
        pytest.param(
            "git@ssh.dev.azure.com:v3/org/proj/repo",
            Origin(AZ, "ssh.dev.azure.com", "proj/repo", "https://dev.azure.com/org"),
            id="azure-ssh",
        ),
        pytest.param(
            "org@vs-ssh.visualstudio.com:v3/org/proj/repo",
            Origin(AZ, "vs-ssh.visualstudio.com", "proj/repo", "https://org.visualstudio.com"),
            id="visualstudio-ssh",
        ),
        pytest.param(
            "git@ssh.dev.azure.com:v2/org/proj", Origin(AZ, "ssh.dev.azure.com"), id="azure-ssh-odd"
        ),
        pytest.param(
            "https://dev.azure.com/org/proj/_git/repo/extra",
            Origin(AZ, "dev.azure.com"),
            id="azure-git-not-last",
        ),
        pytest.param("https://dev.azure.com/_git/repo", Origin(AZ, "dev.azure.com"), id="no-org"),
        # the local forge: paths
        pytest.param("/srv/forge/repo.git", Origin("local"), id="absolute-path"),
        pytest.param("../forge/repo", Origin("local"), id="relative-path"),
        pytest.param("./a:b", Origin("local"), id="path-with-colon"),
        pytest.param("file:///srv/forge/repo.git", Origin("local"), id="file-url"),
        pytest.param("C:/src/repo", Origin("local"), id="windows-drive"),
        # forges with no adapter, and what does not parse
        pytest.param("https://gitlab.com/o/r.git", Origin(None, "gitlab.com"), id="gitlab"),
        pytest.param("git@bitbucket.org:o/r.git", Origin(None, "bitbucket.org"), id="bitbucket"),
        pytest.param("https://ghe.other.com/o/r", Origin(None, "ghe.other.com"), id="other-ghes"),
        pytest.param("ext::sh -c evil", Origin(None), id="ext-transport"),
        pytest.param("http://[::1/o/r", Origin(None), id="bad-ipv6"),
        pytest.param("https://bad_host!/o/r", Origin(None), id="bad-hostname"),
    ],
)
def test_parse_origin(url: str, expected: Origin) -> None:
    assert parse_origin(url, GHES_API) == expected


def test_an_empty_origin_is_none() -> None:
    assert parse_origin("  ") is None


@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        pytest.param(Origin(GH, "github.com", "o/r"), "github.com/o/r", id="repo"),
        pytest.param(Origin(GH, "github.com"), "github.com", id="server"),
        pytest.param(Origin("local"), "a local path", id="path"),
        pytest.param(Origin(None), "an unrecognised URL", id="unparsed"),
    ],
)
def test_origin_shown(origin: Origin, shown: str) -> None:
    assert origin.shown == shown


ACTIONS = Where("github-actions")
PIPELINES = Where("azure-pipelines")
ON_GITHUB = Where("checkout", Origin(GH, "github.com", "o/r"))
ON_AZURE = Where("checkout", Origin(AZ, "dev.azure.com", "p/r", "https://dev.azure.com/o"))


@pytest.mark.parametrize(
    ("declared", "where", "binding", "because"),
    [
        pytest.param(
            {"pm": "local", "code": "local"},
            ACTIONS,
            Binding("local", "local"),
            "declared in .pair/config.yaml",
            id="declared-wins-over-actions",
        ),
        pytest.param(
            {"pm": "AZURE-DEVOPS", "code": "github"},
            ON_GITHUB,
            Binding("azure-devops", "github"),
            "declared in .pair/config.yaml",
            id="declared-mixed",
        ),
        pytest.param(None, ACTIONS, Binding(GH, GH), "inferred from GitHub Actions", id="actions"),
        pytest.param(
            {},
            Where("github-actions", Origin(AZ, "dev.azure.com")),
            Binding(GH, GH),
            "inferred from GitHub Actions",
            id="actions-beats-origin",
        ),
        pytest.param(
            None, PIPELINES, Binding(AZ, AZ), "inferred from Azure Pipelines", id="pipelines"
        ),
        pytest.param(
            None,
            ON_GITHUB,
            Binding(GH, GH),
            "inferred from the origin remote github.com/o/r",
            id="origin-github",
        ),
        pytest.param(
            None,
            ON_AZURE,
            Binding(AZ, AZ),
            "inferred from the origin remote dev.azure.com/p/r",
            id="origin-azure",
        ),
        pytest.param(
            None, Where(), Binding("local", "local"), "no origin remote: the local forge", id="none"
        ),
        pytest.param(
            None,
            Where("checkout", Origin("local")),
            Binding("local", "local"),
            "the origin remote is a local path: the local forge",
            id="path",
        ),
        pytest.param(
            {"pm": "azure-devops"},
            ACTIONS,
            Binding(AZ, GH),
            "pm declared in .pair/config.yaml, code inferred from GitHub Actions",
            id="pm-declared-code-inferred",
        ),
        pytest.param(
            {"code": "local"},
            ON_GITHUB,
            Binding(GH, "local"),
            "code declared in .pair/config.yaml, pm inferred from the origin remote github.com/o/r",
            id="code-declared-pm-inferred",
        ),
        pytest.param(
            {"pm": "github", "code": "github"},
            Where("checkout", Origin(None, "gitlab.com")),
            Binding(GH, GH),
            "declared in .pair/config.yaml",
            id="declared-never-looks-at-origin",
        ),
    ],
)
def test_choose_binding(
    declared: dict[str, str] | None, where: Where, binding: Binding, because: str
) -> None:
    resolution = choose_binding(declared, where)
    assert resolution == Resolution(binding, because)
    assert describe(resolution) == (
        f"pairbot: hosts pm={binding.pm} code={binding.code} ({because})"
    )


def test_an_unknown_declared_host_halts() -> None:
    with pytest.raises(HostUnsupported, match=r"'gitlab'.*github, azure-devops, local"):
        choose_binding({"pm": "gitlab"}, ACTIONS)


def test_an_unknown_hosts_key_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown: wiki"):
        choose_binding({"wiki": "github"}, ACTIONS)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("https://oauth2:glpat-SECRET@gitlab.com/o/r.git", id="gitlab-token"),
        pytest.param("https://user:SECRET@ghe.other.com/o/r", id="unconfigured-ghes"),
        pytest.param("ext::SECRET", id="unparsed"),
    ],
)
def test_an_origin_on_a_forge_without_adapter_is_refused_without_its_credential(url: str) -> None:
    origin = parse_origin(url)
    assert origin is not None
    with pytest.raises(ConfigError) as caught:
        choose_binding(None, Where("checkout", origin))
    message = str(caught.value)
    assert "SECRET" not in message
    assert "\n" not in message
    assert "hosts:" in message and "github, azure-devops, local" in message


@given(
    user=st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), min_size=1),
    secret=st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), min_size=8),
    host=st.sampled_from(["github.com", "dev.azure.com", "gitlab.com", "GitHub.com"]),
    path=st.sampled_from(["o/r.git", "org/p/_git/r", "x"]),
)
def test_a_credential_in_the_url_is_never_shown(
    user: str, secret: str, host: str, path: str
) -> None:
    origin = parse_origin(f"https://{user}:{secret}@{host}/{path}")
    assert origin is not None
    shown = origin.shown + repr(origin)
    if origin.host is not None:
        shown += describe(choose_binding(None, Where("checkout", origin)))
    assert secret not in shown


@given(st.text(max_size=200))
def test_parse_origin_is_total(url: str) -> None:
    origin = parse_origin(url, GHES_API)
    assert origin is None or origin.shown.isprintable()


PROJECT = Resolution(Binding(GH, GH), "inferred from GitHub Actions")


def test_a_card_running_for_the_first_time_takes_and_stores_the_projects() -> None:
    chosen = for_card(None, PROJECT, 7)
    assert (chosen.binding, chosen.store, chosen.line) == (Binding(GH, GH), True, None)


def test_a_card_whose_stored_binding_agrees_says_nothing() -> None:
    chosen = for_card(Binding(GH, GH), PROJECT, 7)
    assert (chosen.binding, chosen.store, chosen.line) == (Binding(GH, GH), False, None)


def test_a_stored_binding_wins_over_a_changed_config_and_says_so() -> None:
    declared = choose_binding({"pm": "azure-devops", "code": "github"}, ACTIONS)
    chosen = for_card(Binding("local", "local"), declared, 3)
    assert chosen.binding == Binding("local", "local")
    assert not chosen.store
    assert chosen.line == (
        "pairbot: card #3 keeps hosts pm=local code=local (stored with its run-state when it "
        "first ran; the project now resolves pm=azure-devops code=github, declared in "
        ".pair/config.yaml)"
    )


@pytest.mark.parametrize(
    ("yaml", "key", "value"),
    [
        pytest.param("hosts:\n  pm: gitlab\n", "hosts.pm", "gitlab", id="pm"),
        pytest.param(
            "hosts:\n  pm: github\n  code: azure_devops\n", "hosts.code", "azure_devops", id="code"
        ),
    ],
)
def test_config_validation_refuses_an_unknown_host_in_one_line(
    tmp_path: Path, yaml: str, key: str, value: str
) -> None:
    (tmp_path / ".pair").mkdir()
    path = tmp_path / ".pair" / "config.yaml"
    path.write_text(yaml)
    with pytest.raises(ConfigError) as caught:
        load_project_config(tmp_path)
    assert str(caught.value) == (
        f"{path}: {key}: no host adapter by that name; the adapters that exist: "
        f"github, azure-devops, local (got {value!r})"
    )


def test_config_accepts_known_hosts_in_any_case(tmp_path: Path) -> None:
    (tmp_path / ".pair").mkdir()
    (tmp_path / ".pair" / "config.yaml").write_text("hosts:\n  pm: GitHub\n")
    project = load_project_config(tmp_path)
    assert project.hosts.model_fields_set == {"pm"}
