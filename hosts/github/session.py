"""What one set of GitHub credentials shares across hosts: the pool, the token, the pacing.

    GitHubSession    per (API base URL, credentials, limits): the connection pool (the edge
                     transport of `hosts.github.transport` over one httpx pool), the rate
                     window, the call discipline and its write pacer (`hosts.calls`), the
                     installation token (`hosts.github.auth`), the githubkit clients (each
                     keeping one httpx client), who the credentials act as, and the marker
                     comments found so far (`KnownComments`)
    GitHubSessions   the sessions of a long-lived process (the App), by that key and event
                     loop; `aclose()` at shutdown
    sessions_in_use  the registry `GitHubHost`s built in this context join (`using(...)`)

A `GitHubHost` is one repository; a session is one installation (or token) on one GitHub.
An Action run builds one host and its own session, closed with the host. The App builds a host
per repository and per job, so there the hosts of one installation join one session: one
warm pool of connections, one token minted and refreshed early (`AppInstallation`), one rate
window (GitHub counts per installation), and one write pacer, so the spacing GitHub asks
between mutations holds across every repository of the installation.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextvars import ContextVar
from urllib.parse import urlsplit

import httpx

from hosts.calls import Calls, RateWindow
from hosts.errors import Forbidden, HostError
from hosts.github import payloads
from hosts.github.auth import AppInstallation, Credentials, MintedToken, StaticToken, parse_expiry
from hosts.github.client import PooledGitHub, make_client
from hosts.github.credentials import GitHubCredentials, GitHubOptions
from hosts.github.translate import BadCredentials, Translator
from hosts.github.transport import EdgeTransport
from hosts.models import Author
from hosts.secrets import Secrets

log = logging.getLogger(__name__)

# The REST version GitHub Enterprise Server understands; github.com takes githubkit's newer one.
GHES_API_VERSION = "2022-11-28"


class KnownComments:
    """pairbot's marker comments found so far, by (repository, issue, marker) → comment id:
    the next upsert reads that one comment instead of every page of a long issue
    (`GitHubComments._known_comment`). Bounded; the least recently used is dropped first."""

    def __init__(self, entries: int = 4096) -> None:
        self._entries = entries
        self._ids: OrderedDict[Hashable, str] = OrderedDict()
        self._kept: set[str] = set()  # the ids above: a comment opens with one marker

    def get(self, key: Hashable) -> str | None:
        found = self._ids.get(key)
        if found is not None:
            self._ids.move_to_end(key)
        return found

    def knows(self, comment_id: str) -> bool:
        return comment_id in self._kept

    def keep(self, key: Hashable, comment_id: str) -> None:
        self.forget(key)
        self._ids[key] = comment_id
        self._kept.add(comment_id)
        while len(self._ids) > self._entries:
            self._kept.discard(self._ids.popitem(last=False)[1])

    def forget(self, key: Hashable) -> None:
        dropped = self._ids.pop(key, None)
        if dropped is not None:
            self._kept.discard(dropped)


class GitHubSession:
    """The shared half of a host: see the module docstring. One per event loop."""

    def __init__(
        self,
        credentials: GitHubCredentials,
        *,
        base_url: str,
        options: GitHubOptions,
        transport: httpx.AsyncBaseTransport | None,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.secrets = Secrets()
        self.window = RateWindow(clock)
        api_version = options.api_version
        if api_version is None and urlsplit(self.base_url).netloc != "api.github.com":
            api_version = GHES_API_VERSION
        inner = transport or httpx.AsyncHTTPTransport(proxy=options.proxy, retries=0)
        self.edge = EdgeTransport(inner, self.window, api_version=api_version)
        self.calls = Calls(
            host="GitHub",
            translate=Translator(self.window, self.secrets, clock),
            window=self.window,
            clock=clock,
            sleep=sleep,
            secrets=self.secrets,
            max_wait_s=options.max_wait_s,
            read_attempts=options.read_attempts,
            write_spacing_s=options.write_spacing_s,
            timeout_s=2 * options.timeout_s,
            recover=self._recover,
        )
        self._timeout_s = options.timeout_s
        self.identity_lock = asyncio.Lock()
        self.me: Author | None = None
        self.known_comments = KnownComments()
        self.app: AppInstallation | None = None
        self.creds: Credentials
        if credentials.kind == "app":
            self.app = AppInstallation(
                credentials.app_id,
                credentials.secret.reveal(),
                credentials.installation_id,
                secrets=self.secrets,
                clock=clock,
                refresh_margin_s=options.token_refresh_margin_s,
            )
            self.app.bind(self._mint)
            self.creds = self.app
        else:
            self.creds = StaticToken(credentials.secret.reveal(), self.secrets)
        self.gh = self._client(self.creds.token)
        self.app_gh = self._client(self.app.app_bearer) if self.app is not None else None

    def _client(self, source: Callable[[], Awaitable[str]]) -> PooledGitHub:
        return make_client(
            source, base_url=self.base_url, timeout_s=self._timeout_s, transport=self.edge
        )

    async def aclose(self) -> None:
        """Close the githubkit clients and the connection pool."""
        for client in (self.gh, self.app_gh):
            if client is not None:
                await client.aclose()
        await self.edge.close_inner()

    def _recover(self, error: HostError, again: bool) -> HostError | None:
        """A refused installation token is dropped and minted once; otherwise `error`."""
        if not isinstance(error, BadCredentials):
            return error
        if not again and self.creds.invalidate(error.bearer):
            log.warning("GitHub refused the installation token; minting once")
            return None
        return Forbidden(str(error))

    async def _mint(self) -> MintedToken:
        """POST /app/installations/{id}/access_tokens with the app's JWT."""
        app, client = self.app, self.app_gh
        if app is None or client is None:
            raise RuntimeError("minting needs GitHub App credentials")
        op = f"mint an installation token for installation {app.installation_id}"
        try:
            async with asyncio.timeout(2 * self._timeout_s):
                response = await client.rest.apps.async_create_installation_access_token(
                    app.installation_id
                )
        except Exception as exc:
            error = self.calls.translate(op, exc)
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


