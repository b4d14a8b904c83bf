"""What the service does to a code host, and where it gets a client for one repository.

    Forge      permission · react · upsert_comment (the `Host` operations the App uses)
               + dispatch (a `repository_dispatch` of type `pair`: GitHub only)
    Forges     a factory: `forges(repo, installation) -> Forge`, cached, closed with the app

    GitHubForges   the App: one `GitHubHost` per (repository, installation), authenticated as
                   that installation; `repository_dispatch` is sent here (the Host protocol
                   has no such operation: the engine never dispatches, only the App does).
                   The hosts of one installation share one `hosts.github.session.GitHubSession`
                   (`sessions`): one warm connection pool, one installation token, one write
                   pacer, for the App's life (closed by `aclose` at shutdown); the dispatch
                   uses the same pool and token, and so do the worker's hosts (the service
                   builds them `using` these sessions)
    LocalForges    `pairbot serve --dev`: the local forge under the project (no account)
    AzureForges    Azure DevOps, from the host credentials of docs/hosts.md (worker only)

`repository_dispatch` goes through a small client over the installation's session, with its
installation token (`hosts.github.auth.AppInstallation`: minted once, shared, refreshed early,
re-minted before it expires). It is never retried
here — a POST that failed may have been stored — the worker's retry re-sends it (at least
once). A second dispatch of one command costs at most one more step: the cycle runs exactly one
step per invocation, and every payload carries the delivery id it came from.
https://docs.github.com/en/rest/repos/repos#create-a-repository-dispatch-event
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from app.domain.intake.pair_request import DISPATCH_EVENT_TYPE
from app.errors import ConfigError
from app.hosting import LOCAL_FORGE_DIR, HostSettings, build_host
from hosts.base import Host, Reaction
from hosts.calls import Calls, RateWindow
from hosts.errors import HostError, HostUnavailable, Unsupported
from hosts.github.auth import AppInstallation
from hosts.github.credentials import GitHubCredentials, GitHubOptions
from hosts.github.responses import BadCredentials, response_error
from hosts.models import Permission, Target, UpsertResult
from hosts.secrets import Secrets

if TYPE_CHECKING:
    from hosts.github.session import GitHubSession, GitHubSessions

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"


class Forge(Protocol):
    """One repository on one code host, as the App uses it."""

    async def permission(self, user: str) -> Permission:
        """The user's permission level on the repository."""
        ...

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        """React to a comment (Unsupported where the host has no such reaction)."""
        ...

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        """Create, update or leave the comment keyed by `marker`."""
        ...

    async def dispatch(self, client_payload: Mapping[str, Any]) -> None:
        """Send a `repository_dispatch` of type `pair` (Unsupported off GitHub)."""
        ...


class Forges(Protocol):
    """Forges by repository and installation; one instance per app, closed on shutdown."""

    def __call__(self, repo: str, installation: int | None) -> Forge: ...

    async def aclose(self) -> None: ...


Dispatch = Callable[[Mapping[str, Any]], Awaitable[None]]


class HostForge:
    """A `Forge` over a `Host`, with dispatch from elsewhere (or Unsupported)."""

    def __init__(self, host: Host, dispatch: Dispatch | None = None) -> None:
        self.host = host
        self._dispatch = dispatch

    async def permission(self, user: str) -> Permission:
        return await self.host.permission(user)

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        await self.host.react(target, comment_id, reaction)

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        return await self.host.upsert_comment(target, marker, body)

    async def dispatch(self, client_payload: Mapping[str, Any]) -> None:
        if self._dispatch is None:
            raise Unsupported("dispatch", f"the {self.host.name} host has no repository_dispatch")
        await self._dispatch(client_payload)

    async def aclose(self) -> None:
        close = getattr(self.host, "aclose", None)
        if close is not None:
            await close()


