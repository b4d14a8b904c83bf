"""CI checkouts made the way each CI makes them, command for command, with real git.

No CI clones: `checkout: self` leaves a detached HEAD and, shallow, not even `origin/<branch>`;
actions/checkout leaves the branch, shallow, with no `origin/HEAD`. A test of the Action or the
pipeline entry makes its checkout here, against its bare repository or loopback remote, so the
product meets what it meets on a runner.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from tests.support.git import git, git_env

PLACEHOLDER = "AUTHORIZATION: basic ***"  # what actions/checkout writes before the real value


@dataclass(frozen=True)
class Checkout:
    """A checkout a CI step left: where it is, and the CI's variables that describe it."""

    path: Path
    env: dict[str, str] = field(default_factory=dict)
    credentials_file: Path | None = None  # actions/checkout v6's file under RUNNER_TEMP


def is_detached(path: Path) -> bool:
    """Whether HEAD names no branch (a commit checked out, as `checkout: self` leaves it)."""
    # Trusted whoever owns it: the test looks at a checkout another posture's user made.
    return (
        git(path, "-c", "safe.directory=*", "rev-parse", "--symbolic-full-name", "HEAD") == "HEAD"
    )


def _remote_tip(path: Path, branch: str, config: tuple[str, ...] = ()) -> str:
    """The commit `origin` has on `branch` now: what the CI resolved when it queued the run."""
    listed = git(path, *config, "ls-remote", "origin", f"refs/heads/{branch}")
    if not listed:
        raise AssertionError(f"the remote has no branch {branch!r}")
    return listed.split()[0]


