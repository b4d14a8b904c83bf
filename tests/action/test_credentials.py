"""The Action takes the token actions/checkout persisted out of what an agent could read."""

from __future__ import annotations

import stat
from pathlib import Path

from action.credentials import drop_persisted_credentials
from tests.support.git import git, init_repo


def _repo(path: Path) -> Path:
    init_repo(path, {"README.md": "# hi\n"})
    return path


HEADER = "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA=="


def test_v4_extraheaders_are_removed_and_other_config_stays(tmp_path: Path) -> None:
    root = _repo(tmp_path / "ws")
    git(root, "config", "--local", "http.https://github.com/.extraheader", HEADER)
    git(root, "config", "--local", "--add", "http.https://github.com/.extraheader", HEADER)
    git(root, "config", "--local", "http.https://ghe.example/.extraheader", HEADER)
    git(root, "config", "--local", "core.autocrlf", "false")
    assert drop_persisted_credentials(root) == 2
    config = (root / ".git" / "config").read_text()
    assert "extraheader" not in config and "eC1hY2Nlc3Mt" not in config
    assert "autocrlf" in config


def test_v6_included_credentials_are_unlinked_and_made_private(tmp_path: Path) -> None:
    root = _repo(tmp_path / "ws")
    runner_temp = tmp_path / "_temp"
    runner_temp.mkdir()
    credentials = runner_temp / "git-credentials-1234.config"
    credentials.write_text(f'[http "https://github.com/"]\n\textraheader = {HEADER}\n')
    credentials.chmod(0o644)
    harmless = runner_temp / "other.config"
    harmless.write_text("[core]\n\tautocrlf = false\n")
    git(root, "config", "--local", f"includeIf.gitdir:{root}/.git.path", str(credentials))
    git(
        root,
        "config",
        "--local",
        f"includeIf.gitdir:{root}/.git/worktrees/*.path",
        str(credentials),
    )
    git(root, "config", "--local", "include.path", str(harmless))
    git(root, "config", "--local", "include.path", "missing.config", "--add")
    assert drop_persisted_credentials(root) == 2
    config = (root / ".git" / "config").read_text()
    assert str(credentials) not in config
    assert str(harmless) in config
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600


def test_a_checkout_without_persisted_credentials_is_left_alone(tmp_path: Path) -> None:
    root = _repo(tmp_path / "ws")
    before = (root / ".git" / "config").read_text()
    assert drop_persisted_credentials(root) == 0
    assert (root / ".git" / "config").read_text() == before