class GitHubForges:
    """The App on GitHub: per (repo, installation) a `GitHubHost`; dispatch via the REST API.

    `transport`, `clock` and `sleep` are seams for tests (an `httpx.MockTransport`, a fake
    clock); `host_options` go to every `GitHubHost` (e.g. `write_spacing_s`).
    """

    def __init__(
        self,
        *,
        app_id: int | None,
        private_key: str | None,
        base_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        timeout_s: float = 30.0,
        host_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._app_id = app_id
        self._key = private_key
        self.base_url = base_url.rstrip("/")
        self._transport = transport
        self._clock = clock
        self._sleep = sleep
        self._timeout_s = timeout_s
        self._host_options = dict(host_options or {})
        self._forges: dict[tuple[str, int], HostForge] = {}
        self._sessions: GitHubSessions | None = None
        self._dispatchers: dict[int, httpx.AsyncClient] = {}
        self._secrets = Secrets()
        # The App's own calls keep their own window (they are not an adapter's): a rate limit
        # GitHub announced on one of them holds back the next.
        self._window = RateWindow(clock)
        self._calls = Calls(
            host="GitHub",
            translate=_translate,
            window=self._window,
            clock=clock,
            sleep=sleep,
            secrets=self._secrets,
        )

    def __repr__(self) -> str:
        return f"GitHubForges(app_id={self._app_id}, base_url={self.base_url!r})"

    def _credentials(self) -> tuple[int, str]:
        if self._app_id is None or not self._key:
            raise ConfigError(
                "GitHub commands need the App's credentials: set PAIR_APP_ID and "
                "PAIR_PRIVATE_KEY (or PAIR_PRIVATE_KEY_FILE)"
            )
        return self._app_id, self._key

    def __call__(self, repo: str, installation: int | None) -> Forge:
        if installation is None:
            raise ConfigError(
                f"the delivery for {repo} names no App installation: pairbot acts on GitHub as "
                "an installed App (install it on the repository; a plain repository webhook "
                "cannot be answered)"
            )
        key = (repo, installation)
        if key not in self._forges:
            from hosts.github import GitHubHost  # noqa: PLC0415  # githubkit loads on first use

            host = GitHubHost(
                repo,
                self._app_credentials(installation),
                base_url=self.base_url,
                options=self._options(),
                transport=self._transport,
                clock=self._clock,
                sleep=self._sleep,
                sessions=self.sessions,
            )
            self._forges[key] = HostForge(
                host, lambda payload: self._dispatch(repo, installation, payload)
            )
        return self._forges[key]

    def _app_credentials(self, installation: int) -> GitHubCredentials:
        app_id, private_key = self._credentials()
        return GitHubCredentials.app(app_id, private_key, installation)

    def _options(self) -> GitHubOptions:
        return GitHubOptions(timeout_s=self._timeout_s, **self._host_options)

    @property
    def sessions(self) -> GitHubSessions:
        """The installations' sessions (made on first use: githubkit loads with them)."""
        if self._sessions is None:
            from hosts.github.session import GitHubSessions  # noqa: PLC0415  # the seam above

            self._sessions = GitHubSessions()
        return self._sessions

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Inside, every `GitHubHost` built joins these sessions (`hosts.github.session.using`):
        the worker's hosts, built per job by the card cycle, share the installation's pool."""
        from hosts.github.session import using  # noqa: PLC0415  # the seam above

        with using(self.sessions):
            yield

    def session(self, installation: int) -> GitHubSession:
        """The installation's session: what its hosts and its dispatches share."""
        return self.sessions.session(
            self._app_credentials(installation),
            base_url=self.base_url,
            options=self._options(),
            transport=self._transport,
            clock=self._clock,
            sleep=self._sleep,
        )

    async def aclose(self) -> None:
        for forge in self._forges.values():
            await forge.aclose()
        self._forges.clear()
        clients = list(self._dispatchers.values())
        self._dispatchers.clear()
        for client in clients:
            await client.aclose()  # its transport is the session's pool: closed just below
        if self._sessions is not None:
            await self._sessions.aclose()

    # -- the App's own REST calls ------------------------------------------------------------

    def _new_client(self, transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=httpx.Timeout(self._timeout_s),
            trust_env=False,  # no proxy from the environment: requests go where configured
            headers={
                "Accept": "application/vnd.github+json",
                "User-Agent": "pairbot",
                "X-GitHub-Api-Version": API_VERSION,
            },
        )

    def _dispatcher(self, installation: int) -> httpx.AsyncClient:
        """A client over the installation's pool (closing it leaves the pool to the session)."""
        client = self._dispatchers.get(installation)
        if client is None:
            client = self._new_client(self.session(installation).edge)
            self._dispatchers[installation] = client
        return client

    async def app_slug(self) -> str | None:
        """The App's slug (`GET /app` with its JWT); None without credentials."""
        if self._app_id is None or not self._key:
            return None
        app_id, private_key = self._credentials()
        creds = AppInstallation(app_id, private_key, 0, secrets=self._secrets, clock=self._clock)
        # Once, at start (on the edge's loop): a client of its own, closed when answered.
        transport = self._transport or httpx.AsyncHTTPTransport(retries=0)
        async with self._new_client(transport) as client:
            response = await self._send(
                "GET", "/app", creds.jwt(), op="read the App", client=client
            )
        slug = response.json().get("slug")
        return slug if isinstance(slug, str) and slug else None

    async def _dispatch(self, repo: str, installation: int, payload: Mapping[str, Any]) -> None:
        creds = self.session(installation).creds
        client = self._dispatcher(installation)
        body = {"event_type": DISPATCH_EVENT_TYPE, "client_payload": dict(payload)}
        op = f"repository_dispatch to {repo}"
        path = f"/repos/{repo}/dispatches"
        token = await creds.token()
        try:
            await self._send("POST", path, token, op=op, json=body, client=client)
        except BadCredentials:
            if not creds.invalidate(token):
                raise
            # A 401: the token was revoked early. Mint once more and send once more.
            await self._send("POST", path, await creds.token(), op=op, json=body, client=client)

    async def _send(
        self,
        method: str,
        path: str,
        bearer: str,
        *,
        op: str,
        json: Any = None,
        client: httpx.AsyncClient,
    ) -> httpx.Response:
        """One request under the hosts' call discipline (`hosts.calls`: the rate window, reads
        retried a bounded number of times, writes one at a time and never retried); a failure is
        read the way the GitHub adapter reads it (`hosts.github.responses`), with no secret."""
        http = client

        async def once() -> httpx.Response:
            response = await http.request(
                method, path, json=json, headers={"Authorization": f"Bearer {bearer}"}
            )
            if response.status_code < 300:
                return response
            raise response_error(
                op, response, window=self._window, secrets=self._secrets, now=self._clock()
            )

        call = self._calls.read if method == "GET" else self._calls.write
        return await call(op, once)


def _translate(op: str, exc: Exception) -> HostError | None:
    """The `hosts.calls.Translate` of the App's own REST calls (None: not ours, re-raise)."""
    if isinstance(exc, HostError):
        return exc
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return HostUnavailable(f"{op}: GitHub did not answer in time")
    if isinstance(exc, httpx.TransportError):
        return HostUnavailable(f"{op}: could not reach GitHub ({type(exc).__name__})")
    return None


class LocalForges:
    """`pairbot serve --dev`: every repository is the project's local forge; no dispatch."""

    def __init__(self, forge_dir: Path) -> None:
        self.forge_dir = forge_dir
        self._forge: HostForge | None = None

    def __call__(self, repo: str, installation: int | None) -> Forge:
        if self._forge is None:
            from hosts.local import LocalHost  # noqa: PLC0415

            self._forge = HostForge(LocalHost(self.forge_dir))
        return self._forge

    async def aclose(self) -> None:
        self._forge = None

    @classmethod
    def for_root(cls, root: Path, settings: HostSettings) -> LocalForges:
        forge = Path(settings.local_forge) if settings.local_forge else root / LOCAL_FORGE_DIR
        return cls(forge)


class AzureForges:
    """Azure DevOps: one adapter per `project/repository` (a work item names only its project:
    the repository then comes from PAIR_AZURE_DEVOPS_REPOSITORY). Acknowledgements only: Azure
    DevOps has no repository_dispatch, so its jobs run in the worker."""

    def __init__(self, settings: HostSettings, root: Path) -> None:
        self._settings = settings
        self._root = root
        self._forges: dict[str, HostForge] = {}

    def __call__(self, repo: str, installation: int | None) -> Forge:
        if repo not in self._forges:
            project, _, repository = repo.partition("/")
            settings = self._settings.model_copy(
                update={
                    "azure_project": project or self._settings.azure_project,
                    "azure_repository": repository or self._settings.azure_repository,
                }
            )
            self._forges[repo] = HostForge(build_host("azure-devops", settings, self._root))
        return self._forges[repo]

    async def aclose(self) -> None:
        for forge in self._forges.values():
            await forge.aclose()
        self._forges.clear()
