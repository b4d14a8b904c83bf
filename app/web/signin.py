"""The sign-in layer: decides who each request's viewer is, and guards every page and API route.

`SignIn` is a raw ASGI middleware around the whole app. A `/webhooks/*` request goes straight
through (one prefix check: the webhook edge is measured and stays lean). For every other HTTP
request it

    reads the signed session cookie (app.web.sessions; tampered or expired: a fresh session)
    → decides the viewer (app.domain.intake.access.decide) and puts it in the scope (`VIEWER_KEY`,
      read by the pages with `viewer_of`), with the session's CSRF token (`CSRF_KEY`)
    → an unsafe method (not GET/HEAD/OPTIONS) without the operator's bearer token needs the
      CSRF token (form field `csrf` or header `X-CSRF-Token`) and a same-site Origin: else 403
    → a path off the public allow-list with nobody signed in: `/api/*` answers 401 JSON,
      a GET redirects (303) to `/signin`, anything else gets a 401 page; none shows card data
    → the app, its response given the security headers (a strict Content-Security-Policy,
      nosniff, Referrer-Policy, no-store) and, when the session changed, the cookie.

`SignInService.routes()` are the public sign-in pages: `GET /signin` (the GitHub button, whose
OAuth `state` is bound to the session, and the operator-token form), `POST /signin` (the
operator token), `GET /oauth/callback` (GitHub's redirect: state checked, code exchanged,
repositories read, app.web.oauth) and `POST /signout`.
"""

from __future__ import annotations

import html
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import parse_qs, quote, urlsplit

import httpx
from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.domain.intake.access import (
    SAFE_METHODS,
    Decision,
    Session,
    bearer_token,
    csrf_ok,
    decide,
    is_api,
    is_public,
    origin_ok,
    safe_next,
    session_alive,
    state_fresh,
)
from app.web import oauth
from app.web.sessions import (
    COOKIE,
    MAX_AGE_S,
    HeldRepos,
    SessionCodec,
    TooLarge,
    operator_mark,
    session_key,
    set_cookie,
)
from app.web.settings import AppSettings
from app.web.viewer import VIEWER_KEY, Viewer, viewer_of

OPERATOR_LOGIN: Final = "operator"  # the login an operator's viewer carries
CSRF_KEY: Final = "pairbot.csrf"
BOX_KEY: Final = "pairbot.session"
REASON_KEY: Final = "pairbot.signin"
STATE_WINDOW_S: Final = 600.0  # an OAuth round trip must come back within ten minutes
FORM_LIMIT: Final = 64 * 1024  # a form body the CSRF check reads to find the `csrf` field

# No 'unsafe-inline' anywhere: a page's styles and scripts come from /static only.
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
_SECURITY_HEADERS: Final = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
_REPLACED: Final = frozenset(name for name, _ in _SECURITY_HEADERS)

_MESSAGES: Final = {
    "anonymous": "Sign in to see pairbot's status pages.",
    "expired": "Your sign-in has expired: sign in again.",
    "bad-token": "The bearer token is not pairbot's operator token.",
    "remote-dev": (
        "This is a `pairbot serve --dev` server: it shows its pages only to this machine "
        "(a loopback address), and there is no sign-in."
    ),
}


@dataclass
class SessionBox:
    """One request's session; a sign-in route replaces it, and the cookie is then re-sent."""

    session: Session
    changed: bool = False

    def set(self, session: Session) -> None:
        self.session = session
        self.changed = True


