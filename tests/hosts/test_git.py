"""The one git runner (`hosts.git`): no inherited location, no prompt, credentials never shown."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from hosts.git import LOCATION_VARS, GitError, git_env, run_git, run_git_async

TOKEN = "ghs_s3cr3tT0kenValue"  # noqa: S105 - a made-up credential the test hunts for


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


def test_an_inherited_git_dir_does_not_leak_into_the_command(repo: Path, tmp_path: Path) -> None:
    # A hook's environment points at another repository; the runner must use `cwd`'s.
    other = tmp_path / "other.git"
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    inherited = {
        "PATH": "/usr/bin:/bin",
        "GIT_DIR": str(other),
        "GIT_WORK_TREE": str(tmp_path),
        "GIT_INDEX_FILE": str(tmp_path / "index"),
        "GIT_OBJECT_DIRECTORY": str(other / "objects"),
        "GIT_COMMON_DIR": str(other),
    }
    done = run_git(["rev-parse", "--absolute-git-dir"], cwd=repo, base_env=inherited)
    assert Path(done.stdout.strip()) == (repo / ".git").resolve()


def test_git_env_drops_every_location_variable_and_keeps_the_rest() -> None:
    base = dict.fromkeys(LOCATION_VARS, "/elsewhere") | {"HOME": "/home/x", "PATH": "/bin"}
    env = git_env(base=base)
    assert not LOCATION_VARS & env.keys()
    assert env["HOME"] == "/home/x"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GCM_INTERACTIVE"] == "never"
    # What the caller means explicitly (a throwaway index) is kept.
    assert git_env({"GIT_INDEX_FILE": "/tmp/i"}, base=base)["GIT_INDEX_FILE"] == "/tmp/i"


def test_config_goes_through_the_environment_never_argv() -> None:
    base = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "c"}
    env = git_env(config=[("http.extraheader", f"AUTHORIZATION: basic {TOKEN}")], base=base)
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert env["GIT_CONFIG_KEY_0"] == "http.extraheader"
    assert TOKEN in env["GIT_CONFIG_VALUE_0"]
    # Without config of its own, the runner keeps what the caller configured.
    assert git_env(base=base)["GIT_CONFIG_KEY_0"] == "a.b"


def test_a_credential_in_c_extraheader_never_appears_in_the_error(repo: Path) -> None:
    header = f"http.extraHeader=AUTHORIZATION: bearer {TOKEN}"
    with pytest.raises(GitError) as raised:
        run_git(["-c", header, "fetch", f"https://user:{TOKEN}@127.0.0.1:9/x.git"], cwd=repo)
    assert TOKEN not in str(raised.value)
    assert TOKEN not in raised.value.stderr
    assert "git fetch" in str(raised.value)
    assert raised.value.returncode not in (0, None)


def test_config_and_secrets_are_scrubbed_from_stderr_of_a_checked_failure(repo: Path) -> None:
    with pytest.raises(GitError) as raised:
        run_git(
            ["rev-parse", "--verify", TOKEN],
            cwd=repo,
            config=[("http.extraheader", f"AUTHORIZATION: basic {TOKEN}")],
        )
    assert TOKEN not in str(raised.value)
    unchecked = run_git(["rev-parse", "--verify", TOKEN], cwd=repo, secrets=(TOKEN,), check=False)
    assert not unchecked.ok
    assert TOKEN not in unchecked.stderr


def test_the_prompt_is_disabled(repo: Path, tmp_path: Path) -> None:
    # An askpass that would answer is never asked: GIT_TERMINAL_PROMPT=0 is in force.
    probe = tmp_path / "env.txt"
    run_git(["config", "alias.probe", f"!env > {probe}"], cwd=repo)
    run_git(["probe"], cwd=repo)
    seen = dict(line.split("=", 1) for line in probe.read_text().splitlines() if "=" in line)
    assert seen["GIT_TERMINAL_PROMPT"] == "0"


def test_a_failure_names_the_command_and_stderr(repo: Path) -> None:
    with pytest.raises(GitError, match=r"git rev-parse --verify nope failed in .*exit 128"):
        run_git(["-c", "user.name=x", "rev-parse", "--verify", "nope"], cwd=repo)


def test_a_timeout_and_a_missing_git_are_git_errors(repo: Path) -> None:
    with pytest.raises(GitError) as raised:
        run_git(["status"], cwd=repo, git="/nonexistent/git")
    assert raised.value.returncode is None

    async def slow() -> None:
        await run_git_async(["-c", "alias.nap=!sleep 5", "nap"], cwd=repo, timeout_s=0.2)

    with pytest.raises(GitError) as timed:
        asyncio.run(slow())
    assert timed.value.timed_out


def test_the_async_runner_matches(repo: Path) -> None:
    done = asyncio.run(run_git_async(["rev-parse", "--is-inside-work-tree"], cwd=repo))
    assert done.stdout.strip() == "true"
    bad = asyncio.run(run_git_async(["rev-parse", "--verify", "nope"], cwd=repo, check=False))
    assert bad.returncode == 128
