"""Who may see the status pages: the sign-in layer's decisions, as pure functions.

The shell (app.web.signin) reads the cookie, the headers and the clock and hands the values
here; nothing in this module does I/O or reads the time. The rules:

- Every path is protected unless it is on the public allow-list (`is_public`): the webhooks
  (they authenticate each delivery themselves), `/healthz`, the sign-in pages and `/static/`.
  A route added later is protected without anyone remembering to protect it.
- `pairbot serve --dev` (the local forge) is open to loopback clients only, as an operator;
  any other client is nobody.
- Otherwise, in this order: an `Authorization: Bearer` operator token (a wrong one is refused,
  never mistaken for "no token"), then the session: an operator session, or a GitHub user
  whose repository list is younger than the TTL (held in the cookie, or — too long for one —
  by the server under the session's reference). Anything else is nobody.
- An unsafe request (not GET/HEAD/OPTIONS) made with the session cookie needs the session's
  CSRF token and an Origin (or Referer) of this site; one made with the bearer token needs
  neither (a browser never attaches that header on its own).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlsplit

PUBLIC_PATHS = frozenset({"/healthz", "/signin", "/signout", "/oauth/callback"})
PUBLIC_PREFIXES = ("/webhooks/", "/static/")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Kind = Literal["anonymous", "github", "operator"]
Reason = Literal["ok", "anonymous", "expired", "bad-token", "remote-dev"]


def is_public(path: str) -> bool:
    """Paths anyone may request; everything else needs a viewer who is signed in."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def is_api(path: str) -> bool:
    """The JSON API answers 401 JSON where a page would redirect to the sign-in page."""
    return path == "/api" or path.startswith("/api/")


def is_loopback(host: str | None) -> bool:
    """Whether a client address is this machine (127.0.0.0/8, ::1, or IPv4 in IPv6)."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison (the time taken does not tell how much of a guess was right)."""
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Session:
    """What the signed session cookie holds. Never a token: only who signed in, the names of
    the repositories they could read and when that list was read.

    `since`: when this session began (its absolute lifetime counts from here). `csrf`: the
    token unsafe requests must echo. `repos_ref`: set instead of `repos` when the list is too
    long for a cookie — the random name under which the server that signed the user in holds
    it (app.web.sessions.HeldRepos; `decide` is handed it). `mark`: for an operator session, a
    fingerprint of the operator token it was opened with, so changing the token ends those
    sessions. `user_id`: a GitHub user's numeric id (what the operator's allowlist names; 0 in a
    cookie written before sessions kept it). `state`,
    `state_at`, `next`: an OAuth sign-in under way (its state, when it began, where to go after).
    """

    csrf: str
    since: float
    kind: Kind = "anonymous"
    login: str = ""
    repos: tuple[str, ...] = ()
    repos_at: float = 0.0
    repos_ref: str = ""
    mark: str = ""
    user_id: int = 0
    state: str = ""
    state_at: float = 0.0
    next: str = "/"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"c": self.csrf, "s": self.since, "k": self.kind}
        if self.kind == "github":
            data.update(l=self.login, ra=self.repos_at)
            data.update({"i": self.user_id} if self.user_id else {})
            data.update({"rr": self.repos_ref} if self.repos_ref else {"r": list(self.repos)})
        if self.kind == "operator":
            data.update(m=self.mark)
        if self.state:
            data.update(st=self.state, sa=self.state_at, n=self.next)
        return data

    @classmethod
    def from_dict(cls, data: object) -> Session | None:
        """The session a cookie held; None for anything this module did not write."""
        if not isinstance(data, dict):
            return None
        csrf, since, kind = data.get("c"), data.get("s"), data.get("k")
        if not isinstance(csrf, str) or not csrf or not isinstance(since, int | float):
            return None
        if kind not in ("anonymous", "github", "operator"):
            return None
        session = cls(csrf=csrf, since=float(since), kind=kind)
        if kind == "github":
            login, repos, at = data.get("l"), data.get("r", []), data.get("ra")
            ref, user_id = data.get("rr", ""), data.get("i", 0)
            if not isinstance(login, str) or not login or not isinstance(at, int | float):
                return None
            if not isinstance(user_id, int) or isinstance(user_id, bool) or user_id < 0:
                return None
            if not isinstance(repos, list) or not all(isinstance(r, str) for r in repos):
                return None
            if not isinstance(ref, str) or (ref and repos) or ("r" not in data and not ref):
                return None
            session = replace(
                session,
                login=login,
                repos=tuple(repos),
                repos_at=float(at),
                repos_ref=ref,
                user_id=user_id,
            )
        if kind == "operator":
            mark = data.get("m")
            if not isinstance(mark, str) or not mark:
                return None
            session = replace(session, mark=mark)
        state, state_at, nxt = data.get("st"), data.get("sa"), data.get("n")
        if isinstance(state, str) and isinstance(state_at, int | float) and isinstance(nxt, str):
            session = replace(session, state=state, state_at=float(state_at), next=safe_next(nxt))
        return session


