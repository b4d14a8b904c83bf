"""The fake GitHub over real HTTP on loopback, for a separate process (`python -m action`).

    with serve_fake_github(fake, bare_repo=bare) as base_url:   # http://127.0.0.1:<port>/api/v3
        subprocess.run([..., "-m", "action"], env={**os.environ, **github_env(fake, base_url)})
    assert fake.mutations == ...                                # the fake lives in this process

`serve_fake_github` runs an aiohttp server on its own event loop in a background thread. Every
request that is not git traffic becomes an `httpx.Request` (same method, raw path and query,
headers and body) for `FakeGitHub.handle`, and its `httpx.Response` goes back as is; so the
fake's accounting (`requests`, `mutations`, `counted`, `unexpected`, `log`) covers what the
other process sent, and a test reads it after the process ended. While serving, `fake.base_url`
is the served URL (links the fake writes, e.g. pagination, point back at the server).

The URL ends in `/api/v3`, as on GitHub Enterprise Server, so `GitHubHost` derives its git
remote from it: `http://127.0.0.1:<port>/<owner>/<repo>.git`. With `bare_repo`, that path is a
git smart-HTTP edge (`git http-backend`) over the bare repository, and it accepts exactly the
tokens the REST edge accepts (`FakeGitHub.token_user`), sent the way pairbot sends them
(`AUTHORIZATION: basic base64(x-access-token:TOKEN)`); so the Action needs no remote override.
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
import concurrent.futures
import contextlib
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from aiohttp import web
from multidict import CIMultiDict

from hosts.github_auth import basic_credential
from tests.support.fake_github import FakeClock, FakeGitHub, PullState

HOST = "127.0.0.1"
API_PREFIX = "/api/v3"
ACTIONS_TOKEN = "ghs_e2eActionsToken0123456789abcdefABCDEF"  # noqa: S105 - a fake's token
# Headers that describe one hop's framing, not the message: each side sets its own.
_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)
_GIT_SERVICE = re.compile(r"/(?:info/refs|git-upload-pack|git-receive-pack|HEAD|objects/.+)")
# GitHub writes merge commits as itself; fixed here so they never depend on the machine.
_GITHUB_IDENTITY = {
    "GIT_AUTHOR_NAME": "GitHub",
    "GIT_AUTHOR_EMAIL": "noreply@github.com",
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}
_STOP_TIMEOUT_S = 30.0  # a bound on a hung shutdown, never a measured duration


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
    env = {k: v for k, v in os.environ.items() if k[:4] != "GIT_"}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    key = f"http.{server}.extraheader"
    for argv in (
        ["git", "-c", f"{key}={header}", "clone", "-q", remote, str(dest)],
        ["git", "-C", str(dest), "config", "--local", key, header],
    ):
        subprocess.run(argv, env=env, check=True, capture_output=True)
    return dest


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for server-side git: no inherited `GIT_*` (a test run from a git hook
    has `GIT_DIR` set), no system or global config (a developer's `commit.gpgsign` or hooks
    must not reach the fake's merges), GitHub as the committer."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k[:4] != "GIT_"}
    env.update(_GITHUB_IDENTITY, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


@dataclass(frozen=True)
class BareRepo:
    """The server side of a bare repository: its branches, and merges GitHub would make."""

    path: Path

    def git(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args],
            cwd=cwd or self.path,
            env=git_env(),
            capture_output=True,
            text=True,
            check=False,
        )

    def _ok(self, *args: str, cwd: Path | None = None) -> str:
        done = self.git(*args, cwd=cwd)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout.strip()

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
                raise RuntimeError(f"git merge-tree: {merged.stderr.strip()}")
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


class _Server:
    """aiohttp on its own event loop in a daemon thread, answering from `fake`."""

    def __init__(self, fake: FakeGitHub, repo: BareRepo | None) -> None:
        self.fake = fake
        self.repo = repo
        self._thread = threading.Thread(target=self._run, name="fake-github", daemon=True)
        self._started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._crash: BaseException | None = None

    def start(self) -> int:
        """Serve; the port bound on 127.0.0.1."""
        self._thread.start()
        return self._started.result(timeout=_STOP_TIMEOUT_S)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise RuntimeError("the fake GitHub server did not stop")
        if self._crash is not None:
            raise RuntimeError("the fake GitHub server crashed") from self._crash

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # surfaced in the test thread: at start, or at stop
            if self._started.done():
                self._crash = error
            else:
                self._started.set_exception(error)

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # git pushes whole packs
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, HOST, 0)
            await site.start()
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            _, port = runner.addresses[0][:2]
            self._started.set_result(int(port))
            await self._stop.wait()
        finally:
            await runner.cleanup()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if self.repo is not None:
            prefix = f"/{self.fake.owner}/{self.fake.repo}"
            for root in (f"{prefix}.git", prefix):
                rest = request.path.removeprefix(root)
                if rest != request.path and _GIT_SERVICE.fullmatch(rest):
                    return await self._git(request, self.repo, rest)
        return await self._rest(request)

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        outgoing = httpx.Request(
            request.method,
            f"http://{HOST}:{request.url.port}{request.raw_path}",
            headers=[(k, v) for k, v in request.headers.items() if k.lower() not in _HOP],
            content=await request.read(),
        )
        try:
            answer = await self.fake.handle(outgoing)
        except httpx.TimeoutException:
            # The fake's "timeout" faults: the client gets no answer at all.
            if request.transport is not None:
                request.transport.abort()
            raise web.HTTPServiceUnavailable() from None  # never written: the socket is gone
        except Exception as error:
            # A broken fake must fail the test, not hide behind a 500: in-process the exception
            # would reach the test; here the harness's check of `unexpected` is what fails it.
            line = f"{request.method} {request.path}: the fake raised {error!r}"
            self.fake.unexpected.append(line)
            return web.Response(status=500, text=f"fake GitHub: {line}")
        headers = CIMultiDict(
            (k, v) for k, v in answer.headers.multi_items() if k.lower() not in _HOP
        )
        return web.Response(status=answer.status_code, body=answer.content, headers=headers)

    async def _git(self, request: web.Request, repo: BareRepo, rest: str) -> web.StreamResponse:
        """Smart HTTP through `git http-backend` (CGI), behind the fake's token check."""
        token = _basic_token(request.headers.get("authorization", ""))
        user = self.fake.token_user(token) if token is not None else None
        if user is None:
            return web.Response(
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
                text="Invalid username or token.\n",
            )
        # aiohttp has already undone any Content-Encoding of the body, so none is passed on.
        body = await request.read()
        env = git_env()
        env.update(
            GIT_PROJECT_ROOT=str(repo.path),
            GIT_HTTP_EXPORT_ALL="1",
            PATH_INFO=rest,
            REQUEST_METHOD=request.method,
            QUERY_STRING=request.query_string,
            CONTENT_TYPE=request.headers.get("content-type", ""),
            CONTENT_LENGTH=str(len(body)),
            REMOTE_USER=user.login,  # http-backend allows receive-pack only to a known user
            REMOTE_ADDR=request.remote or HOST,
        )
        if "git-protocol" in request.headers:
            env["GIT_PROTOCOL"] = request.headers["git-protocol"]
        process = await asyncio.create_subprocess_exec(
            "git",
            "http-backend",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate(body)
        head, separator, payload = out.partition(b"\r\n\r\n")
        if not separator:
            head, separator, payload = out.partition(b"\n\n")
        if process.returncode != 0 or not separator:
            return web.Response(status=500, text=f"git http-backend failed: {err.decode()}")
        status, headers = 200, CIMultiDict[str]()
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name.lower() not in _HOP:
                headers.add(name, value.strip())
        return web.Response(status=status, body=payload, headers=headers)


@contextlib.contextmanager
def serve_fake_github(fake: FakeGitHub, *, bare_repo: Path | None) -> Iterator[str]:
    """Serve `fake` on 127.0.0.1 (a free port) until the block ends; yields the API base URL
    (`http://127.0.0.1:<port>/api/v3`). With `bare_repo`, branches, merges and the git remote
    `http://127.0.0.1:<port>/<owner>/<repo>.git` are that repository's."""
    saved = (fake.base_url, fake.branch_source, fake.on_merge)
    repo = BareRepo(bare_repo.resolve()) if bare_repo is not None else None
    server = _Server(fake, repo)
    port = server.start()
    base_url = f"http://{HOST}:{port}{API_PREFIX}"
    fake.base_url = base_url
    if repo is not None:
        fake.branch_source, fake.on_merge = repo.branches, repo.merge
        fake.sync_branches()  # `fake.branches` is true before the first request, too
    try:
        yield base_url
    finally:
        try:
            server.stop()
        finally:
            fake.base_url, fake.branch_source, fake.on_merge = saved
