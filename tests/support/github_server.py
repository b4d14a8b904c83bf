"""The fake GitHub over real HTTP on loopback, for a separate process (`python -m action`).

    with serve_fake_github(fake, bare_repo=bare) as base_url:   # http://127.0.0.1:<port>/api/v3
        subprocess.run([..., "-m", "action"], env={**os.environ, **github_env(fake, base_url)})
    assert fake.mutations == ...                                # the fake lives in this process

`serve_fake_github` serves on tests/support/loopback.py's server (aiohttp on its own event loop
in a background thread). Every request that is not git traffic becomes an `httpx.Request` (same
method, raw path and query, headers and body) for `FakeGitHub.handle`, and its `httpx.Response`
goes back as is; so the fake's accounting (`requests`, `mutations`, `counted`, `unexpected`,
`log`) covers what the other process sent, and a test reads it after the process ended. While
serving, `fake.base_url` is the served URL (links the fake writes, e.g. pagination, point back
at the server).

The URL ends in `/api/v3`, as on GitHub Enterprise Server, so `GitHubHost` derives its git
remote from it: `http://127.0.0.1:<port>/<owner>/<repo>.git`. With `bare_repo`, that path is a
git smart-HTTP edge (`git http-backend`, through loopback's `git_http_backend`) over the bare
repository, and it accepts exactly the tokens the REST edge accepts (`FakeGitHub.token_user`),
sent the way pairbot sends them (`AUTHORIZATION: basic base64(x-access-token:TOKEN)`); so the
Action needs no remote override.
A test in this process may instead give `GitHubHost(remote_url=str(bare))` and push by path.
`checkout(fake, base_url, dest)` makes the workspace `actions/checkout` would: a clone of that
remote with the token persisted as an `extraheader`, so plain `git fetch`/`git push origin`
(the `pair-state` branch) authenticate as on a runner.

With `bare_repo` the fake's branches are the bare repository's: before every request
`branches` is re-read from `git for-each-ref refs/heads` and open pulls' heads follow their
branches (a push moves a pull, a pull can only be opened for a pushed branch, statuses are
looked up by real SHAs), and an accepted merge (`PUT .../merge`, still pinned: a stale `sha` is
409) writes a real merge, squash or rebase commit to the base branch. Seed branches by pushing
to the bare repository: an in-memory `seed_pull`/`move_head` SHA is replaced on the next read.

Credentials: the fake accepts `fake.pat` (its user is `fake.pat_user`) and installation tokens
it minted itself. `accept_actions_token(fake, token)` makes `token` the Actions `GITHUB_TOKEN`:
it authenticates as `github-actions[bot]`, whose `GET /user` is refused as on GitHub. App
credentials work too if the fake keeps real time (`FakeGitHub(clock=WallClock())`): the other
process signs its JWT with its own clock.

A fault queued with kind "timeout" drops the connection without an answer (a client sees a
transport error, not a read timeout: nothing here waits for the client's timer to fire).
The fake is plain state shared with the server thread: seed it before the other process runs
(or between its requests), and read it after.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from multidict import CIMultiDict

from hosts.github.push import basic_credential
from tests.support.fake_github import FakeClock, FakeGitHub, PullState
from tests.support.git import GitError, git, git_env, run_git
from tests.support.loopback import (
    HOP_HEADERS,
    DropConnection,
    Request,
    Response,
    git_http_backend,
    serve,
)

API_PREFIX = "/api/v3"
ACTIONS_TOKEN = "ghs_e2eActionsToken0123456789abcdefABCDEF"  # noqa: S105 - a fake's token
_GIT_SERVICE = re.compile(r"/(?:info/refs|git-upload-pack|git-receive-pack|HEAD|objects/.+)")
# GitHub writes merge commits as itself; fixed here so they never depend on the machine.
GITHUB_IDENTITY = ("GitHub", "noreply@github.com")


class WallClock(FakeClock):
    """A `FakeClock` that reads real time, for a fake another process talks to.

    The other process signs App JWTs (`iat`, `exp`) and reads token expiries with its own
    `time.time()`; a frozen clock would contradict it. `sleep` does not advance anything.
    """

    def __init__(self) -> None:
        super().__init__(time.time())

    @property  # type: ignore[override]  # FakeClock stores `now`; here it is read live
    def now(self) -> float:
        return time.time()

    @now.setter
    def now(self, _: float) -> None:
        pass  # real time moves on its own

    def iso(self) -> str:
        return datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def accept_actions_token(fake: FakeGitHub, token: str = ACTIONS_TOKEN) -> str:
    """Make `token` the fake's Actions `GITHUB_TOKEN` (as `github-actions[bot]`); returns it."""
    fake.pat = token
    fake.pat_user = fake.user("github-actions[bot]", bot=True, uid=41898282)
    fake.collaborators.setdefault("github-actions[bot]", "write")
    return token


