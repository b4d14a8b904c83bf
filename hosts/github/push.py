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

Git runs through `hosts.git` (no inherited `GIT_DIR`, no prompt, credentials scrubbed from
errors); its failures become `hosts.errors` here.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from hosts.errors import Conflict, Forbidden, HostError, HostUnavailable, NotFound
from hosts.git import GitError, git_env, run_git_async

_BRANCH = re.compile(r"(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]+(?<![./])")
_REJECTED = ("[rejected]", "non-fast-forward", "fetch first", "stale info", "[remote rejected]")
_DENIED = ("authentication failed", "permission to", "could not read username")
_HTTP_DENIED = re.compile(r"\b40[13]\b")  # "The requested URL returned error: 403"
_MISSING = ("not found", "does not appear to be a git repository", "no such file")


def auth_config(remote_url: str, token: str) -> list[tuple[str, str]]:
    """The git configuration of one authenticated push: the reset, the header, no helper."""
    key = f"http.{remote_url}.extraheader"
    return [
        (key, ""),
        (key, f"AUTHORIZATION: basic {basic_credential(token)}"),
        ("credential.helper", ""),
    ]


def basic_credential(token: str) -> str:
    """base64 of `x-access-token:<token>`: the Basic credential git sends over HTTPS.

    Here rather than with the App's JWT (`hosts.github.auth`): a push needs no pyjwt or
    cryptography, and the Action authenticates its git with it before anything else.
    """
    return base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")


def push_env(base: Mapping[str, str], remote_url: str, token: str) -> dict[str, str]:
    """The environment for one authenticated push: `base` without inherited git config
    overrides or git location variables, plus the header, the reset and no credential helper."""
    return git_env(config=auth_config(remote_url, token), base=base)


def check_branch(branch: str) -> str:
    """A branch name safe to put in a refspec (no option-like or traversing names)."""
    if not _BRANCH.fullmatch(branch) or branch.endswith(".lock"):
        raise ValueError(f"{branch!r} is not a branch name pairbot pushes")
    return branch


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
    try:
        found = await run_git_async(
            ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"],
            cwd=repo_dir,
            git=git,
            timeout_s=timeout_s,
            check=False,
            base_env=plain,
        )
    except GitError as error:
        raise HostUnavailable(f"push {branch}: {scrub(str(error))}") from None
    if not found.ok or not found.stdout.strip():
        raise NotFound(f"push: no local branch {branch!r} in {repo_dir}")
    head = found.stdout.strip()
    refspec = f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}"
    try:
        done = await run_git_async(
            ["push", "--porcelain", remote_url, refspec],
            cwd=repo_dir,
            git=git,
            config=auth_config(remote_url, token),
            secrets=(token,),
            timeout_s=timeout_s,
            check=False,
            base_env=env_base,
        )
    except GitError as error:
        if error.timed_out:
            raise HostUnavailable(
                f"push {branch}: git push timed out after {timeout_s:.0f}s"
            ) from None
        raise HostUnavailable(f"push {branch}: {scrub(str(error))}") from None
    if done.ok:
        return head
    detail = scrub(f"{done.stderr}\n{done.stdout}".strip())[-600:]
    raise _classify(detail)(f"push {branch}: git push failed ({done.returncode}): {detail}")


def _classify(detail: str) -> type[HostError]:
    text = detail.lower()
    if any(sign in text for sign in _REJECTED):
        return Conflict
    if any(sign in text for sign in _DENIED) or _HTTP_DENIED.search(text):
        return Forbidden
    if any(sign in text for sign in _MISSING):
        return NotFound
    return HostUnavailable