def azure_checkout_self(
    url: str,
    dest: Path,
    *,
    branch: str,
    authorization: str,
    fetch_depth: int = 1,
    persist_credentials: bool = False,
    fetch_tags: bool = False,
    source_version: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Checkout:
    """Azure Pipelines' `checkout: self` of `branch` (a scheduled or service-hook run builds
    the default branch) into `dest`, as the agent runs it for an Azure Repos repository
    (microsoft/azure-pipelines-agent, src/Agent.Plugins/GitSourceProvider.cs): init,
    `remote add`, `gc.auto 0`, `http.version HTTP/1.1`; fetch with the job's header on the
    command line (`-c http.extraheader=`), shallow by commit id into
    `refs/remotes/origin/<sha>` or in full; the commit fetched by itself; `checkout --progress
    --force` of it, a DETACHED HEAD; with `persist_credentials` the header written into
    `.git/config` as `http.<url>.extraheader` last. `authorization` is the header's value after
    `AUTHORIZATION: ` (Azure Repos: `bearer <System.AccessToken>`). `fetch_depth` 1 and
    `fetch_tags` off are the defaults of a pipeline created since sprint 209 (September 2022);
    `fetch_depth` 0 fetches everything. `env` is git's environment."""
    run = dict(git_env() if env is None else env)
    header = f"AUTHORIZATION: {authorization}"
    auth = ("-c", f"http.extraheader={header}")  # on the command line, never in the config
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", str(dest), env=run)
    git(dest, "remote", "add", "origin", url, env=run)
    git(dest, "config", "gc.auto", "0", env=run)
    git(dest, "config", "http.version", "HTTP/1.1", env=run)
    sha = source_version or _remote_tip(dest, branch, auth)
    options = ["--force", "--tags" if fetch_tags else "--no-tags", "--prune", "--prune-tags"]
    options += ["--progress", "--no-recurse-submodules", "origin"]
    depth = [f"--depth={fetch_depth}"] if fetch_depth > 0 else []
    # Azure Repos can fetch a commit by its id: a shallow fetch asks for that commit only,
    # into a ref named after it; a full one fetches the remote's branches first.
    by_commit = f"refs/remotes/origin/{sha}"
    specs = [f"+{sha}:{by_commit}"] if fetch_depth > 0 else []
    git(dest, *auth, "fetch", *options, *depth, *specs, env=run)
    git(dest, *auth, "fetch", *options, *depth, f"+{sha}", env=run)  # the commit by itself
    git(dest, "checkout", "--progress", "--force", by_commit if specs else sha, env=run)
    if persist_credentials:
        git(dest, "config", f"http.{url}.extraheader", header, env=run)
    name = branch.rsplit("/", 1)[-1]
    return Checkout(
        path=dest,
        env={
            "BUILD_SOURCEVERSION": sha,
            "BUILD_SOURCEBRANCH": f"refs/heads/{branch}",
            "BUILD_SOURCEBRANCHNAME": name,
            "BUILD_SOURCESDIRECTORY": str(dest),
            "BUILD_REPOSITORY_LOCALPATH": str(dest),
            "BUILD_REPOSITORY_URI": url,
        },
    )


def basic_header(token: str) -> str:
    """actions/checkout's header value: `basic base64(x-access-token:<token>)`."""
    encoded = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return f"AUTHORIZATION: basic {encoded}"


def _origin(server: str) -> str:
    """`scheme://host[:port]`, as `new URL(serverUrl).origin` gives it."""
    parts = urlsplit(server)
    return f"{parts.scheme}://{parts.netloc}"


def actions_checkout(
    server: str,
    url: str,
    dest: Path,
    *,
    branch: str,
    token: str,
    runner_temp: Path,
    workspace: Path | None = None,
    version: int = 4,
    persist_credentials: bool = True,
    fetch_depth: int = 1,
    sha: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Checkout:
    """actions/checkout (`version` 4 or 6, no `ref:` input) on an event whose GITHUB_REF is
    `refs/heads/<branch>` (`issue_comment`, `schedule`: the default branch) into `dest`, as
    src/git-source-provider.ts, git-auth-helper.ts and ref-helper.ts run it: init,
    `remote add`, `gc.auto 0`; the token as `http.<server origin>/.extraheader` (v4: in
    `.git/config`; v6: in `$RUNNER_TEMP/git-credentials-<uuid>.config`, which `.git/config`
    includes through `includeIf.gitdir:<checkout>/.git.path` and the container path beside it);
    `fetch --no-tags --prune --no-recurse-submodules --depth=1 origin
    +<sha>:refs/remotes/origin/<branch>` (fetch-depth 0: every branch and tag); `checkout
    --progress --force -B <branch> refs/remotes/origin/<branch>`; without
    `persist_credentials` the auth removed at the end, as its "Removing auth" does.
    `server` is GITHUB_SERVER_URL; `url` the repository's remote. `env` is git's environment."""
    if version not in (4, 6):
        raise ValueError(f"actions/checkout v{version}: only v4 (extraheader) and v6 (includeIf)")
    run = dict(git_env() if env is None else env)
    key = f"http.{_origin(server)}/.extraheader"
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", str(dest), env=run)
    git(dest, "remote", "add", "origin", url, env=run)
    git(dest, "config", "--local", "gc.auto", "0", env=run)
    credentials = _configure_token(
        dest,
        key,
        token,
        version=version,
        runner_temp=runner_temp,
        workspace=workspace or dest,
        env=run,
    )
    tip = sha or _remote_tip(dest, branch)
    fetch = ["-c", "protocol.version=2", "fetch"]
    if fetch_depth > 0:
        fetch += ["--no-tags", "--prune", "--no-recurse-submodules", "--progress"]
        fetch += [f"--depth={fetch_depth}", "origin", f"+{tip}:refs/remotes/origin/{branch}"]
    else:  # all history: every branch and every tag (the tags refspec drops `--no-tags`)
        fetch += ["--prune", "--no-recurse-submodules", "--progress", "origin"]
        fetch += ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
    git(dest, *fetch, env=run)
    start = f"refs/remotes/origin/{branch}"
    git(dest, "checkout", "--progress", "--force", "-B", branch, start, env=run)
    if not persist_credentials:  # the post-checkout step "Removing auth"
        _remove_auth(dest, key, credentials, run)
        credentials = None
    return Checkout(
        path=dest,
        env={
            "GITHUB_REF": f"refs/heads/{branch}",
            "GITHUB_REF_NAME": branch,
            "GITHUB_REF_TYPE": "branch",
            "GITHUB_SHA": tip,
            "GITHUB_WORKSPACE": str(workspace or dest),
            "RUNNER_TEMP": str(runner_temp),
        },
        credentials_file=credentials,
    )


def _remove_auth(dest: Path, key: str, credentials: Path | None, env: Mapping[str, str]) -> None:
    """The extraheader, the includes of v6's credentials file, and the file itself."""
    if credentials is None:  # v4: the header is in .git/config
        git(dest, "config", "--local", "--unset-all", key, env=env)
        return
    listed = git(dest, "config", "--local", "--name-only", "--get-regexp", r"^includeif\.", env=env)
    for name in dict.fromkeys(listed.splitlines()):
        git(dest, "config", "--local", "--unset-all", name, env=env)
    credentials.unlink()


def _configure_token(
    dest: Path,
    key: str,
    token: str,
    *,
    version: int,
    runner_temp: Path,
    workspace: Path,
    env: Mapping[str, str],
) -> Path | None:
    """The token where the checkout version puts it: a placeholder written with `git config`,
    then replaced in the file (the token never appears in a command line); v6's file path."""
    if version == 4:
        target = dest / ".git" / "config"
        git(dest, "config", "--local", key, PLACEHOLDER, env=env)
    else:
        runner_temp.mkdir(parents=True, exist_ok=True)
        target = runner_temp / f"git-credentials-{uuid.uuid4()}.config"
        target.write_text("")
        git(dest, "config", "--file", str(target), key, PLACEHOLDER, env=env)
    text = target.read_text()
    if text.count(PLACEHOLDER) != 1:
        raise AssertionError(f"no single auth placeholder in {target}")
    target.write_text(text.replace(PLACEHOLDER, basic_header(token)))
    if version == 4:
        return None
    git_dir = (dest / ".git").as_posix()
    git(dest, "config", "--local", f"includeIf.gitdir:{git_dir}.path", str(target), env=env)
    # The same file as a container job's steps see it (`/github/workspace`, `/github/runner_temp`).
    relative = os.path.relpath(dest, workspace)
    container = PurePosixPath("/github/workspace", "" if relative == "." else relative, ".git")
    in_container = PurePosixPath("/github/runner_temp", target.name)
    git(dest, "config", "--local", f"includeIf.gitdir:{container}.path", str(in_container), env=env)
    return target