SessionKey = tuple[object, ...]


def _credential_key(credentials: GitHubCredentials) -> tuple[object, ...]:
    # The secret is part of the key (two keys of one App are two sessions), hashed so no
    # secret sits in a dict key.
    digest = hashlib.sha256(credentials.secret.reveal().encode()).hexdigest()
    return (credentials.kind, credentials.app_id, credentials.installation_id, digest)


def _limits_key(options: GitHubOptions) -> tuple[object, ...]:
    """The options a session is built from (the push settings are each host's own)."""
    return (
        options.timeout_s,
        options.max_wait_s,
        options.read_attempts,
        options.write_spacing_s,
        options.token_refresh_margin_s,
        options.api_version,
        options.proxy,
    )


class GitHubSessions:
    """The sessions of one process, by base URL, credentials, limits and event loop; the
    seams (`transport`, `clock`, `sleep`) are part of the key, so a test's fakes never meet."""

    def __init__(self) -> None:
        self._sessions: dict[SessionKey, GitHubSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def session(
        self,
        credentials: GitHubCredentials,
        *,
        base_url: str,
        options: GitHubOptions,
        transport: httpx.AsyncBaseTransport | None,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> GitHubSession:
        try:
            loop: object = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        key: SessionKey = (
            base_url.rstrip("/"),
            _credential_key(credentials),
            _limits_key(options),
            transport,
            clock,
            sleep,
            loop,  # held, not its id: a closed loop's id may be a new loop's
        )
        found = self._sessions.get(key)
        if found is None:
            found = GitHubSession(
                credentials,
                base_url=base_url,
                options=options,
                transport=transport,
                clock=clock,
                sleep=sleep,
            )
            self._sessions[key] = found
        return found

    async def aclose(self) -> None:
        """Close the sessions of the running event loop (and of none): a pool belongs to the
        loop that opened it, so the App closes each loop's on that loop at its shutdown."""
        loop = asyncio.get_running_loop()
        closing = [key for key in self._sessions if key[-1] in (loop, None)]
        sessions = [self._sessions.pop(key) for key in closing]
        for session in sessions:
            try:
                await session.aclose()
            except Exception:  # one pool that fails to close must not keep the rest open
                log.exception("a GitHub connection pool did not close cleanly")


_IN_USE: ContextVar[GitHubSessions | None] = ContextVar("pairbot_github_sessions", default=None)


def sessions_in_use() -> GitHubSessions | None:
    """The registry hosts built in this context join (None: each host has its own session)."""
    return _IN_USE.get()


@contextlib.contextmanager
def using(sessions: GitHubSessions) -> Iterator[GitHubSessions]:
    """Hosts built inside (and in tasks started inside) join `sessions`."""
    token = _IN_USE.set(sessions)
    try:
        yield sessions
    finally:
        _IN_USE.reset(token)
