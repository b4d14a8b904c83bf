"""`git push` over HTTPS with a token that never reaches argv, a URL, the disk or an error.

The token travels as an HTTP header set through git's environment configuration
(`GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, git >= 2.31), which a process
listing does not show and git never prints:

    http.<remote-url>.extraheader = ""                                  (reset)
    http.<remote-url>.extraheader = AUTHORIZATION: basic <base64(x-access-token:TOKEN)>
    credential.helper = ""                                              (no stored credential)

The key names the full remote URL on purpose: `actions/checkout` persists its own
`http.https://github.com/.extraheader` in the checkout's config, and git prefers the most
specific URL match — a plain `http.extraheader` would lose to it (or, at equal specificity,
be sent beside it, which GitHub refuses as a duplicate Authorization header). The empty value
first clears whatever an earlier config level set for the same key.
(https://git-scm.com/docs/git-config#Documentation/git-config.txt-httpextraHeader)

Errors are scrubbed of the token (both its plain and its base64 form) before they are raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from hosts.errors import Conflict, Forbidden, HostError, HostUnavailable, NotFound
from hosts.github_auth import basic_credential

_BRANCH = re.compile(r"(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]+(?<![./])")
_REJECTED = ("[rejected]", "non-fast-forward", "fetch first", "stale info", "[remote rejected]")
_DENIED = ("authentication failed", "permission to", "could not read username")
_HTTP_DENIED = re.compile(r"\b40[13]\b")  # "The requested URL returned error: 403"
_MISSING = ("not found", "does not appear to be a git repository", "no such file")


def push_env(base: Mapping[str, str], remote_url: str, token: str) -> dict[str, str]:
    """The environment for one authenticated push: `base` without inherited git config
    overrides, plus the header, the reset and no credential helper."""
    env = {
        key: value
        for key, value in base.items()
        if not key.startswith("GIT_CONFIG_") and key != "GIT_CONFIG_PARAMETERS"
    }
    key = f"http.{remote_url}.extraheader"
    entries = [
        (key, ""),
        (key, f"AUTHORIZATION: basic {basic_credential(token)}"),
        ("credential.helper", ""),
    ]
    env["GIT_CONFIG_COUNT"] = str(len(entries))
    for index, (name, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{index}"] = name
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def check_branch(branch: str) -> str:
    """A branch name safe to put in a refspec (no option-like or traversing names)."""
    if not _BRANCH.fullmatch(branch) or branch.endswith(".lock"):
        raise ValueError(f"{branch!r} is not a branch name pairbot pushes")
    return branch


async def _run(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await process.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    return process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


async def push(
    *,
    git: str,
    repo_dir: Path,
    remote_url: str,
    branch: str,
    token: str,
    force: bool,
    timeout_s: float,
    scrub: Callable[[str], str],
    base_env: Mapping[str, str] | None = None,
) -> str:
    """Push `refs/heads/<branch>` to `remote_url`; the pushed head SHA."""
    check_branch(branch)
    env_base = dict(os.environ if base_env is None else base_env)
    plain = {key: value for key, value in env_base.items() if not key.startswith("GIT_CONFIG")}
    code, out, err = await _run(
        [git, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"],
        repo_dir,
        plain,
        timeout_s,
    )
    if code != 0 or not out.strip():
        raise NotFound(f"push: no local branch {branch!r} in {repo_dir}")
    head = out.strip()
    refspec = f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}"
    argv = [git, "push", "--porcelain", remote_url, refspec]
    try:
        code, out, err = await _run(
            argv, repo_dir, push_env(env_base, remote_url, token), timeout_s
        )
    except TimeoutError:
        raise HostUnavailable(f"push {branch}: git push timed out after {timeout_s:.0f}s") from None
    if code == 0:
        return head
    detail = scrub(f"{err}\n{out}".strip())[-600:]
    raise _classify(detail)(f"push {branch}: git push failed ({code}): {detail}")


def _classify(detail: str) -> type[HostError]:
    text = detail.lower()
    if any(sign in text for sign in _REJECTED):
        return Conflict
    if any(sign in text for sign in _DENIED) or _HTTP_DENIED.search(text):
        return Forbidden
    if any(sign in text for sign in _MISSING):
        return NotFound
    return HostUnavailable