Who = Literal["nobody", "operator", "reader"]


@dataclass(frozen=True)
class Decision:
    """The viewer of one request: nobody, the operator (every repository), or a reader of
    `repos` signed in as `login` (GitHub user id `user_id`, 0 when the session does not know
    it); whether it came with the operator's bearer token; and why it
    is nobody when it is (`reason`, for the sign-in page's message). The web layer turns it
    into its `Viewer`."""

    who: Who
    reason: Reason
    bearer: bool = False
    login: str = ""
    repos: tuple[str, ...] = ()
    user_id: int = 0

    @property
    def signed_in(self) -> bool:
        return self.who != "nobody"


NOBODY_ANONYMOUS = Decision("nobody", "anonymous")


def decide(
    *,
    dev: bool,
    client_host: str | None,
    bearer: str | None,
    operator_token: str | None,
    operator_mark: str | None,
    session: Session | None,
    now: float,
    ttl_s: float,
    held_repos: Sequence[str] | None = None,
) -> Decision:
    """The viewer of a request (see the module docstring for the order). `held_repos`: the
    repository list the server holds for the session's `repos_ref`, None when it holds none
    (restarted, another replica, or evicted): that session has to sign in again."""
    if dev:
        if is_loopback(client_host):
            return Decision("operator", "ok")
        return Decision("nobody", "remote-dev")
    if bearer is not None:
        if operator_token is not None and same_secret(bearer, operator_token):
            return Decision("operator", "ok", bearer=True)
        return Decision("nobody", "bad-token")
    if session is None:
        return NOBODY_ANONYMOUS
    if session.kind == "operator":
        if operator_mark is not None and same_secret(session.mark, operator_mark):
            return Decision("operator", "ok")
        return Decision("nobody", "expired")
    if session.kind == "github":
        if not 0 <= now - session.repos_at <= ttl_s:
            return Decision("nobody", "expired")
        if not session.repos_ref:
            repos = session.repos
        elif held_repos is None:
            return Decision("nobody", "expired")
        else:
            repos = tuple(held_repos)
        return Decision("reader", "ok", login=session.login, repos=repos, user_id=session.user_id)
    return NOBODY_ANONYMOUS


def session_alive(session: Session, now: float, max_age_s: float) -> bool:
    """A session older than `max_age_s` (or from the future) is over, whatever it holds."""
    return 0 <= now - session.since <= max_age_s


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; "" for another scheme (which
    then counts as a wrong token, not as no header)."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def csrf_ok(expected: str, given: str | None) -> bool:
    return given is not None and given != "" and same_secret(given, expected)


def origin_ok(origin: str | None, referer: str | None, hosts: Iterable[str]) -> bool:
    """Whether an unsafe request comes from one of this site's own pages.

    Browsers send `Origin` with every cross-site and same-site POST; an older one may send only
    `Referer`. A request with neither, or with `Origin: null` (a sandboxed or privacy-stripped
    context), is refused. `hosts` are this site's `host[:port]`s: the Host the request was sent
    to and PAIR_PUBLIC_URL's. The host is compared, not the scheme, so a proxy that terminates
    TLS in front of the server does not turn every form into a 403.
    """
    source = origin if origin is not None else referer
    if not source or source == "null":
        return False
    netloc = urlsplit(source).netloc.lower()
    return bool(netloc) and netloc in {h.lower() for h in hosts}


def safe_next(target: str | None) -> str:
    """Where to send a browser after sign-in: a path on this site, never another site."""
    if (
        not target
        or not target.startswith("/")
        or target.startswith(("//", "/\\"))
        or len(target) > 2000
        or any(ord(c) < 0x20 or c == "\\" for c in target)
    ):
        return "/"
    return target


def state_fresh(session: Session, given: str | None, now: float, window_s: float) -> bool:
    """Whether an OAuth callback's `state` is the one this browser's sign-in began with, within
    `window_s` of it beginning."""
    return (
        bool(session.state)
        and given is not None
        and same_secret(given, session.state)
        and 0 <= now - session.state_at <= window_s
    )
