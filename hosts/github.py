"""The GitHub host adapter: the `Host` protocol over githubkit, translating and nothing more.

    GitHubHost(repo="owner/name", token=...)                       a PAT or the Actions token
    GitHubHost(repo=..., app_id=..., private_key=..., installation_id=...)   a GitHub App
    base_url="https://ghe.example.com/api/v3"                      GitHub Enterprise Server

Cards are issues, targets (card or pull) are issue numbers, comments are issue comments, the
review status is the commit status `pair-review` on the exact head SHA, state labels are issue
labels, merges are pinned with `sha=`.

How calls behave (all of it here, nothing left to githubkit's defaults):

- Every request has a timeout (`timeout_s` per phase, twice that per attempt end to end).
- githubkit's auto-retry is off: it would retry a POST on a 5xx and post twice. Reads retry a
  bounded number of times on 5xx, timeouts and short rate-limit windows, with backoff through
  the injectable `sleep`. Mutations are never retried: a create that may have been stored is
  reconciled by reading (the marker, the head branch, the title), never re-posted blindly.
- Mutations go one at a time (an `asyncio.Lock`), spaced `write_spacing_s` apart as GitHub asks.
- Rate limits: see `hosts.github_transport` — no request inside a known window; a short window
  is waited out, a long one raises `RateLimited(retry_after)`.
- A 401 drops the installation token, mints once and retries once; never a loop.
- Repeated reads are conditional (ETag → 304, which costs no rate limit), so an idempotent
  publication (same comment, same status, same label) costs conditional reads and no writes.
- Errors become `hosts.errors`; every message is scrubbed of tokens, JWTs and keys, and the
  githubkit exception is not chained (its request object carries the Authorization header).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

import httpx
from githubkit import GitHub
from githubkit.auth.base import BaseAuthStrategy
from githubkit.exception import (
    GraphQLFailed,
    RateLimitExceeded,
    RequestError,
    RequestFailed,
    RequestTimeout,
)

from hosts import github_git
from hosts.base import Reaction
from hosts.cardhash import card_hash as compute_card_hash
from hosts.decisions import scope_decision_in
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
    RateLimited,
)
from hosts.github_auth import (
    DEFAULT_REFRESH_MARGIN_S,
    AppInstallation,
    Credentials,
    MintedToken,
    Secrets,
    StaticToken,
    parse_expiry,
)
from hosts.github_transport import EdgeTransport, RateGate, retry_after_seconds
from hosts.labels import PrState, plan_state_labels
from hosts.markers import owned_comments, plan_upsert, same_text
from hosts.models import (
    REVIEW_CONTEXT,
    Author,
    Card,
    Comment,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    ReviewState,
    ReviewStatus,
    Target,
    Upserted,
    UpsertResult,
)

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


class _BadCredentials(Forbidden):
    """A 401: the credential was refused. Internal — it leaves as `Forbidden`."""

    def __init__(self, message: str, bearer: str) -> None:
        super().__init__(message)
        self._bearer = bearer  # the refused token, to drop exactly it; never shown


class _BearerAuth(httpx.Auth):
    """Sets `Authorization: Bearer <token>` from an async source on every request."""

    def __init__(self, source: Callable[[], Awaitable[str]]) -> None:
        self._source = source

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {await self._source()}"
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(***)"


class _Strategy(BaseAuthStrategy):
    """githubkit's hook for `_BearerAuth`."""

    def __init__(self, source: Callable[[], Awaitable[str]]) -> None:
        self._source = source

    def get_auth_flow(self, github: Any) -> httpx.Auth:
        return _BearerAuth(self._source)

    def __repr__(self) -> str:
        return "_Strategy(***)"


def _obj(response: Any) -> dict[str, Any]:
    """The JSON object of a githubkit response (read tolerantly: only the fields used)."""
    data = _json(response)
    if not isinstance(data, dict):
        raise HostError(f"GitHub answered {type(data).__name__} where an object was expected")
    return cast(dict[str, Any], data)