def github_env(fake: FakeGitHub, base_url: str, token: str | None = None) -> dict[str, str]:
    """The variables that point the Action at this fake: the API and server URLs, the
    repository, and the token both as the `github-token` input (`action.context`) and as
    `GITHUB_TOKEN` (`app.hosting.HostSettings`). The run's own variables (event, workspace,
    outputs) are the caller's."""
    secret = fake.pat if token is None else token
    return {
        "GITHUB_API_URL": base_url,
        "GITHUB_SERVER_URL": base_url.removesuffix(API_PREFIX),
        "GITHUB_REPOSITORY": f"{fake.owner}/{fake.repo}",
        "INPUT_GITHUB_TOKEN": secret,
        "GITHUB_TOKEN": secret,
    }


def checkout(fake: FakeGitHub, base_url: str, dest: Path, *, token: str | None = None) -> Path:
    """A workspace as `actions/checkout` leaves it: cloned from the served remote, `origin` set
    to it, and the token persisted in the clone's config as
    `http.<server>/.extraheader = AUTHORIZATION: basic ...` (so later fetches and pushes by the
    Action, e.g. of the `pair-state` branch, authenticate the way they do on a runner)."""
    server = base_url.removesuffix(API_PREFIX) + "/"
    header = f"AUTHORIZATION: basic {basic_credential(fake.pat if token is None else token)}"
    remote = f"{server}{fake.owner}/{fake.repo}"  # the URL form actions/checkout uses
    key = f"http.{server}.extraheader"
    git(dest.parent, "-c", f"{key}={header}", "clone", "-q", remote, str(dest))
    git(dest, "config", "--local", key, header)
    return dest


