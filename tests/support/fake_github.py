"""A stateful fake GitHub behind `httpx.MockTransport`: in-process, no sockets.

It answers the REST calls the GitHub adapter makes with the real response shapes of
`shared/corpora/github-rest/`, copied to `tests/fixtures/github-rest/` (each example loaded
and only the fields that matter overwritten: ids, numbers, bodies, users, SHAs, labels), keeps
the state those calls change, and checks what a real GitHub would check: credentials (a token,
an installation token that has not expired, an RS256 App JWT with sane claims verified with
the App's public key), pinned merge SHAs, the head of a pull, who may edit a comment.

Bookkeeping for the tests:

    requests     every request that reached it
    mutations    POST/PATCH/PUT/DELETE and GraphQL mutations, token mints excluded
    counted      requests GitHub would count against the rate limit (a 304 does not)
    not_modified 304 answers to `If-None-Match`
    mints        POST /app/installations/{id}/access_tokens
    unexpected   requests no route (or no state) explains: each answered 500 with a clear
                 message; a harness fails the test at teardown when this is not empty
    violations   requests that arrived inside a rate-limit window this fake announced
    max_parallel_mutations   the most mutations in flight at once
    gets         (path, query parameters, status) of every GET: which page, and was it a 304
    arrivals     (time.monotonic(), method, path) of every request as it arrived: wall time,
                 not the fake's clock, so a harness can time another process's first call

Listing comments pages as GitHub does: `per_page` (default 30, capped at 100) and `page`, with
a `Link` header naming `next`/`last` (and `prev`/`first` after page 1), omitted when all fits
on one page. Every 200 GET carries a weak `ETag` computed over the body alone and
`Cache-Control: private, max-age=60`; `If-None-Match` with that ETag is answered 304 with no
body and no `Link`. So, as on GitHub, a page whose own items did not change stays 304 after
items arrived on the page behind it: a client that replays its stored page keeps the `Link`
it stored, without the `rel="next"` it would now have.

Faults are queued with `fail(method, path_regex, kind, ...)`: a 5xx before or after storing, a
timeout after storing, a 429 or a secondary-limit 403 with `retry-after`, a spent primary
quota, a revoked installation token (401).

Shapes the corpus has no example for (`GET /app`, `GET /user(s)`, GraphQL) are the smallest
documented subset, noted where they are built.

Branches live in `branches` (in memory) unless two optional hooks say otherwise — the end-to-end
server (`tests/support/github_server.py`) backs them with a real bare repository:

    branch_source  read before every request: the branch → SHA map replaces `branches`, and each
                   open pull's head follows its branch (a `git push` moves the pull)
    on_merge       performs an accepted merge for real: (pull, method, message) → the new base
                   SHA, or None when the trees conflict (answered 405, as GitHub does)
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "github-rest"
START = 1_700_000_000.0
DOCS = "https://docs.github.com/rest"

FaultKind = Literal[
    "5xx",  # 502 before anything is stored
    "5xx-after",  # the request takes effect, then 502
    "timeout",  # httpx.ReadTimeout before anything is stored
    "timeout-after",  # the request takes effect, then httpx.ReadTimeout
    "429",  # 429 with retry-after
    "secondary",  # 403 "secondary rate limit" with retry-after
    "secondary-no-header",  # 403 "secondary rate limit", no retry-after (wait a minute)
    "primary",  # 403 with x-ratelimit-remaining: 0 and a reset `retry_after` ahead
    "revoke",  # the installation token presented is revoked: 401 Bad credentials
    "canned",  # answer `status` with `body` instead of routing
]


# The repository's merge settings, and GitHub's 405 message for a method they turn off.
_MERGE_SETTINGS = {
    "squash": "allow_squash_merge",
    "merge": "allow_merge_commit",
    "rebase": "allow_rebase_merge",
}
_MERGE_REFUSALS = {
    "squash": "Squash merges are not allowed on this repository.",
    "merge": "Merge commits are not allowed on this repository.",
    "rebase": "Rebase merges are not allowed on this repository.",
}


@functools.cache
def _load(name: str) -> str:
    return (CORPUS / name).read_text()


def example(name: str) -> Any:
    """A fresh copy of one corpus example."""
    return json.loads(_load(name))


@functools.cache
def rsa_key() -> tuple[str, Any]:
    """A test App's private key (PEM) and its public key, made once per session."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return pem, key.public_key()


