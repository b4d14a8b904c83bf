"""The one way pairbot runs git: a list argv, a clean environment, credentials never shown.

Every git command the product runs — a card's worktree, the worker's checkouts, the demo, the
Action's state branch, the adapters' pushes and the local forge — goes through `run_git` (or
`run_git_async` on an event loop), so these hold everywhere:

- **No inherited location.** A git hook or a CI runner exports `GIT_DIR`, `GIT_WORK_TREE`,
  `GIT_INDEX_FILE`, `GIT_OBJECT_DIRECTORY`, … to its children; inherited, they would point
  pairbot's git at the caller's repository instead of the `cwd` it names. They are dropped
  (`LOCATION_VARS`); a caller that means one (a throwaway `GIT_INDEX_FILE`) passes it in `env`.
  https://git-scm.com/docs/git#_environment_variables
- **Never a prompt.** `GIT_TERMINAL_PROMPT=0` and `GCM_INTERACTIVE=never`: a missing credential
  fails at once instead of hanging a worker until its timeout.
- **Credentials stay out of argv and errors.** `config=` entries (an `http.<url>.extraheader`
  with a token) travel as `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`
  (git >= 2.31), which a process listing does not show; inherited `GIT_CONFIG_*` overrides are
  then dropped, so the caller's environment cannot add or reorder entries. Every error text is
  scrubbed of those values, of `secrets=`, of any `-c http.*extraheader=` value in argv and of
  `scheme://user:secret@` in URLs git printed.
- **One error type.** A failure (a non-zero exit with `check=True`, a timeout, git missing)
  raises `GitError`, whose message names the command and git's stderr; each caller wraps it into
  the error its own callers expect (`WorktreeError`, `StateBranchGitError`, `hosts.errors.*`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hosts.secrets import REDACTED, basic_encodings

__all__ = [
    "LOCATION_VARS",
    "GitError",
    "GitResult",
    "git_env",
    "run_git",
    "run_git_async",
]

DEFAULT_TIMEOUT_S = 300.0
# Variables that point git at another repository, index, object store or search boundary.
LOCATION_VARS: frozenset[str] = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_PREFIX",
        "GIT_QUARANTINE_PATH",
        "GIT_SHALLOW_FILE",
        "GIT_GRAFT_FILE",
        "GIT_REPLACE_REF_BASE",
        "GIT_NO_REPLACE_OBJECTS",
    }
)
_CONFIG_VARS = re.compile(r"^GIT_CONFIG_(COUNT|KEY_\d+|VALUE_\d+|PARAMETERS)$")
_CREDENTIAL_IN_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_SECRET_CONFIG = re.compile(r"(?i)^(http\.(?:.*\.)?extraheader)=(.+)$")


class GitError(Exception):
    """A git command failed; `str()` names the command and git's (scrubbed) stderr.

    `returncode` is None when git did not run to completion (missing, timed out).
    """

    def __init__(
        self, message: str, *, returncode: int | None, stderr: str, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr
        self.timed_out = timed_out


@dataclass(frozen=True)
class GitResult:
    """A finished git command: exit code and output (text, or bytes with `binary=True`)."""

    returncode: int
    stdout: str
    stderr: str
    raw: bytes = b""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def git_env(
    env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
    *,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one git command: `base` (default the process's) without location
    variables, prompts off, `config` as `GIT_CONFIG_*` entries, then `env` on top. Pure given
    `base`."""
    inherited = os.environ if base is None else base
    out = {key: value for key, value in inherited.items() if key not in LOCATION_VARS}
    if config:
        out = {key: value for key, value in out.items() if not _CONFIG_VARS.match(key)}
        out["GIT_CONFIG_COUNT"] = str(len(config))
        for index, (name, value) in enumerate(config):
            out[f"GIT_CONFIG_KEY_{index}"] = name
            out[f"GIT_CONFIG_VALUE_{index}"] = value
    out["GIT_TERMINAL_PROMPT"] = "0"
    out["GCM_INTERACTIVE"] = "never"
    out.update(env or {})
    return out