@dataclass(frozen=True)
class BareRepo:
    """The server side of a bare repository: its branches, and merges GitHub would make."""

    path: Path

    def git(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        # Server-side git commits as GitHub (merges, rebases), never as the test's identity.
        return run_git(cwd or self.path, *args, env=git_env(identity=GITHUB_IDENTITY))

    def _ok(self, *args: str, cwd: Path | None = None) -> str:
        return git(cwd or self.path, *args, env=git_env(identity=GITHUB_IDENTITY))

    def branches(self) -> dict[str, str]:
        """Branch name → head SHA, as `git for-each-ref refs/heads` lists them."""
        listing = self._ok("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads")
        pairs = (line.split(" ", 1) for line in listing.splitlines() if line)
        return {ref.removeprefix("refs/heads/"): sha for sha, ref in pairs}

    def merge(self, pull: PullState, method: str, message: str) -> str | None:
        """Merge the pull's pinned head into its base branch; the new base SHA, or None when it
        cannot be done (conflicting trees, no base branch, the base moved meanwhile)."""
        base = self.branches().get(pull.base_ref)
        if base is None:
            return None
        if method == "rebase":
            tip = self._rebase(base, pull.head_sha)
        else:
            # `merge-tree --write-tree` (git >= 2.38) merges without a work tree: the tree, or
            # exit status 1 on conflicts.
            merged = self.git("merge-tree", "--write-tree", base, pull.head_sha)
            if merged.returncode == 1:
                return None
            if merged.returncode != 0:
                raise GitError(merged.returncode, merged.args, merged.stdout, merged.stderr)
            tree = merged.stdout.split()[0]
            parents = ["-p", base] + (["-p", pull.head_sha] if method == "merge" else [])
            tip = self._ok("commit-tree", tree, *parents, "-m", message)
        if tip is None:
            return None
        # Compare-and-swap on the base: a push that landed meanwhile is never overwritten.
        moved = self.git("update-ref", f"refs/heads/{pull.base_ref}", tip, base)
        return tip if moved.returncode == 0 else None

    def _rebase(self, base: str, head: str) -> str | None:
        """GitHub's "rebase and merge": the head's commits replayed on the base, always as new
        commits. `merge-tree` cannot pick a merge base before git 2.40, so a scratch worktree
        runs a real `git rebase`."""
        with tempfile.TemporaryDirectory(prefix="fake-github-rebase-") as scratch:
            work = Path(scratch) / "work"
            self._ok("worktree", "add", "--detach", str(work), head)
            try:
                done = self.git("rebase", "--force-rebase", base, cwd=work)
                if done.returncode != 0:
                    self.git("rebase", "--abort", cwd=work)
                    return None
                return self._ok("rev-parse", "HEAD", cwd=work)
            finally:
                self._ok("worktree", "remove", "--force", str(work))


def _basic_token(header: str) -> str | None:
    """The token of `basic base64(x-access-token:TOKEN)` (any user name, as GitHub allows)."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2] or None


class _Edge:
    """What the fake GitHub answers on loopback: git traffic, or the REST API from `fake`."""

    def __init__(self, fake: FakeGitHub, repo: BareRepo | None) -> None:
        self.fake = fake
        self.repo = repo

    async def __call__(self, request: Request) -> Response:
        if self.repo is not None:
            prefix = f"/{self.fake.owner}/{self.fake.repo}"
            for root in (f"{prefix}.git", prefix):
                rest = request.path.removeprefix(root)
                if rest != request.path and _GIT_SERVICE.fullmatch(rest):
                    return await self._git(request, self.repo, rest)
        return await self._rest(request)

    async def _rest(self, request: Request) -> Response:
        outgoing = httpx.Request(
            request.method,
            f"{request.origin}{request.target}",
            headers=[(k, v) for k, v in request.headers.items() if k.lower() not in HOP_HEADERS],
            content=request.body,
        )
        try:
            answer = await self.fake.handle(outgoing)
        except httpx.TimeoutException:
            # The fake's "timeout" faults: the client gets no answer at all.
            raise DropConnection from None
        except Exception as error:
            # A broken fake must fail the test, not hide behind a 500: in-process the exception
            # would reach the test; here the harness's check of `unexpected` is what fails it.
            line = f"{request.method} {request.path}: the fake raised {error!r}"
            self.fake.unexpected.append(line)
            return Response.of(500, f"fake GitHub: {line}".encode())
        headers = CIMultiDict(answer.headers.multi_items())
        return Response(answer.status_code, answer.content, headers)

    async def _git(self, request: Request, repo: BareRepo, rest: str) -> Response:
        """Smart HTTP through `git http-backend`, behind the fake's token check."""
        token = _basic_token(request.headers.get("authorization", ""))
        user = self.fake.token_user(token) if token is not None else None
        if user is None:
            return Response.of(
                401,
                b"Invalid username or token.\n",
                {"WWW-Authenticate": 'Basic realm="GitHub"', "Content-Type": "text/plain"},
            )
        return await asyncio.to_thread(
            git_http_backend,
            request,
            project_root=repo.path,
            path_info=rest,
            remote_user=user.login,
        )


@contextlib.contextmanager
def serve_fake_github(fake: FakeGitHub, *, bare_repo: Path | None) -> Iterator[str]:
    """Serve `fake` on 127.0.0.1 (a free port) until the block ends; yields the API base URL
    (`http://127.0.0.1:<port>/api/v3`). With `bare_repo`, branches, merges and the git remote
    `http://127.0.0.1:<port>/<owner>/<repo>.git` are that repository's."""
    saved = (fake.base_url, fake.branch_source, fake.on_merge)
    repo = BareRepo(bare_repo.resolve()) if bare_repo is not None else None
    try:
        with serve(_Edge(fake, repo), name="fake GitHub") as origin:
            base_url = f"{origin}{API_PREFIX}"
            fake.base_url = base_url
            if repo is not None:
                fake.branch_source, fake.on_merge = repo.branches, repo.merge
                fake.sync_branches()  # `fake.branches` is true before the first request, too
            yield base_url
    finally:
        fake.base_url, fake.branch_source, fake.on_merge = saved
