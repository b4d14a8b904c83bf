"""git for tests: one way to run it, the same on every machine and under every caller.

    head = git(repo, "rev-parse", "HEAD")               # stdout, stripped; GitError on failure
    done = run_git(bare, "show", "main:lock.json")      # the CompletedProcess, never raises
    init_repo(root, {"README.md": "# x\n"})             # a repository with a first commit
    init_bare(tmp / "origin.git")                       # a bare remote whose branch is `main`

Every call gets `git_env()`: no inherited `GIT_*` (a test run from a git hook has `GIT_DIR`
set, which would point every command at the hook's repository), no system or global config (a
developer's `commit.gpgsign`, hooks, `init.defaultBranch` or credential helper must not change
a test), no terminal prompt (a refused credential fails at once instead of waiting on a tty),
and a fixed author and committer, so a commit never depends on who runs the suite. A caller
that needs another identity (a fake forge committing as itself) passes `identity=`.

This drives the git a test sets up and inspects; the product runs its own git, with its own
environment, and nothing here reaches it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

# The committer of every commit a test makes itself, unless a caller says otherwise.
IDENTITY = ("t", "t@example.invalid")


class GitError(subprocess.CalledProcessError):
    """A git command that failed; its message carries git's stderr.

    A `CalledProcessError`, so a test that expects one keeps working; only the message is
    better (the base class names the exit status and hides why)."""

    def __str__(self) -> str:
        return f"{' '.join(map(str, self.cmd))}: exit {self.returncode}: {str(self.stderr).strip()}"


def git_env(
    base: Mapping[str, str] | None = None, *, identity: tuple[str, str] | None = IDENTITY
) -> dict[str, str]:
    """`base` (default: this process's environment) made safe for git: no `GIT_*` from it, no
    system or global config, no prompt, and `identity` (name, email) as author and committer
    (None: whatever git finds, e.g. a `-c user.name=` on the command line)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k[:4] != "GIT_"}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    if identity is not None:
        name, email = identity
        env.update(
            GIT_AUTHOR_NAME=name,
            GIT_AUTHOR_EMAIL=email,
            GIT_COMMITTER_NAME=name,
            GIT_COMMITTER_EMAIL=email,
        )
    return env


def run_git(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`git *args` in `cwd` with `env` (default `git_env()`); the finished process, whatever
    its exit status (for a test that looks at the status, e.g. "this ref does not exist")."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(git_env() if env is None else env),
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )


def git(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, input: str | None = None
) -> str:
    """`git *args` in `cwd`; its stdout without surrounding whitespace. Raises `GitError`
    (with git's stderr) when git fails. `run_git(...).stdout` keeps the output byte for byte."""
    done = run_git(cwd, *args, env=env, input=input)
    if done.returncode != 0:
        raise GitError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout.strip()


def commit_files(repo: Path, files: Mapping[str, str], message: str) -> str:
    """Write `files` (path → text) in the work tree of `repo`, add and commit them; the SHA."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "--", *files)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def init_repo(
    root: Path,
    files: Mapping[str, str] | None = None,
    *,
    message: str = "init",
    branch: str = "main",
) -> str:
    """A repository at `root` (created if missing) on `branch`, whose first commit holds
    everything already in `root` plus `files`; the commit's SHA."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", branch)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def init_bare(path: Path, *, branch: str = "main") -> Path:
    """An empty bare repository at `path` whose default branch is `branch`; `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "init", "-q", "--bare", "-b", branch, str(path))
    return path
