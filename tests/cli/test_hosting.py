"""Building the bound hosts: one settings object, lazy adapters, clear missing-credential errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.domain.card.binding import resolve_binding
from app.errors import ConfigError
from app.hosting import HostSettings, build_hosts
from hosts.errors import HostUnsupported
from hosts.local import LocalHost


def test_local_is_the_default_and_one_instance_serves_both(tmp_path: Path) -> None:
    hosts = build_hosts(resolve_binding({"pm": "local", "code": "local"}), HostSettings(), tmp_path)
    assert isinstance(hosts.code, LocalHost)
    assert hosts.pm is hosts.code
    assert (tmp_path / ".pair" / "forge").is_dir()


def test_secrets_never_show_in_settings_repr() -> None:
    settings = HostSettings.from_env(
        {
            "GITHUB_TOKEN": "ghs_topsecret",
            "PAIR_GITHUB_PRIVATE_KEY": "-----BEGIN KEY",
            "AZURE_DEVOPS_EXT_PAT": "pat-secret",
        }
    )
    shown = repr(settings) + str(settings)
    assert "ghs_topsecret" not in shown and "BEGIN KEY" not in shown and "pat-secret" not in shown


@pytest.mark.parametrize(
    ("binding", "env", "missing"),
    [
        pytest.param("github", {}, "GITHUB_REPOSITORY", id="github-repo"),
        pytest.param("github", {"GITHUB_REPOSITORY": "o/r"}, "GITHUB_TOKEN", id="github-token"),
        pytest.param(
            "github",
            {"GITHUB_REPOSITORY": "o/r", "PAIR_GITHUB_APP_ID": "1"},
            "PAIR_GITHUB_PRIVATE_KEY",
            id="app-key",
        ),
        pytest.param("azure-devops", {}, "PAIR_AZURE_DEVOPS_ORG_URL", id="azure-org"),
    ],
)
def test_a_missing_credential_names_the_variable(
    tmp_path: Path, binding: str, env: dict[str, str], missing: str
) -> None:
    with pytest.raises(ConfigError, match=missing):
        build_hosts(
            resolve_binding({"pm": binding, "code": binding}), HostSettings.from_env(env), tmp_path
        )


def test_a_non_numeric_installation_id_is_refused() -> None:
    with pytest.raises(ConfigError, match="PAIR_GITHUB_INSTALLATION_ID"):
        HostSettings.from_env({"PAIR_GITHUB_INSTALLATION_ID": "12a"})


def test_an_unknown_host_halts_naming_it_and_the_adapters() -> None:
    with pytest.raises(HostUnsupported, match=r"gitlab.*github, azure-devops, local"):
        resolve_binding({"pm": "gitlab", "code": "github"})


def test_a_github_binding_never_imports_the_azure_devops_sdk(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from app.domain.card.binding import resolve_binding\n"
        "from app.hosting import HostSettings, build_hosts\n"
        "settings = HostSettings.from_env({'GITHUB_REPOSITORY': 'o/r', 'GITHUB_TOKEN': 't'})\n"
        "build_hosts(resolve_binding({'pm': 'github', 'code': 'github'}), settings, Path('.'))\n"
        "bad = [m for m in sys.modules if m.startswith(('azure', 'msrest'))]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_apps_own_credential_names_serve_the_worker_hosts(tmp_path: Path) -> None:
    key_file = tmp_path / "app.pem"
    key_file.write_text("-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n")
    settings = HostSettings.from_env({"PAIR_APP_ID": "42", "PAIR_PRIVATE_KEY_FILE": str(key_file)})
    assert settings.github_app_id == "42"
    assert settings.github_private_key is not None
    assert "BEGIN RSA PRIVATE KEY" in settings.github_private_key.get_secret_value()
    assert "abc" not in repr(settings)


def test_an_unreadable_private_key_file_is_named() -> None:
    with pytest.raises(ConfigError, match=r"PAIR_PRIVATE_KEY_FILE='/nonexistent/app\.pem'"):
        HostSettings.from_env({"PAIR_PRIVATE_KEY_FILE": "/nonexistent/app.pem"})