class SignInService:
    """The sign-in layer's configuration and its routes, built once in `create_app`.

    `transport` is the httpx transport for GitHub's OAuth and API calls (tests inject a fake
    at the HTTP edge); `clock` gives wall-clock seconds (sessions outlive the process).
    """

    def __init__(
        self,
        settings: AppSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        secret = settings.session_secret.get_secret_value() if settings.session_secret else None
        key = session_key(secret, settings.require_webhook_secret())
        self.codec = SessionCodec(key)
        self.operator_token = (
            settings.operator_token.get_secret_value() if settings.operator_token else None
        )
        self.mark = operator_mark(key, self.operator_token)
        self.held = HeldRepos()  # repository lists too long for a cookie
        self.dev = settings.forge == "local"
        self.transport = transport
        self.clock = clock
        public = urlsplit(settings.public_url) if settings.public_url else None
        self.public_host = public.netloc if public is not None else None
        self.redirect_uri = f"{settings.public_url}oauth/callback" if settings.public_url else None

    def new_session(self, now: float) -> Session:
        return Session(csrf=secrets.token_urlsafe(32), since=now)

    def secure(self, scope: Scope) -> bool:
        """Secure cookies, except on `--dev` over plain http (a browser drops them there)."""
        return not self.dev or scope.get("scheme") == "https"

    def decide(self, scope: Scope, headers: Headers, session: Session, now: float) -> Decision:
        client = scope.get("client")
        held = None
        if session.kind == "github" and session.repos_ref:
            held = self.held.get(session.repos_ref, session.login, now)
        return decide(
            dev=self.dev,
            client_host=client[0] if client else None,
            bearer=bearer_token(headers.get("authorization")),
            operator_token=self.operator_token,
            operator_mark=self.mark,
            session=session,
            now=now,
            ttl_s=self.settings.signin_ttl_s,
            held_repos=held,
        )

    def routes(self) -> list[Route]:
        return [
            Route("/signin", self.signin_page, methods=["GET"]),
            Route("/signin", self.operator_signin, methods=["POST"]),
            Route("/oauth/callback", self.oauth_callback, methods=["GET"]),
            Route("/signout", self.signout, methods=["POST"]),
        ]

    # -- routes ---------------------------------------------------------------------------------

    async def signin_page(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next"))
        if viewer_of(request).signed_in:
            return RedirectResponse(target, status_code=303)
        box = _box(request)
        github = None
        if self.settings.github_signin and not self.dev:
            state = secrets.token_urlsafe(24)
            box.set(replace(box.session, state=state, state_at=self.clock(), next=target))
            assert self.settings.github_client_id is not None  # noqa: S101 - github_signin
            github = oauth.authorize_url(
                self.settings.github_oauth_url,
                self.settings.github_client_id,
                state,
                self.redirect_uri,
            )
        reason = request.scope.get(REASON_KEY, "anonymous")
        if self.dev:
            reason = "remote-dev"
        elif request.query_params.get("expired"):
            reason = "expired"
        return self._page(request, _MESSAGES.get(reason, _MESSAGES["anonymous"]), github, target)

    async def operator_signin(self, request: Request) -> Response:
        if self.operator_token is None or self.mark is None or self.dev:
            return self._page(
                request, "Operator sign-in is off: PAIR_OPERATOR_TOKEN is not set.", status=404
            )
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        given = (form.get("token") or [""])[0].strip()
        if not given or not secrets.compare_digest(given.encode(), self.operator_token.encode()):
            return self._page(request, "That is not the operator token.", status=401)
        box = _box(request)
        target = safe_next(request.query_params.get("next"))
        box.set(replace(self.new_session(self.clock()), kind="operator", mark=self.mark))
        return RedirectResponse(target, status_code=303)

    async def oauth_callback(self, request: Request) -> Response:
        client_id, client_secret = (
            self.settings.github_client_id,
            self.settings.github_client_secret,
        )
        if client_id is None or client_secret is None or self.dev:
            return self._page(request, "GitHub sign-in is not configured here.", status=404)
        box = _box(request)
        params = request.query_params
        now = self.clock()
        if not state_fresh(box.session, params.get("state"), now, STATE_WINDOW_S):
            box.set(replace(box.session, state=""))
            return self._page(
                request,
                "This sign-in did not start in this browser, or it took too long: start again.",
                status=400,
            )
        target = box.session.next
        box.set(replace(box.session, state=""))  # a state is good for one callback only
        if params.get("error"):
            return self._page(request, "GitHub sign-in was cancelled: start again.", status=400)
        code = params.get("code")
        if not code:
            return self._page(request, "GitHub sent no sign-in code: start again.", status=400)
        try:
            async with httpx.AsyncClient(transport=self.transport) as client:
                token = await oauth.exchange_code(
                    client,
                    self.settings.github_oauth_url,
                    client_id=client_id,
                    client_secret=client_secret.get_secret_value(),
                    code=code,
                    redirect_uri=self.redirect_uri,
                )
                access = await oauth.read_access(client, self.settings.github_api_url, token)
        except oauth.OAuthError as err:
            return self._page(request, str(err), status=502)
        signed_in = replace(
            self.new_session(now),
            kind="github",
            login=access.login,
            repos=access.repos,
            repos_at=now,
            user_id=access.id,
        )
        try:
            self.codec.dump(signed_in)
        except TooLarge:
            # Too long for a cookie: this server holds the list for as long as it is good.
            until = now + self.settings.signin_ttl_s
            ref = self.held.put(access.login, access.repos, until, now)
            signed_in = replace(signed_in, repos=(), repos_ref=ref)
        box.set(signed_in)
        return RedirectResponse(target, status_code=303)

    async def signout(self, request: Request) -> Response:
        box = _box(request)
        if box.session.repos_ref:
            self.held.drop(box.session.repos_ref)
        box.set(self.new_session(self.clock()))
        return RedirectResponse("/signin", status_code=303)

    def _page(
        self,
        request: Request,
        message: str,
        github: str | None = None,
        target: str = "/",
        *,
        status: int = 200,
    ) -> Response:
        operator = self.operator_token is not None and not self.dev
        body = signin_html(
            message,
            github=github,
            operator=operator,
            csrf=_box(request).session.csrf,
            target=target,
        )
        return HTMLResponse(body, status_code=status)


def signin_html(
    message: str, *, github: str | None, operator: bool, csrf: str, target: str = "/"
) -> str:
    """The sign-in page: a message, the GitHub button, the operator form. No card data."""
    parts = [f"<p>{html.escape(message)}</p>"]
    if github is not None:
        parts.append(f'<p><a class=button href="{html.escape(github)}">Sign in with GitHub</a></p>')
    if operator:
        parts.append(
            f'<form method=post action="/signin?next={html.escape(quote(target, safe="/"))}">'
            f'<input type=hidden name=csrf value="{html.escape(csrf)}">'
            "<label>Operator token <input type=password name=token autocomplete=off required>"
            "</label> <button type=submit>Sign in</button></form>"
        )
    if github is None and not operator:
        parts.append(
            "<p>No sign-in is configured: set PAIR_GITHUB_CLIENT_ID and "
            "PAIR_GITHUB_CLIENT_SECRET (GitHub sign-in) or PAIR_OPERATOR_TOKEN.</p>"
        )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>Sign in · pairbot</title></head>\n<body><main><h1>pairbot</h1>"
        + "".join(parts)
        + "</main></body></html>\n"
    )


def _box(request: Request) -> SessionBox:
    box = request.scope.get(BOX_KEY)
    if not isinstance(box, SessionBox):  # only reachable without the middleware
        raise RuntimeError("the sign-in routes need the SignIn middleware")
    return box


class SignIn:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, service: SignInService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/webhooks/"):
            if scope["type"] == "websocket":  # no route speaks it; refuse before any work
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        service = self.service
        now = service.clock()
        headers = Headers(scope=scope)
        path = scope["path"]
        session = service.codec.load(cookie_parser(headers.get("cookie", "")).get(COOKIE))
        if session is not None and not session_alive(session, now, MAX_AGE_S):
            session = None
        # A visitor without a session gets one (its CSRF token backs the forms it is shown),
        # except from the probes and assets that never show a form.
        quiet = path == "/healthz" or path.startswith("/static/")
        box = SessionBox(session or service.new_session(now), changed=session is None and not quiet)
        decision = service.decide(scope, headers, box.session, now)
        scope[VIEWER_KEY] = viewer_for(decision)
        scope[CSRF_KEY] = box.session.csrf
        scope[BOX_KEY] = box
        scope[REASON_KEY] = decision.reason
        send = _guarded_send(send, box, service.codec, secure=service.secure(scope))
        if scope["method"] not in SAFE_METHODS and not decision.bearer:
            refusal, receive = await self._check_csrf(scope, receive, headers, box.session)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        if not is_public(path) and not decision.signed_in:
            await _unauthenticated(scope, decision)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _check_csrf(
        self, scope: Scope, receive: Receive, headers: Headers, session: Session
    ) -> tuple[Response | None, Receive]:
        hosts = {headers.get("host", "")} - {""}
        if self.service.public_host:
            hosts.add(self.service.public_host)
        if not origin_ok(headers.get("origin"), headers.get("referer"), hosts):
            return _forbidden(scope, "a request from another site (Origin) is refused"), receive
        given = headers.get("x-csrf-token")
        if given is None and _is_form(headers.get("content-type")):
            body = await _read_body(receive, FORM_LIMIT)
            if body is None:
                return _refuse(scope, 413, f"a form body is limited to {FORM_LIMIT} bytes"), receive
            given = (parse_qs(body.decode("utf-8", "replace")).get("csrf") or [""])[0]
            receive = _replay(body, receive)
        if not csrf_ok(session.csrf, given):
            why = "the CSRF token is missing" if not given else "the CSRF token is wrong"
            return _forbidden(scope, f"{why} (reload the page and try again)"), receive
        return None, receive


def viewer_for(decision: Decision) -> Viewer:
    """The pages' `Viewer` for the sign-in layer's decision."""
    if decision.who == "operator":
        return Viewer.everyone(OPERATOR_LOGIN, operator=True)
    if decision.who == "reader":
        return Viewer.reader_of(decision.login, decision.repos, decision.user_id)
    return Viewer.nobody()


def _unauthenticated(scope: Scope, decision: Decision) -> Response:
    message = _MESSAGES.get(decision.reason, _MESSAGES["anonymous"])
    if is_api(scope["path"]):
        return JSONResponse(
            {"error": message},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="pairbot"'},
        )
    if scope["method"] in ("GET", "HEAD"):
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope["path"] + (f"?{query}" if query else "")
        extra = "&expired=1" if decision.reason == "expired" else ""
        return RedirectResponse(f"/signin?next={quote(target, safe='')}{extra}", status_code=303)
    return HTMLResponse(signin_html(message, github=None, operator=False, csrf=""), status_code=401)


def _forbidden(scope: Scope, why: str) -> Response:
    return _refuse(scope, 403, why)


def _refuse(scope: Scope, status: int, why: str) -> Response:
    if is_api(scope["path"]):
        return JSONResponse({"error": why}, status_code=status)
    return HTMLResponse(f"<!doctype html><title>pairbot</title><p>{html.escape(why)}</p>", status)


def _is_form(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == (
        "application/x-www-form-urlencoded"
    )


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body; None past `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands the app the body the middleware already read."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _guarded_send(send: Send, box: SessionBox, codec: SessionCodec, *, secure: bool) -> Send:
    """`send`, adding the security headers (replacing a route's own) and the session cookie
    when the session is new or changed."""

    async def guarded(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(n, v) for n, v in message.get("headers", []) if n not in _REPLACED]
            headers += _SECURITY_HEADERS
            if not any(n == b"cache-control" for n, _ in headers):
                headers.append((b"cache-control", b"no-store"))
            if box.changed:
                headers.append((b"set-cookie", set_cookie(codec.dump(box.session), secure=secure)))
            message = {**message, "headers": headers}
        await send(message)

    return guarded
