"""`git push` to Azure Repos with the PAT in an HTTP header, never in argv, a URL or an error.

The PAT travels as `Authorization: Basic base64(:PAT)` in `http.<scheme://host/>.extraheader`,
set through GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n (git 2.31+) after any
entries the environment already has: never in argv (visible in `ps`) or in a URL (printed in
git's errors). Scoped to the remote's origin: a redirect or submodule elsewhere never sees it.
Git runs through `hosts.git` (no inherited location, no prompt, errors scrubbed); its failures
become `hosts.errors` here.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from hosts.errors import Conflict, Forbidden, HostUnavailable
from hosts.git import GitError, git_env, run_git_async

_PUSH_REJECTED = re.compile(r"\[rejected\]|non-fast-forward|fetch first|stale info", re.I)
# A refused header makes git fall back to asking for a username, which GIT_TERMINAL_PROMPT=0
# turns into "could not read Username".
_PUSH_DENIED = re.compile(
    r"Authentication failed|could not read Username|HTTP 40[13]|error: 40[13]|TF401027", re.I
)


def push_config(remote_url: str, token: str, base_env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The environment's own `GIT_CONFIG_*` entries, then the header for `remote_url`'s origin."""
    count = base_env.get("GIT_CONFIG_COUNT", "")
    entries = [
        (base_env.get(f"GIT_CONFIG_KEY_{i}", ""), base_env.get(f"GIT_CONFIG_VALUE_{i}", ""))
        for i in range(int(count) if count.isdigit() else 0)
    ]
    parts = urlsplit(remote_url)
    origin = f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/"
    basic = base64.b64encode(f":{token}".encode()).decode("ascii")
    return [*entries, (f"http.{origin}.extraheader", f"Authorization: Basic {basic}")]


def push_command(
    remote_url: str, branch: str, token: str, *, force: bool, base_env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a `git push` authenticated by an HTTP header. Pure."""
    ref = f"refs/heads/{branch}"
    argv = [
        "git",
        "push",
        "--porcelain",
        *(["--force"] if force else []),
        remote_url,
        f"{ref}:{ref}",
    ]
    return argv, git_env(config=push_config(remote_url, token, base_env), base=base_env)


async def local_head(repo_dir: Path, branch: str) -> str | None:
    """The commit `branch` points at in the checkout, or None."""
    try:
        done = await run_git_async(
            ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=repo_dir, check=False
        )
    except GitError:
        return None
    return done.stdout.strip() if done.ok and done.stdout.strip() else None


async def push(
    repo_dir: Path, remote_url: str, branch: str, token: str, *, force: bool, timeout_s: float
) -> None:
    """Push `branch`; `Conflict` when rejected, `Forbidden` when refused, else `HostUnavailable`."""
    base = dict(os.environ)
    argv, _ = push_command(remote_url, branch, token, force=force, base_env=base)
    try:
        done = await run_git_async(
            argv[1:],
            cwd=repo_dir,
            config=push_config(remote_url, token, base),
            secrets=(token,),
            timeout_s=timeout_s,
            check=False,
            base_env=base,
        )
    except GitError as error:
        if error.timed_out:
            raise HostUnavailable(f"push of {branch!r} timed out after {timeout_s:.0f}s") from None
        raise HostUnavailable(f"push of {branch!r}: git did not start ({error})") from None
    if done.ok:
        return
    text = f"{done.stderr}{done.stdout}"  # stderr is scrubbed by hosts.git
    if _PUSH_REJECTED.search(text):
        raise Conflict(f"push of {branch!r} rejected: the remote has commits it lacks")
    if _PUSH_DENIED.search(text):
        raise Forbidden(f"push of {branch!r} refused: {text.strip()[-300:]}")
    raise HostUnavailable(f"push of {branch!r} failed: {text.strip()[-300:]}")
