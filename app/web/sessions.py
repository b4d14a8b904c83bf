"""The status pages' session: a signed cookie (itsdangerous, as Starlette's SessionMiddleware).

The cookie holds an `app.domain.intake.access.Session` as compact JSON, zlib-compressed when that is
shorter, signed with HMAC-SHA256 under a key derived from the session secret. It is signed,
not encrypted: its holder can read it, and it holds nothing they may not know (their login and
GitHub user id, the names of the repositories they can read, their CSRF token). A cookie whose
signature does not match — tampered with, or signed with another key — reads as no session.

The cookie stays small whatever the user can read: a repository list that would not fit in
it (a few hundred names) is held in this server's memory instead (`HeldRepos`), under a random
reference the cookie carries, for as long as the list is good (PAIR_SIGNIN_TTL_S). A restart,
or another replica, does not hold it: that user signs in again (one click). Lists that fit
stay in the cookie, so most sessions work on every replica.

The key: PAIR_SESSION_SECRET when set; otherwise derived from the webhook secret (HMAC with a
fixed label), so a deployment needs no extra secret, and rotating the webhook secret signs
everyone out. Set PAIR_SESSION_SECRET on replicas that must share sessions across a webhook
secret change, or to sign everyone out without touching the webhook.

Attributes: `HttpOnly` (no script reads it), `SameSite=Lax` (not sent on cross-site POSTs),
`Path=/`, `Max-Age` = the session's lifetime, and `Secure` except on `pairbot serve --dev`
served over plain http (a browser would drop a Secure cookie there).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from itsdangerous import BadSignature, URLSafeSerializer

from app.domain.intake.access import Session

COOKIE: Final = "pairbot_session"
MAX_AGE_S: Final = 12 * 3600  # a session's absolute lifetime
MAX_COOKIE_BYTES: Final = 3900  # browsers keep cookies of up to 4096 bytes, name included
_LABEL: Final = b"pairbot status-page session key v1"


MAX_HELD_NAMES: Final = 2_000_000  # repository names held for every session together
_MIN_HELD_ENTRY: Final = 64  # the memory of a held list counts at least this many names


class TooLarge(ValueError):
    """The session does not fit in a cookie (a user who can read very many repositories)."""


@dataclass(frozen=True)
class _Held:
    login: str
    repos: tuple[str, ...]
    until: float


class HeldRepos:
    """Repository lists too long for a cookie, held in memory until they expire.

    Bounded: past `max_names` names in all, the oldest lists go first (their users sign in
    again). Only a completed GitHub sign-in adds a list, so a stranger cannot fill it. Used
    from the event loop only (the sign-in middleware and routes), so it takes no lock.
    """

    def __init__(self, max_names: int = MAX_HELD_NAMES) -> None:
        self._lists: OrderedDict[str, _Held] = OrderedDict()
        self._names = 0
        self._max = max_names

    def __len__(self) -> int:
        return len(self._lists)

    def put(self, login: str, repos: Sequence[str], until: float, now: float) -> str:
        """Hold `repos` for `login` until `until`; the reference the cookie carries."""
        self._expire(now)
        ref = secrets.token_urlsafe(24)
        held = _Held(login, tuple(repos), until)
        self._lists[ref] = held
        self._names += self._cost(held)
        while self._names > self._max and len(self._lists) > 1:
            self._forget(next(iter(self._lists)))
        return ref

    def get(self, ref: str, login: str, now: float) -> tuple[str, ...] | None:
        """The list held under `ref` for `login`; None when none is (or it expired)."""
        held = self._lists.get(ref)
        if held is None or held.login != login:
            return None
        if now > held.until:
            self._forget(ref)
            return None
        return held.repos

    def drop(self, ref: str) -> None:
        """Forget a list (its session signed out)."""
        if ref in self._lists:
            self._forget(ref)

    def _expire(self, now: float) -> None:
        for ref in [r for r, h in self._lists.items() if now > h.until]:
            self._forget(ref)

    def _forget(self, ref: str) -> None:
        self._names -= self._cost(self._lists.pop(ref))

    @staticmethod
    def _cost(held: _Held) -> int:
        return max(len(held.repos), _MIN_HELD_ENTRY)


def session_key(session_secret: str | None, webhook_secret: bytes) -> bytes:
    """The signing key: PAIR_SESSION_SECRET, else one derived from the webhook secret."""
    if session_secret is not None:
        return session_secret.encode()
    return hmac.new(webhook_secret, _LABEL, hashlib.sha256).digest()


def operator_mark(key: bytes, operator_token: str | None) -> str | None:
    """A fingerprint of the operator token that an operator session carries (never the token
    itself): changing PAIR_OPERATOR_TOKEN ends every session opened with the old one."""
    if operator_token is None:
        return None
    return hmac.new(key, b"operator:" + operator_token.encode(), hashlib.sha256).hexdigest()[:32]


class SessionCodec:
    """Reads and writes the session cookie's value."""

    def __init__(self, key: bytes) -> None:
        self._serializer = URLSafeSerializer(
            key, salt="pairbot.session", signer_kwargs={"digest_method": hashlib.sha256}
        )

    def dump(self, session: Session) -> str:
        value = self._serializer.dumps(session.to_dict())
        assert isinstance(value, str)  # noqa: S101 - URLSafeSerializer's dumps gives text
        if len(COOKIE) + 1 + len(value) > MAX_COOKIE_BYTES:
            raise TooLarge(
                f"the session needs {len(value)} bytes; a cookie holds {MAX_COOKIE_BYTES}"
            )
        return value

    def load(self, value: str | None) -> Session | None:
        """The session in a cookie value; None when absent, tampered with or malformed."""
        if not value:
            return None
        try:
            data = self._serializer.loads(value)
        except BadSignature:
            return None
        return Session.from_dict(data)


def set_cookie(value: str, *, secure: bool, max_age_s: int = MAX_AGE_S) -> bytes:
    """The `Set-Cookie` header value for a session."""
    flags = f"Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Lax"
    return f"{COOKIE}={value}; {flags}{'; Secure' if secure else ''}".encode("latin-1")
