"""The Azure DevOps SDK connection of one host: worker threads, one transport policy, one window.

The SDK is synchronous (msrest over requests), so every call runs in a worker thread. Every HTTP
request it sends — its internal resource-area discovery included — passes `prepare_session`
(reached through the credentials, which msrest asks to sign every session): an adapter that
caps the timeout and never retries, a response hook that records the status and any
`Retry-After` into the shared `hosts.calls.RateWindow`, and a wait for an open window before
the request goes out. Calls go through `hosts.calls.Calls`; SDK failures are reduced to
`SdkFailure` here (no SDK object, no token) and translated in `hosts.azure_devops.translate`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hosts.azure_devops.sdk import Clients, Sdk, authentication, is_sdk_error, load
from hosts.azure_devops.translate import SDK_STATUS, SdkFailure, error_of
from hosts.calls import Calls, RateWindow
from hosts.errors import HostError
from hosts.secrets import Secret, Secrets

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

T = TypeVar("T")


class SdkConnection:
    """The SDK clients of one organization, made on first use, and the calls made with them."""

    def __init__(
        self,
        organization_url: str,
        token: Secret,
        *,
        timeout_s: float,
        cache_dir: Path | None,
        sleep: Callable[[float], Coroutine[Any, Any, None]],
        clock: Callable[[], float],
        max_wait_s: float,
        read_attempts: int,
        backoff_s: float,
    ) -> None:
        self.organization_url = organization_url
        self._token = token
        self._secrets = Secrets(token.reveal())
        self._timeout_s = timeout_s
        self._cache_dir = cache_dir
        self._sleep = sleep
        # Azure DevOps delays before it blocks: a Retry-After on any response, a 200 included,
        # opens the window (https://learn.microsoft.com/azure/devops/integrate/concepts/rate-limits).
        self.window = RateWindow(clock, wall=time.time, retry_after_on=None)
        self.calls = Calls(
            host="Azure DevOps",
            translate=self._translate,
            window=self.window,
            clock=clock,
            sleep=sleep,
            secrets=self._secrets,
            max_wait_s=max_wait_s,
            read_attempts=read_attempts,
            backoff_s=backoff_s,
            backoff_cap_s=60.0,
        )
        self._sdk_lock = threading.Lock()
        self._clients_: Clients | None = None
        self._observed = threading.local()

    def __repr__(self) -> str:
        return f"SdkConnection({self.organization_url!r})"

    def clients(self) -> Clients:
        """The SDK connection (imported and built on first use, in a worker thread)."""
        with self._sdk_lock:
            if self._clients_ is None:
                sdk = load()
                if self._cache_dir is not None:
                    self._cache_dir.mkdir(parents=True, exist_ok=True)
                    for cache, name in (
                        (sdk.file_cache.OPTIONS_CACHE, "options"),
                        (sdk.file_cache.RESOURCE_CACHE, "resources"),
                    ):
                        path = str(self._cache_dir / f"{name}.json")
                        if cache.file_name != path:
                            cache.file_name = path
                            cache.data = {}
                            cache.initial_load_occurred = False
                creds = authentication(self._token.reveal(), self.prepare_session)
                connection = sdk.Connection(base_url=self.organization_url, creds=creds)
                self._clients_ = Clients(connection)
            return self._clients_

    def prepare_session(self, session: requests.Session) -> None:
        """Worker thread, before every HTTP request the SDK sends: the one transport policy.

        Reached through the credentials, which msrest asks to sign every session before every
        request — the SDK's internal discovery client included, which no client configuration
        reaches. Each session gets, once, an adapter that caps the timeout and never retries
        (msrest's default retries POST and PATCH on 5xx with real sleeps) and the response hook;
        every request first waits out an open Retry-After window, so the window holds between
        the several requests one SDK call can make (discovery, then the call itself).
        """
        if not getattr(session, "_pairbot_transport", False):
            adapter = load().Adapter(self._timeout_s)
            session.mount("https://", adapter)
            session.mount("http://", adapter)
            session.hooks["response"].append(self.observe)
            session._pairbot_transport = True  # type: ignore[attr-defined]  # our own flag
        wait = self.calls.window_wait("Azure DevOps request")
        loop: asyncio.AbstractEventLoop | None = getattr(self._observed, "loop", None)
        if wait > 0 and loop is not None:
            # The injected sleep is a coroutine: run it on the caller's loop (which is only
            # awaiting this thread) and block this worker thread until it is done.
            asyncio.run_coroutine_threadsafe(self._sleep(wait), loop).result()

    def observe(self, response: Sdk, *args: object, **kwargs: object) -> None:
        """requests response hook (worker thread): note the status and any Retry-After."""
        # Read the body now: msrest asks for streamed responses and never reads the body of a
        # call that returns nothing (a DELETE, a like), which keeps the connection checked out
        # until garbage collection. The SDK's later reads use the cached content.
        _ = response.content
        status = int(response.status_code)
        delay = self.window.observe(status, response.headers)
        self._observed.status = status
        self._observed.retry_after = delay
        if delay is not None:
            log.warning(
                "Azure DevOps asked for a %.1fs pause (Retry-After on HTTP %s)", delay, status
            )

    def _run(self, fn: Callable[[Clients], T], loop: asyncio.AbstractEventLoop) -> T:
        """Worker thread: one SDK call, its failure reduced to an `SdkFailure`."""
        self._observed.status = None
        self._observed.retry_after = None
        self._observed.loop = loop
        try:
            return fn(self.clients())
        except Exception as exc:
            if not is_sdk_error(exc):
                raise
            raise self._failure(exc) from None

    def _failure(self, exc: Exception) -> SdkFailure:
        sdk = load()
        inner = getattr(exc, "inner_exception", None)
        # msrest wraps a requests failure (refused, reset, timed out) as ClientRequestError.
        transport = isinstance(exc, sdk.RequestException) or isinstance(inner, sdk.RequestException)
        type_key = getattr(exc, "type_key", None)
        status = None if transport else getattr(self._observed, "status", None)
        message = str(getattr(exc, "message", None) or exc)
        if transport:
            # The text of a connection error repeats urllib3's internals; its class is enough.
            message = f"cannot reach Azure DevOps ({type(inner or exc).__name__})"
        elif status is None and (said := SDK_STATUS.search(message)):
            status = int(said.group(1))  # "… Operation returned a 404 status code."
        return SdkFailure(
            self._secrets.scrub(message),
            type_key=str(type_key) if type_key else None,
            status=status,
            retry_after=getattr(self._observed, "retry_after", None),
            auth=isinstance(exc, sdk.AuthenticationError),
            transport=transport,
        )

    @staticmethod
    def _translate(what: str, exc: Exception) -> HostError | None:
        """`hosts.calls.Translate`: an SDK failure as a host error (None: not ours)."""
        if isinstance(exc, HostError):
            return exc  # raised by the transport itself (a window too long to wait)
        return error_of(what, exc) if isinstance(exc, SdkFailure) else None

    async def call(self, what: str, fn: Callable[[Clients], T], *, write: bool = False) -> T:
        """One SDK call in a worker thread, under the shared discipline (`hosts.calls`)."""
        loop = asyncio.get_running_loop()

        async def once() -> T:
            return await asyncio.to_thread(self._run, fn, loop)

        if write:
            return await self.calls.write(what, once)
        return await self.calls.read(what, once)
