"""`AppSettings.from_env`: every PAIR_* variable, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConfigError
from app.web.settings import AppSettings, parse_allowlist
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
        ({"PAIR_EXECUTION": "lambda"}, "PAIR_EXECUTION='lambda' is not one of: actions, worker"),
        ({"PAIR_APP_ID": "pairbot"}, "PAIR_APP_ID='pairbot' is not a number"),
        ({"PAIR_TRIGGER": "pa ir"}, "PAIR_TRIGGER"),
        ({"PAIR_APP_SLUG": "bad slug"}, "PAIR_APP_SLUG"),
        ({"PAIR_PRIVATE_KEY": "x", "PAIR_PRIVATE_KEY_FILE": "y"}, "not both"),
        ({"PAIR_PRIVATE_KEY_FILE": "missing.pem"}, "PAIR_PRIVATE_KEY_FILE: cannot read"),
        ({"PAIR_PRIVATE_KEY": "not a key"}, "PAIR_PRIVATE_KEY does not hold a PEM"),
        ({"PAIR_ADO_USERNAME": "hooks"}, "PAIR_ADO_USERNAME and PAIR_ADO_PASSWORD"),
        ({"PAIR_ADO_SECRET_HEADER": "no colon here"}, "PAIR_ADO_SECRET_HEADER must be"),
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