class FakeClock:
    """Time the host and the fake share; `sleep` advances it instantly and is recorded."""

    def __init__(self, start: float = START) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)

    def iso(self) -> str:
        return datetime.fromtimestamp(self.now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class User:
    login: str
    id: int
    type: Literal["User", "Bot"] = "User"


@dataclass
class Issue:
    number: int
    title: str
    body: str
    user: User
    labels: list[str]
    assignees: list[str]
    created_at: str
    state: str = "open"
    is_pull: bool = False


@dataclass
class PullState:
    number: int
    head_ref: str
    head_sha: str
    base_ref: str
    draft: bool = False
    merged: bool = False
    merge_commit_sha: str | None = None
    mergeable: bool = True


@dataclass
class StoredComment:
    id: int
    issue: int
    body: str
    user: User
    created_at: str
    updated_at: str


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    kind: FaultKind
    retry_after: float = 30.0
    times: int = 1
    status: int = 200
    body: Any = None


@dataclass
class _Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    caller: User | None
    bearer: str


class Unhandled(Exception):
    """No route or state explains the request."""


@dataclass
class FakeGitHub:
    """The fake server. `transport` is what the adapter is given."""

    clock: FakeClock = field(default_factory=FakeClock)
    owner: str = "octocat"
    repo: str = "Hello-World"
    base_url: str = "https://api.github.com"
    pat: str = "ghp_fakePersonalToken0123456789abcdefABCD"
    pat_user: User = User("pairbot-ci", 5_000_001, "User")
    app_id: int = 123_456
    app_slug: str = "pairbot"
    installation_id: int = 42
    bot_user: User = User("pairbot[bot]", 9_000_001, "Bot")
    token_lifetime_s: float = 3600.0
    secondary_wait_s: float = 60.0

    requests: int = 0
    mutations: int = 0
    counted: int = 0
    not_modified: int = 0
    mints: int = 0
    unexpected: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    gets: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    arrivals: list[tuple[float, str, str]] = field(default_factory=list)
    jwt_claims: list[dict[str, Any]] = field(default_factory=list)
    max_parallel_mutations: int = 0
    # Called with (method, path) before a request is routed: the world moving mid-call.
    before_route: Callable[[str, str], None] | None = None
    # Where branches really live (see the module docstring); None: in `branches`, in memory.
    branch_source: Callable[[], dict[str, str]] | None = None
    on_merge: Callable[[PullState, str, str], str | None] | None = None

    def __post_init__(self) -> None:
        self.public_key = rsa_key()[1]
        self.users: dict[str, User] = {
            u.login: u
            for u in (
                self.pat_user,
                self.bot_user,
                User("octocat", 1, "User"),
                User("dependabot[bot]", 49_699_333, "Bot"),
                User("someone-else", 7_000_001, "User"),
            )
        }
        self.collaborators: dict[str, str] = {"octocat": "admin", "pairbot-ci": "write"}
        self.issues: dict[int, Issue] = {}
        self.pulls: dict[int, PullState] = {}
        self.comments: dict[int, StoredComment] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = {}
        self.check_runs: dict[str, list[dict[str, Any]]] = {}
        # Branch protection's required status checks, by branch; a branch absent is unprotected.
        self.protection: dict[str, list[str]] = {}
        # The repository's merge settings (`allow_*_merge`); None: the repository answer omits
        # them, as GitHub does for a token that may not read the settings.
        self.merge_methods: set[str] | None = {"merge", "squash", "rebase"}
        self.reactions: list[tuple[str, int, str, str]] = []
        self._sha_seq = 0
        self.branches: dict[str, str] = {"main": self._sha("main")}
        self.tokens: dict[str, float] = {}  # valid installation tokens → expiry
        self.minted: list[str] = []  # every installation token ever minted
        self.faults: list[Fault] = []
        self._next_number = 1
        self._next_comment = 1_000_001
        self._next_id = 9_000
        self._window_until = 0.0
        self._in_flight = 0
        self._remaining = 5000
        self._reset = int(self.clock()) + 3600
        self.transport = httpx.MockTransport(self.handle)

    # -- the outside world (harness moves) ---------------------------------------------------

    def _sha(self, seed: str) -> str:
        self._sha_seq += 1
        return hashlib.sha1(f"{seed}:{self._sha_seq}".encode(), usedforsecurity=False).hexdigest()

    def user(self, login: str, *, bot: bool = False, uid: int | None = None) -> User:
        """A known account (created on first mention)."""
        if login not in self.users:
            self._next_id += 1
            self.users[login] = User(login, uid or self._next_id, "Bot" if bot else "User")
        return self.users[login]

    def seed_issue(
        self,
        title: str,
        body: str,
        labels: tuple[str, ...] = (),
        assignees: tuple[str, ...] = (),
        *,
        author: str = "octocat",
    ) -> int:
        number = self._next_number
        self._next_number += 1
        self.issues[number] = Issue(
            number, title, body, self.users[author], list(labels), list(assignees), self.clock.iso()
        )
        return number

    def seed_pull(self, head: str, base: str = "main", *, author: str = "octocat") -> int:
        self.branches.setdefault(head, self._sha(head))
        number = self.seed_issue(f"Pull for {head}", "", author=author)
        self.issues[number].is_pull = True
        self.pulls[number] = PullState(number, head, self.branches[head], base)
        return number

    def move_head(self, number: int) -> str:
        pull = self.pulls[number]
        pull.head_sha = self.branches[pull.head_ref] = self._sha(pull.head_ref)
        return pull.head_sha

    def add_check_run(
        self,
        sha: str,
        name: str,
        conclusion: str | None,
        *,
        app_slug: str = "github-actions",
        title: str = "",
    ) -> int:
        """An App (GitHub Actions by default) reports check run `name` on `sha`; `conclusion`
        None: still in progress. Its id."""
        self._next_id += 1
        app_id = self.app_id if app_slug == self.app_slug else 15_368
        # No corpus example for a check run: the documented fields of "Get a check run"
        # (https://docs.github.com/en/rest/checks/runs#get-a-check-run) the adapter reads.
        run = {
            "id": self._next_id,
            "node_id": f"CR_{self._next_id}",
            "head_sha": sha,
            "external_id": "",
            "url": self._api(f"{self._repo_path()}/check-runs/{self._next_id}"),
            "html_url": f"https://github.com/{self.owner}/{self.repo}/runs/{self._next_id}",
            "details_url": f"https://ci.example/{name}/{self._next_id}",
            "status": "in_progress" if conclusion is None else "completed",
            "conclusion": conclusion,
            "started_at": self.clock.iso(),
            "completed_at": None if conclusion is None else self.clock.iso(),
            "output": {
                "title": title or None,
                "summary": None,
                "text": None,
                "annotations_count": 0,
                "annotations_url": "",
            },
            "name": name,
            "check_suite": {"id": 5_000 + self._next_id},
            "app": {"id": app_id, "slug": app_slug, "node_id": f"A_{app_id}", "name": app_slug},
            "pull_requests": [],
        }
        self.check_runs.setdefault(sha, []).append(run)
        return int(run["id"])

    def add_status(
        self, sha: str, context: str, state: str, *, description: str = "", login: str = "octocat"
    ) -> None:
        """Someone else (a CI service) sets commit status `context` on `sha`."""
        self._next_id += 1
        data: dict[str, Any] = example("repos-create-commit-status.json")
        data.update(
            id=self._next_id,
            node_id=f"SC_{self._next_id}",
            url=self._api(f"{self._repo_path()}/statuses/{sha}"),
            state=state,
            description=description or None,
            target_url=f"https://ci.example/{context}",
            context=context,
            created_at=self.clock.iso(),
            updated_at=self.clock.iso(),
            creator=self.user_json(self.users[login]),
        )
        self.statuses.setdefault(sha, []).append(data)

    def sync_branches(self) -> None:
        """Re-read `branches` from `branch_source`; open pulls' heads follow their branches.

        A closed or merged pull keeps the head it had, as on GitHub. Without a source this does
        nothing: the in-memory branches are the truth.
        """
        if self.branch_source is None:
            return
        self.branches = dict(self.branch_source())
        for pull in self.pulls.values():
            if pull.merged or self.issues[pull.number].state != "open":
                continue
            if pull.head_ref in self.branches:
                pull.head_sha = self.branches[pull.head_ref]

    def token_user(self, token: str) -> User | None:
        """Whom a token authenticates: the PAT's user, the bot for a live installation token,
        None for anything else. The REST edge and a git edge in front of this fake share it."""
        if token == self.pat:
            return self.pat_user
        expires = self.tokens.get(token)
        if expires is not None and self.clock() < expires:
            return self.bot_user
        return None

    def add_comment(self, number: int, body: str, login: str) -> int:
        comment_id = self._next_comment
        self._next_comment += 1
        now = self.clock.iso()
        self.comments[comment_id] = StoredComment(
            comment_id, number, body, self.users[login], now, now
        )
        return comment_id

    def comments_on(self, number: int) -> list[StoredComment]:
        return [c for c in self.comments.values() if c.issue == number]

    def fail(
        self,
        method: str,
        path: str,
        kind: FaultKind,
        *,
        retry_after: float = 30.0,
        times: int = 1,
        status: int = 200,
        body: Any = None,
    ) -> None:
        """The next `times` requests matching `method` and the `path` regex fail as `kind`."""
        self.faults.append(Fault(method, re.compile(path), kind, retry_after, times, status, body))

    # -- shapes --------------------------------------------------------------------------------

    def _api(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _repo_path(self) -> str:
        return f"/repos/{self.owner}/{self.repo}"

    def user_json(self, user: User) -> dict[str, Any]:
        data: dict[str, Any] = example("issues-create-comment.json")["user"]
        for key, value in data.items():
            if isinstance(value, str):
                data[key] = value.replace("octocat", user.login)
        data.update(login=user.login, id=user.id, node_id=f"U_{user.id}", type=user.type)
        return data

    def label_json(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = example("issues-add-labels.json")[0]
        digest = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
        data.update(
            id=digest,
            node_id=f"LA_{digest}",
            name=name,
            url=self._api(f"{self._repo_path()}/labels/{name}"),
            description=None,
            default=False,
        )
        return data

    def issue_json(self, issue: Issue) -> dict[str, Any]:
        data: dict[str, Any] = example("issues-update.json")
        web = f"https://github.com/{self.owner}/{self.repo}"
        data.update(
            id=100_000 + issue.number,
            node_id=f"I_{issue.number}",
            number=issue.number,
            url=self._api(f"{self._repo_path()}/issues/{issue.number}"),
            html_url=f"{web}/issues/{issue.number}",
            title=issue.title,
            body=issue.body,
            user=self.user_json(issue.user),
            labels=[self.label_json(name) for name in issue.labels],
            assignees=[self.user_json(self.user(a)) for a in issue.assignees],
            assignee=self.user_json(self.user(issue.assignees[0])) if issue.assignees else None,
            state=issue.state,
            comments=len(self.comments_on(issue.number)),
            created_at=issue.created_at,
            milestone=None,
            closed_by=None,
        )
        if issue.is_pull:
            data["pull_request"] = {
                "url": self._api(f"{self._repo_path()}/pulls/{issue.number}"),
                "html_url": f"{web}/pull/{issue.number}",
                "diff_url": f"{web}/pull/{issue.number}.diff",
                "patch_url": f"{web}/pull/{issue.number}.patch",
            }
        else:
            data.pop("pull_request", None)
        return data

    def pull_json(self, pull: PullState) -> dict[str, Any]:
        issue = self.issues[pull.number]
        data: dict[str, Any] = example("pulls-get.json")
        data.update(
            id=200_000 + pull.number,
            node_id=f"PR_{pull.number}",
            number=pull.number,
            url=self._api(f"{self._repo_path()}/pulls/{pull.number}"),
            html_url=f"https://github.com/{self.owner}/{self.repo}/pull/{pull.number}",
            state="closed" if issue.state == "closed" else "open",
            title=issue.title,
            body=issue.body,
            user=self.user_json(issue.user),
            labels=[self.label_json(name) for name in issue.labels],
            assignees=[self.user_json(self.user(a)) for a in issue.assignees],
            assignee=None,
            milestone=None,
            draft=pull.draft,
            merged=pull.merged,
            merged_at=self.clock.iso() if pull.merged else None,
            merge_commit_sha=pull.merge_commit_sha,
            mergeable=None if pull.merged else pull.mergeable,
        )
        data["head"].update(
            ref=pull.head_ref, sha=pull.head_sha, label=f"{self.owner}:{pull.head_ref}"
        )
        data["base"].update(
            ref=pull.base_ref,
            sha=self.branches.get(pull.base_ref, ""),
            label=f"{self.owner}:{pull.base_ref}",
        )
        return data

    def comment_json(self, comment: StoredComment) -> dict[str, Any]:
        data: dict[str, Any] = example("issues-create-comment.json")
        web = f"https://github.com/{self.owner}/{self.repo}"
        data.update(
            id=comment.id,
            node_id=f"IC_{comment.id}",
            url=self._api(f"{self._repo_path()}/issues/comments/{comment.id}"),
            html_url=f"{web}/issues/{comment.issue}#issuecomment-{comment.id}",
            issue_url=self._api(f"{self._repo_path()}/issues/{comment.issue}"),
            body=comment.body,
            user=self.user_json(comment.user),
            created_at=comment.created_at,
            updated_at=comment.updated_at,
        )
        return data

    # -- the HTTP edge ---------------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        self.sync_branches()
        path = unquote(request.url.path)
        prefix = httpx.URL(self.base_url).path.rstrip("/")
        if prefix and path.startswith(prefix):
            path = path[len(prefix) :] or "/"
        if path == "/api/graphql":  # GHES puts GraphQL beside /api/v3
            path = "/graphql"
        method = request.method
        self.arrivals.append((time.monotonic(), method, path))
        if self.clock() < self._window_until:
            self.violations.append(f"{method} {path} at {self.clock():.1f}")
        mint = method == "POST" and path.endswith("/access_tokens")
        mutation = method != "GET" and not mint
        if mutation:
            self.mutations += 1
            self._in_flight += 1
            self.max_parallel_mutations = max(self.max_parallel_mutations, self._in_flight)
        if self.clock() >= self._reset:  # a new rate-limit hour
            self._remaining, self._reset = 5000, int(self.clock()) + 3600
        status = 0  # 0: no answer (a timeout)
        try:
            if mutation:
                await asyncio.sleep(0)  # let a second mutation in, if the adapter allowed one
            if self._remaining == 0 and self.clock() < self._reset:
                response = self._error(
                    403,
                    "API rate limit exceeded for installation ID 42.",
                    {"x-ratelimit-remaining": "0"},
                )
            else:
                response = self._respond(request, method, path)
            status = response.status_code
        finally:
            if mutation:
                self._in_flight -= 1
            self.log.append((method, path, status))
            if method == "GET":
                self.gets.append((path, dict(request.url.params.items()), status))
        if status == 304:
            self.not_modified += 1
        else:
            # GitHub reports the quota left after counting this request.
            self.counted += 1
            self._remaining = max(0, self._remaining - 1)
            response.headers["x-ratelimit-remaining"] = str(self._remaining)
            response.headers["x-ratelimit-used"] = str(5000 - self._remaining)
        return response

    def _fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.path.search(path) and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {
            "content-type": "application/json; charset=utf-8",
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": str(self._remaining),
            "x-ratelimit-used": str(5000 - self._remaining),
            "x-ratelimit-reset": str(self._reset),
            "x-ratelimit-resource": "core",
            "x-github-request-id": f"FAKE:{self.requests}",
        }
        headers.update(extra or {})
        return headers

    def _json(self, status: int, body: Any, extra: dict[str, str] | None = None) -> httpx.Response:
        return httpx.Response(status, headers=self._headers(extra), content=json.dumps(body))

    def _error(
        self, status: int, message: str, extra: dict[str, str] | None = None
    ) -> httpx.Response:
        return self._json(status, {"message": message, "documentation_url": DOCS}, extra)

    def _respond(self, request: httpx.Request, method: str, path: str) -> httpx.Response:
        fault = self._fault(method, path)
        if fault is not None and fault.kind in ("5xx", "timeout"):
            if fault.kind == "timeout":
                raise httpx.ReadTimeout("fake GitHub: no answer", request=request)
            return self._error(502, "Server Error")
        if fault is not None and fault.kind in (
            "429",
            "secondary",
            "secondary-no-header",
            "primary",
        ):
            return self._rate_limited(fault)
        if fault is not None and fault.kind == "canned":
            return self._json(fault.status, fault.body)
        if self.before_route is not None:
            self.before_route(method, path)
        try:
            call = self._parse(request, method, path)
        except Unhandled as problem:
            return self._unexpected(method, path, str(problem))
        if fault is not None and fault.kind == "revoke":
            self.tokens.pop(call.bearer, None)
        refused = self._authenticate(call)
        if refused is not None:
            return refused
        try:
            response = self._route(call)
        except Unhandled as problem:
            return self._unexpected(method, path, str(problem))
        if fault is not None and fault.kind == "5xx-after":
            return self._error(502, "Server Error")
        if fault is not None and fault.kind == "timeout-after":
            raise httpx.ReadTimeout("fake GitHub: stored, then no answer", request=request)
        if method == "GET" and response.status_code == 200:
            return self._conditional(request, response)
        return response

    def _unexpected(self, method: str, path: str, why: str) -> httpx.Response:
        line = f"{method} {path}: {why}"
        self.unexpected.append(line)
        return self._error(500, f"fake GitHub: unexpected request {line}")

    def _rate_limited(self, fault: Fault) -> httpx.Response:
        now = self.clock()
        if fault.kind == "primary":
            self._window_until = now + fault.retry_after
            self._remaining, self._reset = 1, int(now + fault.retry_after)  # this one spends it
            extra = {
                "x-ratelimit-remaining": "0",
                "x-ratelimit-reset": str(int(now + fault.retry_after)),
            }
            return self._error(403, "API rate limit exceeded for installation ID 42.", extra)
        message = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
            "again."
        )
        if fault.kind == "secondary-no-header":
            self._window_until = now + self.secondary_wait_s
            return self._error(403, message)
        self._window_until = now + fault.retry_after
        status = 429 if fault.kind == "429" else 403
        return self._error(status, message, {"retry-after": str(int(fault.retry_after))})

    def _conditional(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        etag = f'W/"{hashlib.sha256(response.content).hexdigest()}"'
        headers = {
            "etag": etag,
            "cache-control": "private, max-age=60, s-maxage=60",
            "vary": "Accept, Authorization, Cookie, X-GitHub-OTP",
        }
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers=self._headers(headers))
        response.headers.update(headers)
        return response

    def _parse(self, request: httpx.Request, method: str, path: str) -> _Request:
        query = dict(request.url.params.items())
        body: Any = None
        if request.content:
            try:
                body = json.loads(request.content)
            except ValueError:
                raise Unhandled("the body is not JSON") from None
        auth = request.headers.get("authorization", "")
        scheme, _, bearer = auth.partition(" ")
        if scheme.lower() not in ("bearer", "token") or not bearer:
            raise Unhandled("no Authorization header")
        return _Request(method, path, query, body, None, bearer)

    def _authenticate(self, call: _Request) -> httpx.Response | None:
        bad = self._error(401, "Bad credentials")
        if call.path.startswith("/app"):  # App endpoints take the JWT, and only it
            try:
                claims = jwt.decode(
                    call.bearer,
                    self.public_key,
                    algorithms=["RS256"],
                    options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
                )
            except jwt.PyJWTError:
                return bad
            now = self.clock()
            self.jwt_claims.append(claims)
            fresh = claims["iat"] <= now < claims["exp"] <= now + 600
            if claims.get("iss") != str(self.app_id) or not fresh:
                return self._error(401, "'Expiration time' claim ('exp') is too far in the future")
            return None
        call.caller = self.token_user(call.bearer)
        return bad if call.caller is None else None

    # -- routes ----------------------------------------------------------------------------------

    def _route(self, call: _Request) -> httpx.Response:
        repo = re.escape(self._repo_path())
        table: list[tuple[str, str, Callable[..., httpx.Response]]] = [
            ("GET", r"/app", self._get_app),
            ("POST", r"/app/installations/(\d+)/access_tokens", self._mint),
            ("GET", r"/app/hook/deliveries", self._list_hook_deliveries),
            ("GET", r"/user", self._get_user),
            ("GET", r"/users/([^/]+)", self._get_user_by_name),
            ("POST", r"/graphql", self._graphql),
            ("GET", repo, self._get_repo),
            ("GET", repo + r"/issues", self._list_issues),
            ("POST", repo + r"/issues", self._create_issue),
            ("GET", repo + r"/issues/(\d+)", self._get_issue),
            ("PATCH", repo + r"/issues/(\d+)", self._update_issue),
            ("GET", repo + r"/issues/comments", self._list_repo_comments),
            ("GET", repo + r"/issues/(\d+)/comments", self._list_comments),
            ("POST", repo + r"/issues/(\d+)/comments", self._create_comment),
            ("GET", repo + r"/issues/comments/(\d+)", self._get_comment),
            ("PATCH", repo + r"/issues/comments/(\d+)", self._update_comment),
            ("POST", repo + r"/issues/(\d+)/reactions", self._react_issue),
            ("POST", repo + r"/issues/comments/(\d+)/reactions", self._react_comment),
            ("POST", repo + r"/issues/(\d+)/labels", self._add_labels),
            ("DELETE", repo + r"/issues/(\d+)/labels/(.+)", self._remove_label),
            ("GET", repo + r"/collaborators/([^/]+)/permission", self._permission),
            ("GET", repo + r"/pulls", self._list_pulls),
            ("POST", repo + r"/pulls", self._create_pull),
            ("GET", repo + r"/pulls/(\d+)", self._get_pull),
            ("PATCH", repo + r"/pulls/(\d+)", self._update_pull),
            ("PUT", repo + r"/pulls/(\d+)/merge", self._merge),
            ("POST", repo + r"/statuses/([0-9a-f]{40})", self._create_status),
            ("GET", repo + r"/commits/([^/]+)/status", self._combined_status),
            ("GET", repo + r"/commits/([^/]+)/check-runs", self._list_check_runs),
            (
                "GET",
                repo + r"/branches/([^/]+)/protection/required_status_checks",
                self._required_status_checks,
            ),
        ]
        for method, pattern, handler in table:
            match = re.fullmatch(pattern, call.path)
            if method == call.method and match:
                return handler(call, *match.groups())
        raise Unhandled("no such route in the fake")

    def _get_app(self, call: _Request) -> httpx.Response:
        # No corpus example for GET /app: the documented fields the adapter reads (id, slug).
        return self._json(
            200,
            {
                "id": self.app_id,
                "slug": self.app_slug,
                "node_id": f"A_{self.app_id}",
                "name": "Pairbot",
                "owner": self.user_json(self.users["octocat"]),
            },
        )

    def _list_hook_deliveries(self, call: _Request) -> httpx.Response:
        # The App's catch-up (app.web.catchup) lists its deliveries at start: this fake made
        # none that failed (tests/web/test_catchup.py fakes a history of them).
        return self._json(200, [])

    def _mint(self, call: _Request, installation: str) -> httpx.Response:
        if int(installation) != self.installation_id:
            return self._error(404, "Not Found")
        self.mints += 1
        token = (
            f"ghs_fake{self.mints:04d}" + hashlib.sha256(str(self.mints).encode()).hexdigest()[:32]
        )
        expires = self.clock() + self.token_lifetime_s
        self.tokens[token] = expires
        self.minted.append(token)
        data: dict[str, Any] = example("apps-create-installation-access-token.json")
        data.update(
            token=token,
            expires_at=datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        return self._json(201, data)

    def _get_user(self, call: _Request) -> httpx.Response:
        if call.caller is None or call.caller.type == "Bot":
            return self._error(403, "Resource not accessible by integration")
        return self._json(200, self.user_json(call.caller))

    def _get_user_by_name(self, call: _Request, login: str) -> httpx.Response:
        if login not in self.users:
            return self._error(404, "Not Found")
        return self._json(200, self.user_json(self.users[login]))

    def _graphql(self, call: _Request) -> httpx.Response:
        query = str((call.body or {}).get("query", ""))
        variables = (call.body or {}).get("variables") or {}
        if "markPullRequestReadyForReview" not in query:
            raise Unhandled(f"GraphQL query not modelled: {query[:80]}")
        node = str(variables.get("id", ""))
        digits = node.removeprefix("PR_")
        number = int(digits) if node.startswith("PR_") and digits.isdigit() else -1
        pull = self.pulls.get(number)
        if pull is None:
            return self._json(
                200,
                {
                    "data": {"markPullRequestReadyForReview": None},
                    "errors": [{"type": "NOT_FOUND", "message": f"No node {node!r}"}],
                },
            )
        pull.draft = False
        return self._json(
            200, {"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": False}}}}
        )

    def _issue(self, number: str) -> Issue | None:
        return self.issues.get(int(number))

    def _list_issues(self, call: _Request) -> httpx.Response:
        state = call.query.get("state", "open")
        issues = [i for i in self.issues.values() if state in ("all", i.state)]
        issues.sort(key=lambda i: i.number, reverse=call.query.get("direction", "desc") == "desc")
        per_page, _ = self._paging(call)
        return self._json(200, [self.issue_json(i) for i in issues[:per_page]])

    def _create_issue(self, call: _Request) -> httpx.Response:
        body = call.body or {}
        assert call.caller is not None
        number = self.seed_issue(
            str(body["title"]),
            str(body.get("body") or ""),
            tuple(body.get("labels") or ()),
            author=call.caller.login,
        )
        return self._json(201, self.issue_json(self.issues[number]))

    def _get_issue(self, call: _Request, number: str) -> httpx.Response:
        issue = self._issue(number)
        if issue is None:
            return self._error(404, "Not Found")
        return self._json(200, self.issue_json(issue))

    def _update_issue(self, call: _Request, number: str) -> httpx.Response:
        issue = self._issue(number)
        if issue is None:
            return self._error(404, "Not Found")
        body = call.body or {}
        for key in ("title", "body", "state"):
            if key in body:
                setattr(issue, key, str(body[key]))
        if "labels" in body:
            issue.labels = [str(name) for name in body["labels"]]
        return self._json(200, self.issue_json(issue))

    def _list_comments(self, call: _Request, number: str) -> httpx.Response:
        if self._issue(number) is None:
            return self._error(404, "Not Found")
        per_page, page = self._paging(call)
        comments = sorted(self.comments_on(int(number)), key=lambda c: c.id)
        chunk = comments[(page - 1) * per_page : page * per_page]
        url = self._api(f"{self._repo_path()}/issues/{number}/comments")
        link = self._link(url, per_page, page, len(comments))
        extra = {"link": link} if link else {}
        return self._json(200, [self.comment_json(c) for c in chunk], extra)

    def _list_repo_comments(self, call: _Request) -> httpx.Response:
        """`GET /repos/{o}/{r}/issues/comments`: every issue's and pull request's comments;
        `since` keeps those updated at or after it, `sort` (created or updated) and
        `direction` order them (GitHub's defaults: created, asc), paged like the others.
        https://docs.github.com/rest/issues/comments#list-issue-comments-for-a-repository"""
        since = _instant(call.query.get("since", ""))
        field_name = "updated_at" if call.query.get("sort") == "updated" else "created_at"
        comments = [
            c
            for c in self.comments.values()
            if since is None or (_instant(c.updated_at) or since) >= since
        ]
        comments.sort(key=lambda c: (getattr(c, field_name), c.id))
        if call.query.get("direction") == "desc":
            comments.reverse()
        per_page, page = self._paging(call)
        chunk = comments[(page - 1) * per_page : page * per_page]
        link = self._link(
            self._api(f"{self._repo_path()}/issues/comments"), per_page, page, len(comments)
        )
        body = []
        for comment in chunk:
            data = self.comment_json(comment)
            issue = self.issues.get(comment.issue)
            if comment.issue in self.pulls or (issue is not None and issue.is_pull):
                # GitHub links a pull request's conversation comment under /pull/.
                data["html_url"] = data["html_url"].replace(
                    f"/issues/{comment.issue}#", f"/pull/{comment.issue}#"
                )
            body.append(data)
        return self._json(200, body, {"link": link} if link else {})

    @staticmethod
    def _paging(call: _Request) -> tuple[int, int]:
        """`per_page` (default 30, at most 100) and `page` (from 1), as GitHub reads them.

        https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api
        """
        per_page = min(max(int(call.query.get("per_page", "30")), 1), 100)
        return per_page, max(int(call.query.get("page", "1")), 1)

    @staticmethod
    def _link(url: str, per_page: int, page: int, total: int) -> str:
        """The `Link` header of one page: `prev`/`first` after page 1, `next`/`last` before the
        last page, none when everything fits on one page (GitHub then omits the header)."""
        last = max(1, -(-total // per_page))
        rels: list[tuple[int, str]] = []
        if page > 1:
            rels += [(page - 1, "prev"), (1, "first")]
        if page < last:
            rels += [(page + 1, "next"), (last, "last")]
        return ", ".join(f'<{url}?per_page={per_page}&page={n}>; rel="{rel}"' for n, rel in rels)

    def _create_comment(self, call: _Request, number: str) -> httpx.Response:
        if self._issue(number) is None:
            return self._error(404, "Not Found")
        assert call.caller is not None
        text = str((call.body or {}).get("body", ""))
        if len(text) > 65_536:
            return self._error(
                422, "Validation Failed: body is too long (maximum is 65536 characters)"
            )
        comment_id = self.add_comment(int(number), text, call.caller.login)
        return self._json(201, self.comment_json(self.comments[comment_id]))

    def _get_comment(self, call: _Request, comment_id: str) -> httpx.Response:
        comment = self.comments.get(int(comment_id))
        if comment is None:
            return self._error(404, "Not Found")
        return self._json(200, self.comment_json(comment))

    def _update_comment(self, call: _Request, comment_id: str) -> httpx.Response:
        comment = self.comments.get(int(comment_id))
        if comment is None:
            return self._error(404, "Not Found")
        if comment.user != call.caller:
            # GitHub lets an integration edit only what it wrote; an edit of a human's comment
            # by pairbot is exactly the bug the forged-marker rule prevents.
            raise Unhandled(f"edit of comment {comment_id} written by {comment.user.login}")
        comment.body = str((call.body or {}).get("body", ""))
        comment.updated_at = self.clock.iso()
        return self._json(200, self.comment_json(comment))

    def _reaction(self, call: _Request, kind: str, ident: int) -> httpx.Response:
        assert call.caller is not None
        content = str((call.body or {}).get("content", ""))
        if content not in {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}:
            return self._error(422, "Validation Failed")
        key = (kind, ident, content, call.caller.login)
        status = 200 if key in self.reactions else 201
        if status == 201:
            self.reactions.append(key)
        data: dict[str, Any] = example(
            "reactions-create-for-issue.201.json"
            if kind == "issue"
            else "reactions-create-for-issue-comment.201.json"
        )
        data.update(id=len(self.reactions), content=content, user=self.user_json(call.caller))
        return self._json(status, data)

    def _react_issue(self, call: _Request, number: str) -> httpx.Response:
        if self._issue(number) is None:
            return self._error(404, "Not Found")
        return self._reaction(call, "issue", int(number))

    def _react_comment(self, call: _Request, comment_id: str) -> httpx.Response:
        if int(comment_id) not in self.comments:
            return self._error(404, "Not Found")
        return self._reaction(call, "comment", int(comment_id))

    def _add_labels(self, call: _Request, number: str) -> httpx.Response:
        issue = self._issue(number)
        if issue is None:
            return self._error(404, "Not Found")
        for name in (call.body or {}).get("labels", []):
            if str(name).casefold() not in {lb.casefold() for lb in issue.labels}:
                issue.labels.append(str(name))
        return self._json(200, [self.label_json(name) for name in issue.labels])

    def _remove_label(self, call: _Request, number: str, name: str) -> httpx.Response:
        issue = self._issue(number)
        if issue is None:
            return self._error(404, "Not Found")
        kept = [lb for lb in issue.labels if lb.casefold() != name.casefold()]
        if len(kept) == len(issue.labels):
            return self._error(404, "Label does not exist")
        issue.labels = kept
        return self._json(200, [self.label_json(lb) for lb in issue.labels])

    def _permission(self, call: _Request, login: str) -> httpx.Response:
        if login not in self.users:
            return self._error(404, "Not Found")
        level = self.collaborators.get(login, "none")
        legacy = {"maintain": "write", "triage": "read"}.get(level, level)
        data: dict[str, Any] = example("repos-get-collaborator-permission-level.json")
        data.update(permission=legacy, role_name=level, user=self.user_json(self.users[login]))
        return self._json(200, data)

    def _open_pulls_for(self, head_ref: str) -> list[PullState]:
        return [
            p
            for p in self.pulls.values()
            if p.head_ref == head_ref and self.issues[p.number].state == "open"
        ]

    def _list_pulls(self, call: _Request) -> httpx.Response:
        state = call.query.get("state", "open")
        head = call.query.get("head")
        pulls = list(self.pulls.values())
        if head is not None:
            owner, _, ref = head.partition(":")
            pulls = [p for p in pulls if owner == self.owner and p.head_ref == ref]
        pulls = [p for p in pulls if state == "all" or self.issues[p.number].state == state]
        return self._json(200, [self.pull_json(p) for p in pulls])

    def _create_pull(self, call: _Request) -> httpx.Response:
        body = call.body or {}
        head = str(body.get("head", "")).removeprefix(f"{self.owner}:")
        if head not in self.branches:
            return self._json(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                    "documentation_url": DOCS,
                },
            )
        if self._open_pulls_for(head):
            return self._json(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": f"A pull request already exists for {self.owner}:{head}.",
                        }
                    ],
                    "documentation_url": DOCS,
                },
            )
        assert call.caller is not None
        number = self.seed_issue(
            str(body.get("title", "")), str(body.get("body") or ""), author=call.caller.login
        )
        self.issues[number].is_pull = True
        pull = PullState(
            number,
            head,
            self.branches[head],
            str(body.get("base", "main")),
            bool(body.get("draft")),
        )
        self.pulls[number] = pull
        return self._json(201, self.pull_json(pull))

    def _get_pull(self, call: _Request, number: str) -> httpx.Response:
        pull = self.pulls.get(int(number))
        if pull is None:
            return self._error(404, "Not Found")
        return self._json(200, self.pull_json(pull))

    def _update_pull(self, call: _Request, number: str) -> httpx.Response:
        pull = self.pulls.get(int(number))
        if pull is None:
            return self._error(404, "Not Found")
        body = call.body or {}
        issue = self.issues[pull.number]
        for key in ("title", "body", "state"):
            if key in body:
                setattr(issue, key, str(body[key]))
        return self._json(200, self.pull_json(pull))

    def _get_repo(self, call: _Request) -> httpx.Response:
        data: dict[str, Any] = example("pulls-get.json")["base"]["repo"]
        data.update(name=self.repo, full_name=f"{self.owner}/{self.repo}")
        for method, name in _MERGE_SETTINGS.items():
            data.pop(name, None)
            if self.merge_methods is not None:
                data[name] = method in self.merge_methods
        return self._json(200, data)

    def _merge(self, call: _Request, number: str) -> httpx.Response:
        pull = self.pulls.get(int(number))
        if pull is None:
            return self._error(404, "Not Found")
        body = call.body or {}
        issue = self.issues[pull.number]
        if pull.merged or issue.state != "open":
            return self._json(
                405, example("pulls-merge.405.response-if-merge-cannot-be-performed.json")
            )
        if body.get("sha") is not None and body["sha"] != pull.head_sha:
            return self._json(
                409,
                example(
                    "pulls-merge.409.response-if-sha-was-provided-and-pull-request-head-did-not-match.json"
                ),
            )
        if pull.draft:
            return self._error(405, "Pull Request is still a draft")
        method = str(body.get("merge_method") or "merge")
        if self.merge_methods is not None and method not in self.merge_methods:
            return self._error(405, _MERGE_REFUSALS[method])
        if not pull.mergeable:
            return self._json(
                405, example("pulls-merge.405.response-if-merge-cannot-be-performed.json")
            )
        if self.on_merge is None:
            merged_sha = self._sha("merge")
        else:
            found = self.on_merge(pull, method, self._merge_message(pull, method, body))
            if found is None:  # the trees conflict: nothing was merged
                return self._json(
                    405, example("pulls-merge.405.response-if-merge-cannot-be-performed.json")
                )
            merged_sha = found
        pull.merged = True
        pull.merge_commit_sha = merged_sha
        issue.state = "closed"
        self.branches[pull.base_ref] = pull.merge_commit_sha
        data: dict[str, Any] = example("pulls-merge.json")
        data.update(sha=pull.merge_commit_sha, merged=True)
        return self._json(200, data)

    def _merge_message(self, pull: PullState, method: str, body: dict[str, Any]) -> str:
        """GitHub's default commit message for a merge or squash, unless the request gave one
        (`commit_title`, `commit_message`). A rebase keeps the pull's own messages."""
        title = self.issues[pull.number].title
        if method == "squash":
            default_title, default_message = f"{title} (#{pull.number})", ""
        else:
            default_title = f"Merge pull request #{pull.number} from {self.owner}/{pull.head_ref}"
            default_message = title
        head = str(body.get("commit_title") or default_title)
        rest = str(body.get("commit_message") or default_message)
        return f"{head}\n\n{rest}" if rest else head

    def _create_status(self, call: _Request, sha: str) -> httpx.Response:
        body = call.body or {}
        if len(str(body.get("description", ""))) > 140:
            return self._error(
                422, "Validation Failed: description is too long (maximum is 140 characters)"
            )
        assert call.caller is not None
        self._next_id += 1
        data: dict[str, Any] = example("repos-create-commit-status.json")
        data.update(
            id=self._next_id,
            node_id=f"SC_{self._next_id}",
            url=self._api(f"{self._repo_path()}/statuses/{sha}"),
            state=body.get("state"),
            description=body.get("description"),
            target_url=body.get("target_url"),
            context=body.get("context", "default"),
            created_at=self.clock.iso(),
            updated_at=self.clock.iso(),
            creator=self.user_json(call.caller),
        )
        self.statuses.setdefault(sha, []).append(data)
        return self._json(201, data)

    def _combined_status(self, call: _Request, ref: str) -> httpx.Response:
        sha = self.branches.get(ref, ref)
        latest: dict[str, dict[str, Any]] = {}
        for status in self.statuses.get(sha, []):
            latest[status["context"]] = {k: v for k, v in status.items() if k != "creator"}
        statuses = sorted(latest.values(), key=lambda s: s["id"], reverse=True)
        states = {s["state"] for s in statuses}
        overall = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if states - {"success"} or not states
            else "success"
        )
        per_page, page = self._paging(call)
        data: dict[str, Any] = example("repos-get-combined-status-for-ref.json")
        data.update(
            state=overall,
            statuses=statuses[(page - 1) * per_page : page * per_page],
            sha=sha,
            total_count=len(statuses),
            commit_url=self._api(f"{self._repo_path()}/commits/{sha}"),
            url=self._api(f"{self._repo_path()}/commits/{sha}/status"),
        )
        return self._json(200, data)

    def _list_check_runs(self, call: _Request, ref: str) -> httpx.Response:
        """The newest run per name (`filter=latest`, GitHub's default), paged; total_count
        counts them all."""
        sha = self.branches.get(ref, ref)
        runs = self.check_runs.get(sha, [])
        if call.query.get("filter", "latest") == "latest":
            newest: dict[str, dict[str, Any]] = {}
            for run in runs:
                newest[run["name"]] = run
            runs = list(newest.values())
        runs = sorted(runs, key=lambda r: r["id"], reverse=True)
        per_page, page = self._paging(call)
        chunk = runs[(page - 1) * per_page : page * per_page]
        url = self._api(f"{self._repo_path()}/commits/{ref}/check-runs")
        link = self._link(url, per_page, page, len(runs))
        extra = {"link": link} if link else {}
        return self._json(200, {"total_count": len(runs), "check_runs": chunk}, extra)

    def _required_status_checks(self, call: _Request, branch: str) -> httpx.Response:
        """No corpus example: the documented fields (`strict`, `contexts`, `checks`)."""
        if branch not in self.protection:
            return self._error(404, "Branch not protected")
        contexts = self.protection[branch]
        url = self._api(f"{self._repo_path()}/branches/{branch}/protection/required_status_checks")
        return self._json(
            200,
            {
                "url": url,
                "strict": True,
                "contexts": contexts,
                "checks": [{"context": c, "app_id": None} for c in contexts],
                "contexts_url": f"{url}/contexts",
            },
        )


def _instant(text: str) -> datetime | None:
    """An ISO 8601 time as GitHub reads a `since` (`Z` or an offset); None when it is none."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
