"""`AppSettings.from_env`: every PAIR_* variable, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConfigError
from app.web.settings import MIB, AppSettings, EdgeLimits, parse_allowlist
from tests.support.fake_github import rsa_key


def test_defaults(tmp_path: Path) -> None:
    settings = AppSettings.from_env({}, root=tmp_path)
    assert settings.store == tmp_path / ".pair" / "app" / "pairbot.sqlite3"
    assert (settings.trigger, settings.execution, settings.allowlist) == (
        "pair",
        "actions",
        frozenset(),
    )
    assert settings.github_api_url == "https://api.github.com"
    assert settings.webhook_secret is None and settings.app_id is None
    with pytest.raises(ConfigError, match="PAIR_WEBHOOK_SECRET"):
        settings.require_webhook_secret()


def test_every_variable_is_read_and_secrets_never_show(tmp_path: Path) -> None:
    pem = rsa_key()[0]
    env = {
        "PAIR_APP_ID": "123456",
        "PAIR_PRIVATE_KEY": pem,
        "PAIR_WEBHOOK_SECRET": "hook-secret-value",
        "PAIR_TRIGGER": "bot",
        "PAIR_ALLOWLIST": " 583231, 9919 ,,",
        "PAIR_EXECUTION": "worker",
        "PAIR_STORE": "data/app.sqlite3",
        "PAIR_GITHUB_API_URL": "https://ghe.example.com/api/v3/",
        "PAIR_ADO_USERNAME": "hooks",
        "PAIR_ADO_PASSWORD": "ado-password-value",
        "PAIR_ADO_SECRET_HEADER": "X-Pair-Secret: header-secret-value",
        "PAIR_APP_SLUG": "pairbot",
    }
    settings = AppSettings.from_env(env, root=tmp_path)
    assert settings.app_id == 123456
    assert settings.private_key is not None and settings.private_key.get_secret_value() == pem
    assert settings.require_webhook_secret() == b"hook-secret-value"
    assert (settings.trigger, settings.app_slug, settings.execution) == ("bot", "pairbot", "worker")
    assert settings.allowlist == frozenset({583231, 9919})
    assert settings.store == tmp_path / "data" / "app.sqlite3"
    assert settings.github_api_url == "https://ghe.example.com/api/v3"
    assert settings.ado_username == "hooks"
    shown = repr(settings) + str(settings) + settings.model_dump_json()
    for secret in ("hook-secret-value", "ado-password-value", "header-secret-value", "PRIVATE KEY"):
        assert secret not in shown


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_pair_store_as_a_postgresql_url_selects_the_shared_store(
    tmp_path: Path, scheme: str
) -> None:
    url = f"{scheme}://pairbot:db-password-value@db.example:5432/pairbot?sslmode=require"
    settings = AppSettings.from_env({"PAIR_STORE": url}, root=tmp_path)
    assert settings.store_url is not None and settings.store_url.get_secret_value() == url
    label = f"{scheme.lower()}://pairbot:***@db.example:5432/pairbot?sslmode=require"
    assert settings.store_label == label
    shown = repr(settings) + settings.model_dump_json() + settings.store_label
    assert "db-password-value" not in shown
    assert settings.store_lease_s == 60.0
    leased = AppSettings.from_env({"PAIR_STORE": url, "PAIR_STORE_LEASE_S": "2.5"}, root=tmp_path)
    assert leased.store_lease_s == 2.5
    for bad in ("0", "nan", "soon", "3601"):
        with pytest.raises(ConfigError, match=r"PAIR_STORE_LEASE_S=.*allowed: a number of seconds"):
            AppSettings.from_env({"PAIR_STORE_LEASE_S": bad}, root=tmp_path)
    plain = AppSettings.from_env({"PAIR_STORE": "data/app.sqlite3"}, root=tmp_path)
    assert plain.store_url is None and plain.store_label == str(tmp_path / "data" / "app.sqlite3")


@pytest.mark.parametrize(
    "value", ["mysql://u:secret-pw@db/x", "sqlite:///tmp/x.sqlite3", "postgresql://db/x y"]
)
def test_pair_store_with_another_scheme_is_refused_in_one_line(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        AppSettings.from_env({"PAIR_STORE": value}, root=tmp_path)
    message = str(caught.value)
    assert message.startswith("PAIR_STORE=") and "allowed: a SQLite file path" in message
    assert "postgresql://" in message and "secret-pw" not in message and "\n" not in message


def test_the_private_key_can_come_from_a_file_or_a_one_line_variable(tmp_path: Path) -> None:
    pem = rsa_key()[0]
    (tmp_path / "key.pem").write_text(pem)
    from_file = AppSettings.from_env({"PAIR_PRIVATE_KEY_FILE": "key.pem"}, root=tmp_path)
    one_line = AppSettings.from_env({"PAIR_PRIVATE_KEY": pem.replace("\n", "\\n")}, root=tmp_path)
    for settings in (from_file, one_line):
        assert settings.private_key is not None
        assert settings.private_key.get_secret_value() == pem


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PAIR_ALLOWLIST": "583231,octocat"}, "PAIR_ALLOWLIST entry 'octocat' is not a numeric"),
        ({"PAIR_ALLOWLIST": "12,-4"}, "PAIR_ALLOWLIST entry '-4'"),
        (
            {"PAIR_AZURE_DEVOPS_ALLOWLIST": "Jamal"},
            "PAIR_AZURE_DEVOPS_ALLOWLIST entry 'Jamal' is neither an Azure DevOps account",
        ),
        ({"PAIR_EXECUTION": "lambda"}, "PAIR_EXECUTION='lambda' is not one of: actions, worker"),
        ({"PAIR_APP_ID": "pairbot"}, "PAIR_APP_ID='pairbot' is not a number"),
        ({"PAIR_TRIGGER": "pa ir"}, "PAIR_TRIGGER"),
        ({"PAIR_APP_SLUG": "bad slug"}, "PAIR_APP_SLUG"),
        ({"PAIR_PRIVATE_KEY": "x", "PAIR_PRIVATE_KEY_FILE": "y"}, "not both"),
        ({"PAIR_PRIVATE_KEY_FILE": "missing.pem"}, "PAIR_PRIVATE_KEY_FILE: cannot read"),
        ({"PAIR_PRIVATE_KEY": "not a key"}, "PAIR_PRIVATE_KEY does not hold a PEM"),
        ({"PAIR_ADO_USERNAME": "hooks"}, "PAIR_ADO_USERNAME and PAIR_ADO_PASSWORD"),
        ({"PAIR_ADO_SECRET_HEADER": "no colon here"}, "PAIR_ADO_SECRET_HEADER must be"),
        (
            {"PAIR_MAX_CONNECTIONS": "lots"},
            "PAIR_MAX_CONNECTIONS='lots' is not allowed; allowed: a whole number from 8 to 100000",
        ),
        ({"PAIR_MAX_BODY_BYTES": "512"}, "PAIR_MAX_BODY_BYTES='512' is not allowed"),
        (
            {"PAIR_READ_TIMEOUT_S": "nan"},
            "PAIR_READ_TIMEOUT_S='nan' is not allowed; allowed: a number of seconds from 0.1 to "
            "300",
        ),
        ({"PAIR_READ_TIMEOUT_S": "soon"}, "PAIR_READ_TIMEOUT_S='soon' is not allowed"),
        (
            {"PAIR_BODY_BUDGET_BYTES": "20000000"},
            "PAIR_BODY_BUDGET_BYTES=20000000 is too small for PAIR_MAX_BODY_BYTES=26214400: "
            "one body may use at most three quarters of the budget",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_variable(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        AppSettings.from_env(env, root=tmp_path)
    assert "not a key" not in str(info.value)  # a refused secret is never echoed


def test_the_allowlist_takes_ids_only() -> None:
    assert parse_allowlist("") == frozenset()
    assert parse_allowlist("1") == frozenset({1})
    with pytest.raises(ConfigError, match="never logins"):
        parse_allowlist("@octocat")


def test_the_edge_limits_have_defaults_and_variables(tmp_path: Path) -> None:
    defaults = AppSettings.from_env({}, root=tmp_path).limits
    assert defaults == EdgeLimits()
    assert (defaults.max_body_bytes, defaults.body_budget_bytes) == (25 * MIB, 64 * MIB)
    assert (defaults.read_timeout_s, defaults.max_connections, defaults.keep_alive_s) == (
        10.0,
        500,
        5,
    )
    assert (defaults.reserve_bytes, defaults.retry_after_s) == (16 * MIB, 10)
    env = {
        "PAIR_MAX_BODY_BYTES": "1048576",
        "PAIR_BODY_BUDGET_BYTES": "4194304",
        "PAIR_READ_TIMEOUT_S": "2.5",
        "PAIR_MAX_CONNECTIONS": "64",
        "PAIR_MAX_HEADER_BYTES": "8192",
        "PAIR_KEEP_ALIVE_S": "2",
    }
    limits = AppSettings.from_env(env, root=tmp_path).limits
    assert limits == EdgeLimits(
        max_body_bytes=MIB,
        body_budget_bytes=4 * MIB,
        read_timeout_s=2.5,
        max_connections=64,
        max_header_bytes=8192,
        keep_alive_s=2,
    )
    assert limits.retry_after_s == 3


def test_the_azure_devops_allowlist_holds_identity_ids(tmp_path: Path) -> None:
    guid = "2B1C4C5B-8E1A-4F3E-9C1D-0A1B2C3D4E5F"
    settings = AppSettings.from_env({"PAIR_AZURE_DEVOPS_ALLOWLIST": f" {guid}, "}, root=tmp_path)
    assert settings.azure_allowlist == frozenset({guid.lower()})
    assert settings.allowlist == frozenset()  # GitHub's stays numeric, and separate
