"""Run-time GitHub credentials: a token, or an App's JWTs and the installation tokens they mint.

    StaticToken          a personal token or the Actions `GITHUB_TOKEN`: a plain bearer, fixed
    AppInstallation      a GitHub App: RS256 JWTs (`iat` back-dated 60 s, `exp` 9 min ahead,
                         so the span is GitHub's 10-minute maximum) mint installation tokens,
                         cached until `refresh_margin_s` before their `expires_at`

Every secret seen (the key's JWTs, minted tokens) goes into the host's `hosts.secrets.Secrets`,
so any text can be scrubbed before it is shown, raised or logged.

Why not githubkit's `AppInstallationAuthStrategy`: it keeps the token until one minute before
its exact expiry (a long agent run then ends with a dead token), it reads the wall clock (no
test can move time), and concurrent first calls each mint their own token. Here one
`asyncio.Lock` makes 50 racing callers share one mint, and `invalidate` after a 401 drops only
the token that failed, so a burst of 401s costs one re-mint, not one each.
(https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app)

Nothing here performs I/O itself: minting is a callable the host supplies (it sends the
request through the same rate-limit gate and timeouts as every other call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from hosts.github.credentials import DEFAULT_REFRESH_MARGIN_S
from hosts.secrets import REDACTED, Secrets

log = logging.getLogger(__name__)

JWT_BACKDATE_S = 60  # GitHub's advice: allow for clock drift
JWT_LIFETIME_S = 540  # exp = now + 540 = iat + 600, GitHub's maximum


@dataclass(frozen=True)
class MintedToken:
    """An installation token and when it stops working (epoch seconds)."""

    value: str
    expires_at: float

    def __repr__(self) -> str:
        return f"MintedToken(***, expires_at={self.expires_at})"


def parse_expiry(text: str) -> float:
    """GitHub's `expires_at` (`2016-07-11T22:14:10Z`) as epoch seconds."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class Credentials(Protocol):
    """What the host needs from a credential."""

    kind: str

    async def token(self) -> str:
        """The bearer for API calls (and git over HTTPS)."""
        ...

    def invalidate(self, token: str) -> bool:
        """After a 401 with `token`: drop it; True when a fresh one can be had."""
        ...


class StaticToken:
    """A personal access token or the Actions `GITHUB_TOKEN`."""

    kind = "token"
    __slots__ = ("_token",)

    def __init__(self, token: str, secrets: Secrets) -> None:
        if not token or not token.strip():
            raise ValueError("the GitHub token is empty")
        self._token = token.strip()
        secrets.add(self._token, fixed=True)

    async def token(self) -> str:
        return self._token

    def invalidate(self, token: str) -> bool:
        return False  # nothing to refresh: a 401 on a fixed token is final

    def __repr__(self) -> str:
        return f"StaticToken({REDACTED})"


# Mints one installation token (the host's request, authenticated with `jwt()`).
Mint = Callable[[], Awaitable[MintedToken]]


class AppInstallation:
    """A GitHub App installation: JWTs on demand, installation tokens cached and shared."""

    kind = "app"
    __slots__ = (
        "_cached",
        "_clock",
        "_key",
        "_lock",
        "_margin",
        "_mint",
        "_secrets",
        "app_id",
        "installation_id",
        "mints",
    )

    def __init__(
        self,
        app_id: int | str,
        private_key: str | bytes,
        installation_id: int,
        *,
        secrets: Secrets,
        clock: Callable[[], float],
        refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S,
    ) -> None:
        if not str(app_id).strip():
            raise ValueError("app_id is empty")
        self.app_id = str(app_id).strip()
        self.installation_id = int(installation_id)
        self._key = _load_key(private_key)
        self._secrets = secrets
        self._clock = clock
        self._margin = refresh_margin_s
        self._lock = asyncio.Lock()
        self._cached: MintedToken | None = None
        self._mint: Mint | None = None
        self.mints = 0

    def bind(self, mint: Mint) -> None:
        """Give the credential its way to mint (the host's request through its gate)."""
        self._mint = mint

    def jwt(self) -> str:
        """A fresh RS256 JWT: `iat` = now - 60, `exp` = now + 540, `iss` = the app id."""
        now = int(self._clock())
        claims = {"iat": now - JWT_BACKDATE_S, "exp": now + JWT_LIFETIME_S, "iss": self.app_id}
        token = jwt.encode(claims, self._key, algorithm="RS256")
        self._secrets.add(token)
        return token

    async def app_bearer(self) -> str:
        """The JWT, as an auth flow wants it (for `/app` endpoints)."""
        return self.jwt()

    def _fresh(self) -> str | None:
        cached = self._cached
        if cached is not None and self._clock() < cached.expires_at - self._margin:
            return cached.value
        return None

    async def token(self) -> str:
        """The cached installation token, or one new mint shared by every waiting caller."""
        if (value := self._fresh()) is not None:
            return value
        async with self._lock:
            if (value := self._fresh()) is not None:
                return value  # another caller minted while this one waited
            if self._mint is None:
                raise RuntimeError("AppInstallation.bind() was not called")
            minted = await self._mint()
            self._secrets.add(minted.value)
            self.mints += 1
            self._cached = minted
            log.info(
                "minted an installation token for installation %s (valid %.0f s)",
                self.installation_id,
                minted.expires_at - self._clock(),
            )
            return minted.value

    def invalidate(self, token: str) -> bool:
        if self._cached is not None and self._cached.value == token:
            self._cached = None
        return True

    def __repr__(self) -> str:
        return f"AppInstallation(app_id={self.app_id}, installation_id={self.installation_id})"


def _load_key(private_key: str | bytes) -> RSAPrivateKey:
    """The PEM private key as a key object; errors never echo the key."""
    data = private_key.encode() if isinstance(private_key, str) else private_key
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ValueError("private_key is not an unencrypted PEM private key") from None
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("private_key must be an RSA key (GitHub Apps sign JWTs with RS256)")
    return key