class _Scrubber:
    """Hides every credential a command was given from the text it produced."""

    def __init__(
        self, argv: Sequence[str], config: Sequence[tuple[str, str]], secrets: Sequence[str]
    ) -> None:
        values = [value for _, value in config if value.strip()]
        values += [match.group(2) for arg in argv if (match := _SECRET_CONFIG.match(arg))]
        values += [secret for secret in secrets if secret]
        found: set[str] = set()
        for value in values:
            found.add(value)
            # "AUTHORIZATION: basic <b64>": the encoded credential alone is a secret too.
            found.update(part for part in value.split() if len(part) >= 8)
            found.update(basic_encodings(value))
        self._values = sorted(found, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, REDACTED)
        return _CREDENTIAL_IN_URL.sub(rf"\g<scheme>{REDACTED}@", text)


def _describe(args: Sequence[str], scrub: _Scrubber) -> str:
    """`git <subcommand> <first two arguments>`, global options (`-C`, `-c`) left out."""
    words: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-C", "-c"):
            skip = True
        elif not arg.startswith(("--git-dir=", "--work-tree=")):
            words.append(arg)
    return scrub("git " + " ".join(words[:3]))


def _failure(
    args: Sequence[str], where: Path | None, returncode: int, stderr: str, scrub: _Scrubber
) -> GitError:
    said = scrub(stderr.strip()) or "(no output)"
    place = f" in {where}" if where is not None else ""
    return GitError(
        f"{_describe(args, scrub)} failed{place} (exit {returncode}): {said}",
        returncode=returncode,
        stderr=said,
    )


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
    secrets: Sequence[str] = (),
    stdin: str | bytes | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    check: bool = True,
    binary: bool = False,
    git: str = "git",
    base_env: Mapping[str, str] | None = None,
) -> GitResult:
    """Run `git <args>` in `cwd` and wait; `GitError` on failure (any exit with `check`)."""
    scrub = _Scrubber(args, config, secrets)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    try:
        done = subprocess.run(
            [git, *args],
            cwd=cwd,
            input=data,
            env=git_env(env, config, base=base_env),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            stdin=None if data is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise GitError(
            f"{_describe(args, scrub)} timed out after {timeout_s:.0f}s",
            returncode=None,
            stderr="",
            timed_out=True,
        ) from None
    except OSError as exc:
        raise GitError(
            f"{_describe(args, scrub)} did not start: {scrub(str(exc))}", returncode=None, stderr=""
        ) from None
    return _result(
        args,
        cwd,
        returncode=done.returncode,
        out=done.stdout,
        err=done.stderr,
        scrub=scrub,
        check=check,
        binary=binary,
    )


async def run_git_async(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
    secrets: Sequence[str] = (),
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    check: bool = True,
    git: str = "git",
    base_env: Mapping[str, str] | None = None,
) -> GitResult:
    """`run_git` for an event loop: the process is awaited, and killed on timeout."""
    scrub = _Scrubber(args, config, secrets)
    try:
        process = await asyncio.create_subprocess_exec(
            git,
            *args,
            cwd=cwd,
            env=git_env(env, config, base=base_env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise GitError(
            f"{_describe(args, scrub)} did not start: {scrub(str(exc))}", returncode=None, stderr=""
        ) from None
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await process.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise GitError(
            f"{_describe(args, scrub)} timed out after {timeout_s or 0:.0f}s",
            returncode=None,
            stderr="",
            timed_out=True,
        ) from None
    return _result(
        args,
        cwd,
        returncode=process.returncode or 0,
        out=out,
        err=err,
        scrub=scrub,
        check=check,
        binary=False,
    )


def _result(
    args: Sequence[str],
    cwd: Path | None,
    *,
    returncode: int,
    out: bytes,
    err: bytes,
    scrub: _Scrubber,
    check: bool,
    binary: bool,
) -> GitResult:
    stderr = err.decode(errors="replace")
    if check and returncode != 0:
        raise _failure(args, cwd, returncode, stderr, scrub)
    stdout = "" if binary else out.decode(errors="replace")
    # A caller that inspects a failure's stderr itself (check=False) gets it scrubbed too.
    return GitResult(returncode, stdout, scrub(stderr), raw=out if binary else b"")
