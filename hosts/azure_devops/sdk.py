"""The azure-devops SDK stack, imported on first use, and its clients, made on first use.

Lazy on purpose: importing `hosts` or running another host's tick must never load azure-devops,
msrest or requests, hence the local imports (PLC0415). The requests adapter mounted on every
SDK session caps the timeout and never retries (msrest's default retries POST and PATCH on 5xx
with real sleeps, and a retried create can post twice): reads are retried by `hosts.calls`,
writes never.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests

Sdk = Any


class Clients:
    """The SDK connection and its clients, made on first use (in a worker thread)."""

    def __init__(self, connection: Sdk) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._made: dict[str, Sdk] = {}

    def _client(self, kind: str) -> Sdk:
        with self._lock:
            client = self._made.get(kind)
            if client is None:
                # Connection.get_client discovers the area's URL (cached on disk by the SDK).
                client = getattr(self._connection.clients_v7_1, f"get_{kind}_client")()
                self._made[kind] = client
            return client

    @property
    def git(self) -> Sdk:
        return self._client("git")

    @property
    def wit(self) -> Sdk:
        return self._client("work_item_tracking")

    @property
    def policy(self) -> Sdk:
        return self._client("policy")

    @property
    def location(self) -> Sdk:
        return self._client("location")

    @property
    def identity(self) -> Sdk:
        return self._client("identity")

    @property
    def security(self) -> Sdk:
        return self._client("security")


@dataclass(frozen=True)
class SdkModules:
    """What this adapter uses of the SDK stack, imported on first use."""

    Connection: Sdk
    file_cache: Sdk
    git: Sdk  # azure.devops.v7_1.git.models
    wit: Sdk  # azure.devops.v7_1.work_item_tracking.models
    Adapter: Sdk  # requests HTTPAdapter: capped timeout, no retries
    errors: tuple[type[Exception], ...]  # what the SDK raises for a failed request
    AuthenticationError: type[Exception]
    RequestException: type[Exception]


@functools.cache
def load() -> SdkModules:
    """Import the SDK stack. Lazy on purpose: importing `hosts` or running another host's tick
    must never load azure-devops, msrest or requests, hence the local imports (PLC0415)."""
    import requests  # noqa: PLC0415
    from azure.devops import _file_cache  # type: ignore[import-untyped]  # noqa: PLC0415  no stubs
    from azure.devops.connection import (  # type: ignore[import-untyped]  # noqa: PLC0415
        Connection,
    )
    from azure.devops.v7_1.git import (  # type: ignore[import-untyped]  # noqa: PLC0415
        models as git,
    )
    from azure.devops.v7_1.work_item_tracking import (  # type: ignore[import-untyped]  # noqa: PLC0415
        models as wit,
    )
    from msrest.exceptions import AuthenticationError, ClientException  # noqa: PLC0415
    from requests.adapters import HTTPAdapter  # noqa: PLC0415
    from urllib3.util.retry import Retry  # noqa: PLC0415

    class Adapter(HTTPAdapter):
        """No retries at all (reads are retried by the adapter, writes never); timeout capped."""

        def __init__(self, timeout_s: float) -> None:
            super().__init__(max_retries=Retry(total=0, read=False, raise_on_status=False))
            self.timeout_s = timeout_s

        def send(  # noqa: PLR0917 — the signature is requests' HTTPAdapter.send
            self,
            request: requests.PreparedRequest,
            stream: bool = False,
            timeout: float | tuple[float | None, float | None] | None = None,
            verify: bool | str = True,
            cert: str | tuple[str, str] | None = None,
            proxies: dict[str, str] | None = None,
        ) -> requests.Response:
            capped: float | tuple[float, float]
            if isinstance(timeout, tuple):
                connect, read = timeout
                capped = (
                    min(connect or self.timeout_s, self.timeout_s),
                    min(read or self.timeout_s, self.timeout_s),
                )
            else:
                capped = min(timeout or self.timeout_s, self.timeout_s)
            return super().send(request, stream, capped, verify, cert, proxies)

    return SdkModules(
        Connection=Connection,
        file_cache=_file_cache,
        git=git,
        wit=wit,
        Adapter=Adapter,
        errors=(ClientException, requests.RequestException),
        AuthenticationError=AuthenticationError,
        RequestException=requests.RequestException,
    )


def authentication(token: str, prepare: Callable[[requests.Session], None]) -> Sdk:
    """msrest Basic credentials (any user name, the PAT as password) that also `prepare` every
    session they sign: msrest's documented seam for customising its requests sessions."""
    from msrest.authentication import BasicAuthentication  # noqa: PLC0415 — lazy, see sdk

    class PatAuthentication(BasicAuthentication):
        def signed_session(self, session: requests.Session | None = None) -> requests.Session:
            signed = super().signed_session(session)
            prepare(signed)
            return signed

        def __repr__(self) -> str:
            return "PatAuthentication(<secret>)"

    return PatAuthentication("", token)


def models() -> tuple[Sdk, Sdk]:
    """The SDK's git and work-item-tracking model modules."""
    sdk = load()
    return sdk.git, sdk.wit


def is_sdk_error(exc: Exception) -> bool:
    if isinstance(exc, load().errors):
        return True
    # Raised by the SDK when the server has no route for an API (an older Azure DevOps Server).
    return isinstance(exc, ValueError) and "is not registered on" in str(exc)
