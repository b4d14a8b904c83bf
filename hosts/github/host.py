"""`GitHubHost`: the `Host` protocol over githubkit, translating and nothing more.

    GitHubHost("owner/name", GitHubCredentials.token(pat))
    GitHubHost("owner/name", GitHubCredentials.actions(github_token))
    GitHubHost("owner/name", GitHubCredentials.app(app_id, pem, installation_id))
    base_url="https://ghe.example.com/api/v3"                      GitHub Enterprise Server

Cards are issues, targets (card or pull) are issue numbers, comments are issue comments, the
review status is the commit status `pair-review` on the exact head SHA, state labels are issue
labels, merges are pinned with `sha=`. Comment upserts and state labels are the shared
algorithms of `hosts.adapter.HostAdapter`; this class gives them single requests.

How calls behave: every request goes through `hosts.calls.Calls` (reads retried a bounded number
of times, mutations one at a time, spaced `write_spacing_s` apart and never retried; a create
that may have been stored is reconciled by reading: the head branch, the title, and for a
comment its marker, by the shared upsert) and
through the edge transport of `hosts.github.transport` (no request inside a known rate-limit
window; conditional reads, so an idempotent publication costs 304s and no writes). githubkit
itself is configured in `hosts.github.client`, its errors translated in
`hosts.github.translate`. A 401 drops the installation token, mints once and repeats once;
never a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import httpx
from githubkit import GitHub

from hosts.adapter import HostAdapter, Labels
from hosts.base import Reaction
from hosts.calls import Calls, RateWindow
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
)
from hosts.github import payloads
from hosts.github import push as github_push
from hosts.github.auth import (
    AppInstallation,
    Credentials,
    MintedToken,
    StaticToken,
    parse_expiry,
)
from hosts.github.client import BearerStrategy, make_client
from hosts.github.credentials import GitHubCredentials, GitHubOptions
from hosts.github.translate import BadCredentials, Translator
from hosts.github.transport import EdgeTransport
from hosts.labels import LabelPlan
from hosts.markers import same_text
from hosts.models import (
    REVIEW_CONTEXT,
    Author,
    Card,
    Comment,
    HeadCheck,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    ReviewState,
    ReviewStatus,
    Target,
)
from hosts.secrets import Secrets

log = logging.getLogger(__name__)

T = TypeVar("T")

GITHUB_API = "https://api.github.com"
# The REST version GitHub Enterprise Server understands; github.com takes githubkit's newer one.
GHES_API_VERSION = "2022-11-28"
# The Actions GITHUB_TOKEN cannot call GET /user; what it acts as is this documented bot user.
ACTIONS_BOT = Author(login="github-actions[bot]", id="41898282", is_bot=True)
STATUS_DESCRIPTION_MAX = 140  # GitHub truncates nothing: it refuses longer descriptions
PAGE = 100
_PERMISSIONS: frozenset[str] = frozenset({"admin", "maintain", "write", "triage", "read", "none"})
_COMMENT_REF = re.compile(r"(?:#issuecomment-|/issues/comments/)(\d+)$|^(\d+)$")
_READY_FOR_REVIEW = (
    "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) "
    "{ pullRequest { isDraft } } }"
)


def _bind_page(page_of: Callable[[int], Awaitable[Any]], page: int) -> Callable[[], Awaitable[Any]]:
    return lambda: page_of(page)


def _app_login(run: dict[str, Any]) -> str:
    """The bot login of the App that reported a check run (`<slug>[bot]`)."""
    app = run.get("app")
    slug = app.get("slug") if isinstance(app, dict) else None
    return f"{slug}[bot]" if isinstance(slug, str) and slug else ""


def _server_url(base_url: str) -> str:
    """The web/git server behind an API base URL (api.github.com → github.com)."""
    parts = urlsplit(base_url.rstrip("/"))
    if parts.netloc == "api.github.com":
        return "https://github.com"
    path = re.sub(r"/api/v3$", "", parts.path)
    return f"{parts.scheme}://{parts.netloc}{path}"


class GitHubHost(HostAdapter):
    """`Host` on GitHub or GitHub Enterprise Server, through githubkit.

    `credentials` says who it acts as (`GitHubCredentials.app/.token/.actions`); `base_url` is
    `https://api.github.com` or a GHES `https://<host>/api/v3` (which also selects the REST
    version GHES speaks, unless `options.api_version` says otherwise); `options` holds the
    limits (`GitHubOptions`). Seams, with production defaults: `transport` (an
    `httpx.AsyncBaseTransport`; tests inject an `httpx.MockTransport` or respx), `clock` and
    `sleep` (rate-limit windows, token lifetimes, write spacing and backoff all use them).

    One instance belongs to one event loop (its locks and connection pool do); `aclose()` it, or
    use it as an async context manager.
    """

    name = "github"

    def __init__(
        self,
        repo: str,
        credentials: GitHubCredentials,
        *,
        base_url: str = GITHUB_API,
        options: GitHubOptions | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__()
        owner, _, name = repo.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repo must be 'owner/name', not {repo!r}")
        opts = options or GitHubOptions()
        self.repo = repo
        self.credentials = credentials
        self._owner, self._name = owner, name
        self.base_url = base_url.rstrip("/")
        self._git = opts.git
        self._push_timeout_s = opts.push_timeout_s
        self._remote_url = opts.remote_url or f"{_server_url(self.base_url)}/{owner}/{name}.git"
        self._secrets = Secrets()
        window = RateWindow(clock)
        api_version = opts.api_version
        if api_version is None and urlsplit(self.base_url).netloc != "api.github.com":
            api_version = GHES_API_VERSION
        inner = transport or httpx.AsyncHTTPTransport(proxy=opts.proxy, retries=0)
        self._edge = EdgeTransport(inner, window, api_version=api_version)
        self._calls = Calls(
            host="GitHub",
            translate=Translator(window, self._secrets, clock),
            window=window,
            clock=clock,
            sleep=sleep,
            secrets=self._secrets,
            max_wait_s=opts.max_wait_s,
            read_attempts=opts.read_attempts,
            write_spacing_s=opts.write_spacing_s,
            timeout_s=2 * opts.timeout_s,
            recover=self._recover,
        )
        self._timeout_s = opts.timeout_s
        self._status_lock = asyncio.Lock()  # one pair-review write at a time
        self._sleep = sleep
        self._identity_lock = asyncio.Lock()
        self._me: Author | None = ACTIONS_BOT if credentials.kind == "actions" else None

        self._creds: Credentials
        self._app: AppInstallation | None = None
        if credentials.kind == "app":
            self._app = AppInstallation(
                credentials.app_id,
                credentials.secret.reveal(),
                credentials.installation_id,
                secrets=self._secrets,
                clock=clock,
                refresh_margin_s=opts.token_refresh_margin_s,
            )
            self._app.bind(self._mint)
            self._creds = self._app
        else:
            self._creds = StaticToken(credentials.secret.reveal(), self._secrets)
        self._gh = self._client(self._creds.token)
        self._app_gh = self._client(self._app.app_bearer) if self._app is not None else None

    def _client(self, source: Callable[[], Awaitable[str]]) -> GitHub[BearerStrategy]:
        return make_client(
            source, base_url=self.base_url, timeout_s=self._timeout_s, transport=self._edge
        )

    def __repr__(self) -> str:
        return (
            f"GitHubHost(repo={self.repo!r}, base_url={self.base_url!r}, "
            f"auth={self.credentials.describe()!r})"
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._edge.close_inner()

    async def __aenter__(self) -> GitHubHost:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- the call discipline (hosts.calls) -------------------------------------------------

    def _recover(self, error: HostError, again: bool) -> HostError | None:
        """A refused installation token is dropped and minted once; otherwise `error`."""
        if not isinstance(error, BadCredentials):
            return error
        if not again and self._creds.invalidate(error.bearer):
            log.warning("GitHub refused the installation token; minting once")
            return None
        return Forbidden(str(error))

    async def _read(self, op: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self._calls.read(op, fn)

    async def _write(self, op: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self._calls.write(op, fn)

    def _fail(self, kind: type[HostError], message: str) -> HostError:
        return self._calls.fail(kind, message)

    async def _mint(self) -> MintedToken:
        """POST /app/installations/{id}/access_tokens with the app's JWT."""
        app, client = self._app, self._app_gh
        if app is None or client is None:
            raise RuntimeError("minting needs GitHub App credentials")
        op = f"mint an installation token for installation {app.installation_id}"
        try:
            async with asyncio.timeout(2 * self._timeout_s):
                response = await client.rest.apps.async_create_installation_access_token(
                    app.installation_id
                )
        except Exception as exc:
            error = self._calls.translate(op, exc)
            if error is None:
                raise
            if isinstance(error, BadCredentials):  # the JWT itself was refused: no re-mint
                error = Forbidden(str(error))
            raise error from None
        data = payloads.obj(response)
        token = payloads.text(data.get("token"))
        try:
            expires_at = parse_expiry(payloads.text(data.get("expires_at")))
        except ValueError:
            raise HostError(f"{op}: GitHub answered no usable expires_at") from None
        if not token:
            raise HostError(f"{op}: GitHub answered no token")
        return MintedToken(value=token, expires_at=expires_at)

    # -- identity --------------------------------------------------------------------------

    async def identity(self) -> Author:
        """The App's bot user (`<slug>[bot]`), or the token's user; looked up once."""
        if self._me is None:
            async with self._identity_lock:
                if self._me is None:
                    self._me = await self._lookup_identity()
        return self._me

    async def _lookup_identity(self) -> Author:
        if self._app_gh is not None:
            app_client = self._app_gh
            app = payloads.obj(
                await self._read("identity", app_client.rest.apps.async_get_authenticated)
            )
            slug = payloads.text(app.get("slug"))
            if not slug:
                raise HostError("identity: GitHub answered GET /app without a slug")
            login = f"{slug}[bot]"
            user = payloads.obj(
                await self._read(
                    "identity", lambda: self._gh.rest.users.async_get_by_username(login)
                )
            )
            return Author(login=login, id=str(user.get("id", "")), is_bot=True)
        try:
            response = await self._read("identity", self._gh.rest.users.async_get_authenticated)
        except Forbidden as error:
            if "not accessible by integration" in str(error).lower():
                return ACTIONS_BOT  # the Actions GITHUB_TOKEN
            raise
        return payloads.author(payloads.obj(response))

    # -- cards -----------------------------------------------------------------------------

    async def _issue(self, number: int) -> dict[str, Any]:
        response = await self._read(
            f"read #{number}",
            lambda: self._gh.rest.issues.async_get(self._owner, self._name, number),
        )
        return payloads.obj(response)

    async def get_card(self, number: int) -> Card:
        return payloads.card(await self._issue(number))

    async def create_card(self, title: str, body: str, labels: tuple[str, ...] = ()) -> Card:
        op = "create a card"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.issues.async_create(
                    self._owner,
                    self._name,
                    data={"title": title, "body": body, "labels": list(labels)},
                ),
            )
        except HostUnavailable:
            found = await self._calls.settle(op, lambda: self._find_created_card(title, body))
            if found is None:
                raise
            log.warning("%s: GitHub failed after storing #%s; using it", op, found.number)
            return found
        return payloads.card(payloads.obj(response))

    async def _find_created_card(self, title: str, body: str) -> Card | None:
        me = await self.identity()
        response = await self._read(
            "find a created card",
            lambda: self._gh.rest.issues.async_list_for_repo(
                self._owner, self._name, state="all", sort="created", direction="desc", per_page=30
            ),
        )
        for data in payloads.objs(response):
            card = payloads.card(data)
            mine = payloads.author(data.get("user")).id == me.id
            if mine and card.title == title and same_text(card.body, body):
                return card
        return None

    async def update_card(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> Card:
        fields: dict[str, str] = {}
        if title is not None:
            fields["title"] = title
        if body is not None:
            fields["body"] = body
        if not fields:
            return await self.get_card(number)
        response = await self._write(
            f"update #{number}",
            lambda: self._gh.rest.issues.async_update(
                self._owner, self._name, number, data=cast(Any, fields)
            ),
        )
        return payloads.card(payloads.obj(response))

    async def close(self, target: Target) -> None:
        op = f"close {target.kind} #{target.number}"
        if target.kind == "pull":
            await self._write(
                op,
                lambda: self._gh.rest.pulls.async_update(
                    self._owner, self._name, target.number, data={"state": "closed"}
                ),
            )
        else:
            await self._write(
                op,
                lambda: self._gh.rest.issues.async_update(
                    self._owner, self._name, target.number, data={"state": "closed"}
                ),
            )

    # -- comments --------------------------------------------------------------------------

    async def list_comments(self, target: Target) -> list[Comment]:
        """Every comment, read `PAGE` at a time; a full page always asks for the next one.

        Why the body and not the `Link` header decides where the list ends: every page is a
        conditional GET (`hosts.github.transport`), and a 304 is answered with the headers the
        page was stored with. Page 1 stored while it was the last page has no `rel="next"`, and
        it stays byte-identical (so 304) when comments 101 and 102 arrive on page 2: its `Link`
        would hide them, and every upsert of a marker living there would post it again. What a
        304 does certify is the body, and issue comments are fixed slices of `per_page` in
        ascending id (https://docs.github.com/en/rest/issues/comments#list-issue-comments): a
        page shorter than `PAGE` is the last one, a full page may have a successor. So the next
        page is read whenever this one is full (or a `Link` says there is one), and the list
        ends at the first short or empty page. Every page stays conditional, so an unchanged
        listing costs 304s, which GitHub does not count against the rate limit
        (https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate);
        the price is one extra read (an empty page, then a free 304) when the count is an exact
        multiple of `PAGE`. Bypassing the cache after page 1, or re-reading the last page
        unconditionally, would pay a counted request on every listing instead.
        (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api)
        """
        comments: list[Comment] = []
        page = 1
        while True:
            response = await self._read(
                f"list comments on #{target.number}", self._comments_page(target.number, page)
            )
            items = payloads.objs(response)
            comments.extend(payloads.comment(item) for item in items)
            more = len(items) >= PAGE or "next" in response.raw_response.links
            if not items or not more:
                return comments
            page += 1

    def _comments_page(self, number: int, page: int) -> Callable[[], Awaitable[Any]]:
        return lambda: self._gh.rest.issues.async_list_comments(
            self._owner, self._name, number, per_page=PAGE, page=page
        )

    async def _post_comment(self, target: Target, text: str) -> str:
        response = await self._write(
            f"comment on #{target.number}",
            lambda: self._gh.rest.issues.async_create_comment(
                self._owner, self._name, target.number, body=text
            ),
        )
        return str(payloads.obj(response).get("id", ""))

    async def _edit_comment(self, target: Target, comment_id: str, text: str) -> None:
        number = self._comment_number(comment_id)
        await self._write(
            f"edit comment {comment_id}",
            lambda: self._gh.rest.issues.async_update_comment(
                self._owner, self._name, number, body=text
            ),
        )

    # The read-back (`_fetch_comment`) is the base's: the same list the next upsert reads,
    # which also warms its ETag.

    async def _settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        return await self._calls.settle(op, find)

    async def _pause(self, seconds: float) -> None:
        await self._sleep(seconds)

    @staticmethod
    def _comment_number(comment_id: str) -> int:
        if not comment_id.isdigit():
            raise NotFound(f"{comment_id!r} is not a GitHub comment id")
        return int(comment_id)

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        if comment_id is None:
            await self._write(
                f"react to #{target.number}",
                lambda: self._gh.rest.reactions.async_create_for_issue(
                    self._owner, self._name, target.number, data={"content": reaction}
                ),
            )
            return
        number = self._comment_number(comment_id)
        await self._write(
            f"react to comment {comment_id}",
            lambda: self._gh.rest.reactions.async_create_for_issue_comment(
                self._owner, self._name, number, data={"content": reaction}
            ),
        )

    async def read_scope_decision(
        self, pull: int, comment_ref: str | None = None
    ) -> Comment | None:
        if comment_ref is None:
            # Discovery is the rule every adapter shares (pairbot's own packet is skipped).
            return await super().read_scope_decision(pull)
        match = _COMMENT_REF.search(comment_ref.strip())
        if match is None:
            raise NotFound(f"{comment_ref!r} does not name a GitHub comment")
        number = int(match.group(1) or match.group(2))
        response = await self._read(
            f"read comment {number}",
            lambda: self._gh.rest.issues.async_get_comment(self._owner, self._name, number),
        )
        data = payloads.obj(response)
        if not payloads.text(data.get("issue_url")).endswith(f"/issues/{pull}"):
            raise NotFound(f"comment {number} is not on PR #{pull}")
        return payloads.comment(data)

    # -- people ----------------------------------------------------------------------------

    async def permission(self, user: str) -> Permission:
        try:
            response = await self._read(
                f"permission of {user}",
                lambda: self._gh.rest.repos.async_get_collaborator_permission_level(
                    self._owner, self._name, user
                ),
            )
        except NotFound:
            return "none"  # no such user (or not visible): never a reason to act
        data = payloads.obj(response)
        role = payloads.text(data.get("role_name"))
        level = role if role in _PERMISSIONS else payloads.text(data.get("permission"))
        return cast(Permission, level if level in _PERMISSIONS else "none")

    # -- code ------------------------------------------------------------------------------

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        token = await self._creds.token()
        return await github_push.push(
            git=self._git,
            repo_dir=repo_dir,
            remote_url=self._remote_url,
            branch=branch,
            token=token,
            force=force,
            timeout_s=self._push_timeout_s,
            scrub=self._secrets.scrub,
        )

    async def _open_pull_for(self, head: str) -> Pull | None:
        response = await self._read(
            f"find the pull for {head}",
            lambda: self._gh.rest.pulls.async_list(
                self._owner, self._name, head=f"{self._owner}:{head}", state="open"
            ),
        )
        pulls = [payloads.pull(item) for item in payloads.objs(response)]
        return pulls[0] if pulls else None

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        existing = await self._open_pull_for(head)
        if existing is not None:
            return existing
        op = f"open a pull for {head}"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.pulls.async_create(
                    self._owner,
                    self._name,
                    data={"title": title, "head": head, "base": base, "body": body, "draft": draft},
                ),
            )
        except (HostUnavailable, Conflict):
            # Stored before a 5xx, or opened meanwhile ("A pull request already exists").
            found = await self._calls.settle(op, lambda: self._open_pull_for(head))
            if found is None:
                raise
            return found
        return payloads.pull(payloads.obj(response))

    async def _pull_data(self, number: int) -> dict[str, Any]:
        response = await self._read(
            f"read PR #{number}",
            lambda: self._gh.rest.pulls.async_get(self._owner, self._name, number),
        )
        return payloads.obj(response)

    async def get_pull(self, number: int) -> Pull:
        return payloads.pull(await self._pull_data(number))

    # -- review status ---------------------------------------------------------------------

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        response = await self._read(
            f"read the status of {head_sha[:12]}",
            lambda: self._gh.rest.repos.async_get_combined_status_for_ref(
                self._owner, self._name, head_sha, per_page=PAGE
            ),
        )
        for status in payloads.obj(response).get("statuses") or ():
            if isinstance(status, dict) and status.get("context") == REVIEW_CONTEXT:
                return ReviewStatus(
                    head_sha=head_sha,
                    state=cast(ReviewState, status.get("state")),
                    description=payloads.text(status.get("description")),
                )
        return None

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        description = description[:STATUS_DESCRIPTION_MAX]
        wanted = ReviewStatus(head_sha=head_sha, state=state, description=description)
        async with self._status_lock:
            if await self.get_review_status(pull, head_sha) == wanted:
                return wanted
            await self._write(
                f"set {REVIEW_CONTEXT} on {head_sha[:12]}",
                lambda: self._gh.rest.repos.async_create_commit_status(
                    self._owner,
                    self._name,
                    head_sha,
                    data={"state": state, "description": description, "context": REVIEW_CONTEXT},
                ),
            )
            stored = await self.get_review_status(pull, head_sha)
        if stored != wanted:
            raise self._fail(Conflict, f"{REVIEW_CONTEXT} on {head_sha[:12]} reads back {stored}")
        return wanted

    # -- outside evidence ------------------------------------------------------------------

    async def head_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """Check runs and commit statuses on `head_sha`, `pair-review` and this App's own
        check runs left out; `required` from the base branch's protection.

        Both lists are paged by their body's `total_count`, never by a `Link` header: every
        read is conditional, and a page replayed from the cache (a 304) keeps the `Link` it
        was stored with, which can hide a page that appeared since.
        """
        base = (await self.get_pull(pull)).base_branch
        required = await self._required_checks(base)
        mine = await self._own_app_login()
        try:
            runs = await self._paged(
                f"list check runs on {head_sha[:12]}",
                "check_runs",
                lambda page: self._gh.rest.checks.async_list_for_ref(
                    self._owner, self._name, head_sha, filter_="latest", per_page=PAGE, page=page
                ),
            )
        except Forbidden:
            # A token without `checks: read` (an Actions workflow or an App installed before
            # pairbot asked for it): the statuses still count, and the operator is told.
            log.warning(
                "cannot read check runs on %s (grant checks: read); reading commit statuses only",
                self.repo,
            )
            runs = []
        statuses = await self._paged(
            f"list statuses on {head_sha[:12]}",
            "statuses",
            lambda page: self._gh.rest.repos.async_get_combined_status_for_ref(
                self._owner, self._name, head_sha, per_page=PAGE, page=page
            ),
        )
        checks = [
            payloads.check_run(run, required)
            for run in runs
            if mine is None or _app_login(run) != mine
        ]
        checks += [
            payloads.commit_status(status, required)
            for status in statuses
            if status.get("context") != REVIEW_CONTEXT
        ]
        return checks

    async def _own_app_login(self) -> str | None:
        """The App's bot login when pairbot acts as an App (its check runs are its own);
        None otherwise: a token's or the Actions bot's identity also runs others' CI."""
        return (await self.identity()).login if self._app is not None else None

    async def _required_checks(self, branch: str) -> frozenset[str]:
        """What `branch`'s protection requires; none known without protection (404) or
        without the right to read it (403)."""
        try:
            response = await self._read(
                f"read the required checks of {branch}",
                lambda: self._gh.rest.repos.async_get_status_checks_protection(
                    self._owner, self._name, branch
                ),
            )
        except (NotFound, Forbidden):
            return frozenset()
        return payloads.required_checks(payloads.obj(response))

    async def _paged(
        self, op: str, key: str, page_of: Callable[[int], Awaitable[Any]]
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            data = payloads.obj(await self._read(op, _bind_page(page_of, page)))
            chunk = [item for item in data.get(key) or () if isinstance(item, dict)]
            items.extend(chunk)
            total = data.get("total_count")
            if not chunk or not isinstance(total, int) or len(items) >= total:
                return items
            page += 1

    # -- state labels ----------------------------------------------------------------------

    async def _read_labels(self, target: Target) -> Labels:
        return Labels(payloads.labels(await self._issue(target.number)))

    async def _write_labels(self, target: Target, current: Labels, plan: LabelPlan) -> None:
        number = target.number
        for label in plan.remove:  # first: never two state labels at once
            with contextlib.suppress(NotFound):  # removed meanwhile: the goal holds
                await self._write(f"unlabel #{number}", self._remove_label(number, label))
        if plan.add:
            await self._write(
                f"label #{number}",
                lambda: self._gh.rest.issues.async_add_labels(
                    self._owner, self._name, number, data={"labels": list(plan.add)}
                ),
            )

    def _remove_label(self, number: int, label: str) -> Callable[[], Awaitable[Any]]:
        return lambda: self._gh.rest.issues.async_remove_label(
            self._owner, self._name, number, label
        )

    # -- merge -----------------------------------------------------------------------------

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        data = await self._pull_data(pull)
        current = payloads.pull(data)
        if current.merged and current.head_sha == head_sha:
            return MergeResult(merged=True, sha=payloads.text(data.get("merge_commit_sha")) or None)
        if current.state != "open":
            raise Conflict(f"merge PR #{pull}: it is {current.state}")
        if current.head_sha != head_sha:
            raise Conflict(
                f"merge PR #{pull}: the head moved from the reviewed {head_sha[:12]} "
                f"to {current.head_sha[:12]}"
            )
        if current.draft:
            await self._mark_ready(pull, payloads.text(data.get("node_id")))
        op = f"merge PR #{pull}"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.pulls.async_merge(
                    self._owner,
                    self._name,
                    pull,
                    data={"sha": head_sha, "merge_method": method},
                ),
            )
        except HostUnavailable:
            after = await self._pull_data(pull)  # merged before the 5xx?
            if not payloads.pull(after).merged:
                raise
            return MergeResult(
                merged=True, sha=payloads.text(after.get("merge_commit_sha")) or None
            )
        result = payloads.obj(response)
        return MergeResult(
            merged=bool(result.get("merged")), sha=payloads.text(result.get("sha")) or None
        )

    async def _mark_ready(self, pull: int, node_id: str) -> None:
        """Draft → ready: REST cannot, GraphQL `markPullRequestReadyForReview` can."""
        await self._write(
            f"mark PR #{pull} ready for review",
            lambda: self._gh.async_graphql(_READY_FOR_REVIEW, {"id": node_id}),
        )