def _objs(response: Any) -> list[dict[str, Any]]:
    """The JSON list of objects of a githubkit response."""
    data = _json(response)
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise HostError(f"GitHub answered {type(data).__name__} where a list was expected")
    return cast(list[dict[str, Any]], data)


def _json(response: Any) -> Any:
    # The raw JSON, not githubkit's `parsed_data`: its models follow the newest API schema and
    # refuse older (GHES) or leaner answers — e.g. a label without `archived_at`.
    try:
        return response.raw_response.json()
    except ValueError:
        raise HostError("GitHub answered a body that is not JSON") from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _author(user: Any) -> Author:
    if not isinstance(user, dict):
        return Author(login="ghost", id="")  # a deleted account
    return Author(
        login=_text(user.get("login")),
        id=str(user.get("id", "")),
        is_bot=user.get("type") == "Bot",
    )


def _labels(data: Mapping[str, Any]) -> tuple[str, ...]:
    names = []
    for label in data.get("labels") or ():
        names.append(label.get("name", "") if isinstance(label, dict) else str(label))
    return tuple(name for name in names if name)


def _logins(data: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(_author(user).login for user in data.get("assignees") or ())


def _comment(data: Mapping[str, Any]) -> Comment:
    return Comment(
        id=str(data.get("id", "")),
        body=_text(data.get("body")),
        author=_author(data.get("user")),
        created_at=_text(data.get("created_at")),
        url=_text(data.get("html_url")),
    )


def _card(data: Mapping[str, Any]) -> Card:
    return Card(
        number=int(data["number"]),
        title=_text(data.get("title")),
        body=_text(data.get("body")),
        labels=_labels(data),
        assignees=_logins(data),
        state="closed" if data.get("state") == "closed" else "open",
        url=_text(data.get("html_url")),
    )


def _pull(data: Mapping[str, Any]) -> Pull:
    head = data.get("head") or {}
    base = data.get("base") or {}
    merged = bool(data.get("merged")) or bool(data.get("merged_at"))
    state: Literal["open", "closed", "merged"] = (
        "merged" if merged else "closed" if data.get("state") == "closed" else "open"
    )
    mergeable = data.get("mergeable")
    return Pull(
        number=int(data["number"]),
        head_branch=_text(head.get("ref")),
        head_sha=_text(head.get("sha")),
        base_branch=_text(base.get("ref")),
        state=state,
        draft=bool(data.get("draft")),
        mergeable=mergeable if isinstance(mergeable, bool) else None,
        title=_text(data.get("title")),
        body=_text(data.get("body")),
        url=_text(data.get("html_url")),
        labels=_labels(data),
        assignees=_logins(data),
    )


def _server_url(base_url: str) -> str:
    """The web/git server behind an API base URL (api.github.com → github.com)."""
    parts = urlsplit(base_url.rstrip("/"))
    if parts.netloc == "api.github.com":
        return "https://github.com"
    path = re.sub(r"/api/v3$", "", parts.path)
    return f"{parts.scheme}://{parts.netloc}{path}"


class GitHubHost:
    """`Host` on GitHub or GitHub Enterprise Server, through githubkit.

    Credentials: `token=` (a PAT or the Actions `GITHUB_TOKEN`), or `app_id=`, `private_key=`
    (PEM) and `installation_id=`. `base_url` is `https://api.github.com` or a GHES
    `https://<host>/api/v3` (which also selects the REST version GHES speaks, unless
    `api_version=` says otherwise).

    Seams, all with production defaults: `transport` (an `httpx.AsyncBaseTransport`; tests inject
    an `httpx.MockTransport`), `clock` and `sleep` (rate-limit windows, token lifetimes, write
    spacing and backoff all use them), `remote_url` and `git` (where and with which binary
    `push_branch` pushes). Limits: `timeout_s` per request phase, `max_wait_s` the longest
    rate-limit window waited out before `RateLimited` is raised instead, `read_attempts` per
    read, `write_spacing_s` between mutations, `token_refresh_margin_s` before an installation
    token's expiry, `push_timeout_s` per push. Proxies come from `proxy=`, never from the
    environment (environment proxies would route around the rate-limit gate).

    One instance belongs to one event loop (its locks and connection pool do); `aclose()` it, or
    use it as an async context manager.
    """

    name = "github"

    def __init__(
        self,
        repo: str,
        *,
        token: str | None = None,
        app_id: int | str | None = None,
        private_key: str | bytes | None = None,
        installation_id: int | None = None,
        base_url: str = GITHUB_API,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_wait_s: float = 60.0,
        read_attempts: int = 3,
        write_spacing_s: float = 1.0,
        token_refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S,
        api_version: str | None = None,
        proxy: str | None = None,
        remote_url: str | None = None,
        git: str = "git",
        push_timeout_s: float = 300.0,
        identity: Author | None = None,
    ) -> None:
        """`identity`: who the credentials act as, when the caller knows it (the Actions
        GITHUB_TOKEN is `ACTIONS_BOT`): then `identity()` asks GitHub nothing."""
        owner, _, name = repo.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repo must be 'owner/name', not {repo!r}")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive: a call without a timeout can hang")
        self.repo = repo
        self._owner, self._name = owner, name
        self.base_url = base_url.rstrip("/")
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep
        self._max_wait_s = max_wait_s
        self._read_attempts = max(1, read_attempts)
        self._write_spacing_s = write_spacing_s
        self._git = git
        self._push_timeout_s = push_timeout_s
        self._remote_url = remote_url or f"{_server_url(self.base_url)}/{owner}/{name}.git"
        self._secrets = Secrets()
        self._gate = RateGate(clock)
        if api_version is None and urlsplit(self.base_url).netloc != "api.github.com":
            api_version = GHES_API_VERSION
        inner = transport or httpx.AsyncHTTPTransport(proxy=proxy, retries=0)
        self._edge = EdgeTransport(inner, self._gate, api_version=api_version)
        self._write_lock = asyncio.Lock()
        self._publish_lock = asyncio.Lock()
        self._identity_lock = asyncio.Lock()
        self._last_write = float("-inf")
        self._me: Author | None = identity

        self._creds: Credentials
        self._app: AppInstallation | None = None
        if token is not None:
            if app_id is not None or private_key is not None or installation_id is not None:
                raise ValueError("give either token= or app_id=/private_key=/installation_id=")
            self._creds = StaticToken(token, self._secrets)
        else:
            if app_id is None or private_key is None or installation_id is None:
                raise ValueError(
                    "GitHub needs token=, or all of app_id=, private_key=, installation_id="
                )
            self._app = AppInstallation(
                app_id,
                private_key,
                installation_id,
                secrets=self._secrets,
                clock=clock,
                refresh_margin_s=token_refresh_margin_s,
            )
            self._app.bind(self._mint)
            self._creds = self._app
        self._gh = self._client(self._creds.token)
        self._app_gh = self._client(self._app.app_bearer) if self._app is not None else None

    def _client(self, source: Callable[[], Awaitable[str]]) -> GitHub[_Strategy]:
        return GitHub(
            _Strategy(source),
            base_url=self.base_url,
            user_agent="pairbot",
            timeout=httpx.Timeout(self._timeout_s),
            async_transport=self._edge,
            trust_env=False,  # env proxies would mount transports that bypass the edge
            http_cache=False,  # conditional reads live in the edge (see github_transport)
            auto_retry=False,  # see the module docstring: reads retry here, writes never
        )

    def __repr__(self) -> str:
        auth = (
            f"app {self._app.app_id} installation {self._app.installation_id}"
            if self._app is not None
            else "token"
        )
        return f"GitHubHost(repo={self.repo!r}, base_url={self.base_url!r}, auth={auth!r})"

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._edge.close_inner()

    async def __aenter__(self) -> GitHubHost:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- the call discipline -------------------------------------------------------------

    async def _await_window(self, op: str) -> None:
        """Wait out a short known rate-limit window; refuse to wait a long one."""
        while (wait := self._gate.remaining()) > 0:
            if wait > self._max_wait_s:
                raise RateLimited(
                    f"{op}: GitHub rate limit ({self._gate.reason}): {wait:.0f}s left, more "
                    f"than the {self._max_wait_s:.0f}s pairbot waits; try again later",
                    retry_after=wait,
                )
            log.warning(
                "%s: waiting %.1fs for GitHub's rate limit (%s)", op, wait, self._gate.reason
            )
            await self._sleep(wait)

    async def _call(self, op: str, fn: Callable[[], Awaitable[T]], *, write: bool) -> T:
        reminted = False
        attempt = 0
        while True:
            attempt += 1
            await self._await_window(op)
            try:
                async with asyncio.timeout(2 * self._timeout_s):
                    return await fn()
            except Exception as exc:
                error = self._translate(op, exc)
                if error is None:
                    raise
            if isinstance(error, _BadCredentials):
                if not reminted and self._creds.invalidate(error._bearer):
                    reminted = True
                    log.warning("%s: GitHub refused the installation token; minting once", op)
                    continue
                raise Forbidden(str(error)) from None
            retryable = isinstance(error, HostUnavailable) or (
                isinstance(error, RateLimited) and (error.retry_after or 0.0) <= self._max_wait_s
            )
            if write or not retryable or attempt >= self._read_attempts:
                raise error from None
            if isinstance(error, HostUnavailable):
                delay = min(8.0, 0.5 * 2 ** (attempt - 1))
                log.info("%s: %s; retrying in %.1fs", op, error, delay)
                await self._sleep(delay)
            # a RateLimited read loops back to `_await_window`, which waits the window out

    async def _read(self, op: str, fn: Callable[[], Awaitable[T]]) -> T:
        return await self._call(op, fn, write=False)

    async def _write(self, op: str, fn: Callable[[], Awaitable[T]]) -> T:
        async with self._write_lock:
            gap = self._last_write + self._write_spacing_s - self._clock()
            if gap > 0:
                await self._sleep(gap)
            try:
                return await self._call(op, fn, write=True)
            finally:
                self._last_write = self._clock()

    def _fail(self, kind: type[HostError], message: str) -> HostError:
        return kind(self._secrets.scrub(message))

    def _translate(self, op: str, exc: Exception) -> HostError | None:
        """The `hosts.errors` form of a githubkit/httpx failure (None: not ours, re-raise)."""
        if isinstance(exc, HostError):
            return exc
        if isinstance(exc, TimeoutError):
            return self._fail(HostUnavailable, f"{op}: GitHub did not answer in time")
        if isinstance(exc, RequestFailed):
            return self._translate_status(op, exc)
        if isinstance(exc, RequestTimeout):
            return self._fail(HostUnavailable, f"{op}: GitHub timed out ({type(exc.exc).__name__})")
        if isinstance(exc, RequestError):
            inner = exc.exc
            if isinstance(inner, HostError):
                return inner
            if isinstance(inner, httpx.TimeoutException):
                return self._fail(HostUnavailable, f"{op}: GitHub timed out")
            if isinstance(inner, httpx.TransportError):
                return self._fail(
                    HostUnavailable,
                    f"{op}: could not reach GitHub ({type(inner).__name__}: {inner})",
                )
            return None
        if isinstance(exc, GraphQLFailed):
            errors = exc.response.errors or []
            kinds = {error.type for error in errors}
            text = "; ".join(error.message for error in errors)[:300]
            kind: type[HostError] = (
                NotFound
                if "NOT_FOUND" in kinds
                else Forbidden
                if "FORBIDDEN" in kinds
                else HostError
            )
            return self._fail(kind, f"{op}: GitHub GraphQL refused: {text}")
        return None

    def _translate_status(self, op: str, exc: RequestFailed) -> HostError:
        response = exc.response.raw_response
        status = response.status_code
        message = self._message(response)
        said = f"{op}: GitHub answered {status}" + (f": {message}" if message else "")
        if status in (403, 429) or isinstance(exc, RateLimitExceeded):
            wait = self._rate_limit_wait(status, response.headers, message)
            if wait is None and isinstance(exc, RateLimitExceeded):
                wait = (exc.retry_after.total_seconds(), "GraphQL rate limit")
            if wait is not None:
                seconds, why = wait
                self._gate.block_for(seconds, why)
                return RateLimited(
                    self._secrets.scrub(f"{said} ({why}; retry after {seconds:.0f}s)"),
                    retry_after=seconds,
                )
        if status == 401:
            bearer = response.request.headers.get("authorization", "").partition(" ")[2]
            return _BadCredentials(self._secrets.scrub(said), bearer)
        if status == 403:
            return self._fail(Forbidden, said)
        if status in (404, 410):
            return self._fail(NotFound, said)
        if status in (405, 409, 422):
            return self._fail(Conflict, said)
        if status >= 500:
            return self._fail(HostUnavailable, said)
        return self._fail(HostError, said)

    def _message(self, response: httpx.Response) -> str:
        try:
            data = response.json()
        except ValueError:
            return ""
        if not isinstance(data, dict):
            return ""
        parts = [_text(data.get("message"))]
        for error in data.get("errors") or ():
            if isinstance(error, dict) and error.get("message"):
                parts.append(_text(error.get("message")))
        return self._secrets.scrub("; ".join(part for part in parts if part))[:300]

    def _rate_limit_wait(
        self, status: int, headers: httpx.Headers, message: str
    ) -> tuple[float, str] | None:
        """How long a 403/429 asks to wait, or None when it is not a rate limit.

        In GitHub's documented order: `retry-after`; a spent quota until `x-ratelimit-reset`;
        otherwise a secondary limit, or any 429, waits at least a minute.
        https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately
        """
        now = self._clock()
        if "retry-after" in headers:
            seconds = retry_after_seconds(headers["retry-after"], now)
            if seconds is not None:
                return seconds, "secondary rate limit"
        if headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(headers.get("x-ratelimit-reset", ""))
            except ValueError:
                return 60.0, "primary rate limit"
            return max(0.0, reset - now), "primary rate limit"
        lowered = message.lower()
        if "secondary rate limit" in lowered or "abuse" in lowered or status == 429:
            return 60.0, "secondary rate limit"
        return None

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
            error = self._translate(op, exc)
            if error is None:
                raise
            if isinstance(error, _BadCredentials):  # the JWT itself was refused: no re-mint
                error = Forbidden(str(error))
            raise error from None
        data = _obj(response)
        token = _text(data.get("token"))
        try:
            expires_at = parse_expiry(_text(data.get("expires_at")))
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
            app = _obj(await self._read("identity", app_client.rest.apps.async_get_authenticated))
            slug = _text(app.get("slug"))
            if not slug:
                raise HostError("identity: GitHub answered GET /app without a slug")
            login = f"{slug}[bot]"
            user = _obj(
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
        return _author(_obj(response))

    # -- cards -----------------------------------------------------------------------------

    async def _issue(self, number: int) -> dict[str, Any]:
        response = await self._read(
            f"read #{number}",
            lambda: self._gh.rest.issues.async_get(self._owner, self._name, number),
        )
        return _obj(response)

    async def get_card(self, number: int) -> Card:
        return _card(await self._issue(number))

    async def card_hash(self, number: int) -> str:
        card = await self.get_card(number)
        return compute_card_hash(card.title, card.body)

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
            found = await self._find_created_card(title, body)
            if found is None:
                raise
            log.warning("%s: GitHub failed after storing #%s; using it", op, found.number)
            return found
        return _card(_obj(response))

    async def _find_created_card(self, title: str, body: str) -> Card | None:
        me = await self.identity()
        response = await self._read(
            "find a created card",
            lambda: self._gh.rest.issues.async_list_for_repo(
                self._owner, self._name, state="all", sort="created", direction="desc", per_page=30
            ),
        )
        for data in _objs(response):
            card = _card(data)
            mine = _author(data.get("user")).id == me.id
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
        return _card(_obj(response))

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
        comments: list[Comment] = []
        page = 1
        while True:
            response = await self._read(
                f"list comments on #{target.number}", self._comments_page(target.number, page)
            )
            items = _objs(response)
            comments.extend(_comment(item) for item in items)
            if not items or "next" not in response.raw_response.links:
                return comments
            page += 1

    def _comments_page(self, number: int, page: int) -> Callable[[], Awaitable[Any]]:
        return lambda: self._gh.rest.issues.async_list_comments(
            self._owner, self._name, number, per_page=PAGE, page=page
        )

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        me = await self.identity()
        async with self._publish_lock:  # one publication at a time: no create/create race
            comments = await self.list_comments(target)
            plan = plan_upsert(comments, marker, body, me)
            if plan.action is Upserted.UNCHANGED:
                keeper = next(c for c in comments if c.id == plan.comment_id)
                return UpsertResult(Upserted.UNCHANGED, keeper, plan.duplicates)
            if plan.action is Upserted.CREATED:
                written = await self._create_comment(target, marker, plan.body, me)
                confirmed = await self._read_back(target, written, plan.body)
                return UpsertResult(Upserted.CREATED, confirmed, plan.duplicates)
            keeper_id = plan.comment_id or ""
            try:
                await self._update_comment(keeper_id, plan.body)
            except HostUnavailable as error:
                # The edit may have landed before the failure: it counts if it reads back.
                try:
                    confirmed = await self._read_back(target, keeper_id, plan.body)
                except Conflict:
                    raise error from None
                return UpsertResult(Upserted.UPDATED, confirmed, plan.duplicates)
            confirmed = await self._read_back(target, keeper_id, plan.body)
            return UpsertResult(Upserted.UPDATED, confirmed, plan.duplicates)

    async def _create_comment(self, target: Target, marker: str, text: str, me: Author) -> str:
        op = f"comment on #{target.number}"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.issues.async_create_comment(
                    self._owner, self._name, target.number, body=text
                ),
            )
        except HostUnavailable:
            # GitHub may have stored it before failing: look, never post blindly again.
            again = owned_comments(await self.list_comments(target), marker, me)
            if not again:
                raise
            log.warning("%s: GitHub failed after storing comment %s; keeping it", op, again[0].id)
            return again[0].id
        return str(_obj(response).get("id", ""))

    async def _update_comment(self, comment_id: str, text: str) -> None:
        number = self._comment_number(comment_id)
        await self._write(
            f"edit comment {comment_id}",
            lambda: self._gh.rest.issues.async_update_comment(
                self._owner, self._name, number, body=text
            ),
        )

    async def _read_back(self, target: Target, comment_id: str, wanted: str) -> Comment:
        """Confirm through the same list the next upsert reads (which also warms its ETag)."""
        comments = await self.list_comments(target)
        stored = next((c for c in comments if c.id == comment_id), None)
        if stored is None:
            raise self._fail(
                HostUnavailable, f"comment {comment_id} on #{target.number} is not visible yet"
            )
        if not same_text(stored.body, wanted):
            raise self._fail(
                Conflict, f"comment {comment_id} on #{target.number} reads back different text"
            )
        return stored

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
            me = await self.identity()
            comments = await self.list_comments(Target("pull", pull))
            return scope_decision_in(comments, None, identity=me)
        match = _COMMENT_REF.search(comment_ref.strip())
        if match is None:
            raise NotFound(f"{comment_ref!r} does not name a GitHub comment")
        number = int(match.group(1) or match.group(2))
        response = await self._read(
            f"read comment {number}",
            lambda: self._gh.rest.issues.async_get_comment(self._owner, self._name, number),
        )
        data = _obj(response)
        if not _text(data.get("issue_url")).endswith(f"/issues/{pull}"):
            raise NotFound(f"comment {number} is not on PR #{pull}")
        return _comment(data)

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
        data = _obj(response)
        role = _text(data.get("role_name"))
        level = role if role in _PERMISSIONS else _text(data.get("permission"))
        return cast(Permission, level if level in _PERMISSIONS else "none")

    # -- code ------------------------------------------------------------------------------

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        token = await self._creds.token()
        return await github_git.push(
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
        pulls = [_pull(item) for item in _objs(response)]
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
            found = await self._open_pull_for(head)
            if found is None:
                raise
            return found
        return _pull(_obj(response))

    async def _pull_data(self, number: int) -> dict[str, Any]:
        response = await self._read(
            f"read PR #{number}",
            lambda: self._gh.rest.pulls.async_get(self._owner, self._name, number),
        )
        return _obj(response)

    async def get_pull(self, number: int) -> Pull:
        return _pull(await self._pull_data(number))

    # -- review status ---------------------------------------------------------------------

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        response = await self._read(
            f"read the status of {head_sha[:12]}",
            lambda: self._gh.rest.repos.async_get_combined_status_for_ref(
                self._owner, self._name, head_sha, per_page=PAGE
            ),
        )
        for status in _obj(response).get("statuses") or ():
            if isinstance(status, dict) and status.get("context") == REVIEW_CONTEXT:
                return ReviewStatus(
                    head_sha=head_sha,
                    state=cast(ReviewState, status.get("state")),
                    description=_text(status.get("description")),
                )
        return None

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        description = description[:STATUS_DESCRIPTION_MAX]
        wanted = ReviewStatus(head_sha=head_sha, state=state, description=description)
        async with self._publish_lock:
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

    # -- state labels ----------------------------------------------------------------------

    async def set_state_label(self, target: Target, state: PrState) -> bool:
        number = target.number
        async with self._publish_lock:
            plan = plan_state_labels(_labels(await self._issue(number)), state)
            if plan.noop:
                return False
            if plan.add:
                await self._write(
                    f"label #{number}",
                    lambda: self._gh.rest.issues.async_add_labels(
                        self._owner, self._name, number, data={"labels": list(plan.add)}
                    ),
                )
            for label in plan.remove:
                with contextlib.suppress(NotFound):  # removed meanwhile: the goal holds
                    await self._write(f"unlabel #{number}", self._remove_label(number, label))
            after = plan_state_labels(_labels(await self._issue(number)), state)
        if not after.noop:
            raise self._fail(Conflict, f"#{number} reads back labels that still need {after}")
        return True

    def _remove_label(self, number: int, label: str) -> Callable[[], Awaitable[Any]]:
        return lambda: self._gh.rest.issues.async_remove_label(
            self._owner, self._name, number, label
        )

    # -- merge -----------------------------------------------------------------------------

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        data = await self._pull_data(pull)
        current = _pull(data)
        if current.merged and current.head_sha == head_sha:
            return MergeResult(merged=True, sha=_text(data.get("merge_commit_sha")) or None)
        if current.state != "open":
            raise Conflict(f"merge PR #{pull}: it is {current.state}")
        if current.head_sha != head_sha:
            raise Conflict(
                f"merge PR #{pull}: the head moved from the reviewed {head_sha[:12]} "
                f"to {current.head_sha[:12]}"
            )
        if current.draft:
            await self._mark_ready(pull, _text(data.get("node_id")))
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
            if not _pull(after).merged:
                raise
            return MergeResult(merged=True, sha=_text(after.get("merge_commit_sha")) or None)
        result = _obj(response)
        return MergeResult(merged=bool(result.get("merged")), sha=_text(result.get("sha")) or None)

    async def _mark_ready(self, pull: int, node_id: str) -> None:
        """Draft → ready: REST cannot, GraphQL `markPullRequestReadyForReview` can."""
        await self._write(
            f"mark PR #{pull} ready for review",
            lambda: self._gh.async_graphql(_READY_FOR_REVIEW, {"id": node_id}),
        )
