"""A fake of GitHub's web OAuth flow and the user-to-server API calls sign-in makes.

    POST {web}/login/oauth/access_token           code → user token (an error is a 200 with
                                                  an `error` field, as GitHub answers)
    GET  {api}/user                               the token's user
    GET  {api}/user/installations                 the App's installations the user can reach
    GET  {api}/user/installations/{id}/repositories   their repositories the user can read

Shapes follow GitHub's REST reference for these operations (the fields sign-in reads and their
neighbours); lists are paged by `per_page`/`page` with a `Link` header, as GitHub pages them.
Served through `httpx.MockTransport`; anything else is a 404 recorded in `unexpected`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import httpx

WEB = "https://github.fake"
API = "https://api.github.fake"
CLIENT_ID = "Iv23liFakeClientId"
CLIENT_SECRET = "fake-client-secret-0123456789abcdef"  # noqa: S105 - a test fixture


@dataclass
class FakeInstallation:
    id: int
    account: str
    repos: list[str]


@dataclass
class FakeGitHubOAuth:
    """GitHub as sign-in sees it: users, the installations they reach, one-time codes."""

    users: dict[str, int] = field(default_factory=dict)  # login → id
    access: dict[str, list[FakeInstallation]] = field(default_factory=dict)  # login → reach
    codes: dict[str, str] = field(default_factory=dict)  # code → login (used once)
    tokens: dict[str, str] = field(default_factory=dict)  # token → login
    log: list[tuple[str, str]] = field(default_factory=list)  # (method, path?query)
    unexpected: list[str] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)  # path → status to answer instead
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def user(self, login: str, installations: list[FakeInstallation]) -> None:
        self.users[login] = next(self._ids)
        self.access[login] = installations

    def code_for(self, login: str) -> str:
        code = f"code-{next(self._ids)}"
        self.codes[code] = login
        return code

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        self.log.append(
            (request.method, url.path + (f"?{url.query.decode()}" if url.query else ""))
        )
        if url.path in self.fail:
            return httpx.Response(self.fail[url.path], json={"message": "Server Error"})
        origin = f"{url.scheme}://{url.host}"
        if origin == WEB and request.method == "POST" and url.path == "/login/oauth/access_token":
            return self._exchange(request)
        if origin == API and request.method == "GET":
            login = self._login(request)
            if login is None:
                return httpx.Response(
                    401,
                    json={
                        "message": "Bad credentials",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                )
            if url.path == "/user":
                return httpx.Response(200, json=self._user_json(login))
            if url.path == "/user/installations":
                items = [self._installation_json(i) for i in self.access[login]]
                return self._paged(request, "installations", items, {})
            prefix, _, rest = url.path.partition("/user/installations/")
            ident, _, tail = rest.partition("/")
            if not prefix and tail == "repositories" and ident.isdigit():
                found = [i for i in self.access[login] if i.id == int(ident)]
                if not found:
                    return httpx.Response(404, json={"message": "Not Found"})
                repos = [self._repo_json(name) for name in found[0].repos]
                return self._paged(
                    request, "repositories", repos, {"repository_selection": "selected"}
                )
        self.unexpected.append(f"{request.method} {url}")
        return httpx.Response(404, json={"message": "Not Found"})

    def _exchange(self, request: httpx.Request) -> httpx.Response:
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        if request.headers.get("accept") != "application/json":
            self.unexpected.append("access_token without Accept: application/json")
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return httpx.Response(
                200,
                json={
                    "error": "incorrect_client_credentials",
                    "error_description": "The client_id and/or client_secret passed are incorrect.",
                },
            )
        login = self.codes.pop(form.get("code", ""), None)
        if login is None:
            return httpx.Response(
                200,
                json={
                    "error": "bad_verification_code",
                    "error_description": "The code passed is incorrect or expired.",
                    "error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code",
                },
            )
        token = f"ghu_{next(self._ids):036d}"
        self.tokens[token] = login
        return httpx.Response(
            200, json={"access_token": token, "token_type": "bearer", "scope": ""}
        )

    def _login(self, request: httpx.Request) -> str | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return self.tokens.get(token) if scheme.lower() == "bearer" else None

    def _paged(
        self, request: httpx.Request, key: str, items: list[Any], extra: dict[str, Any]
    ) -> httpx.Response:
        query = request.url.params
        per_page = min(int(query.get("per_page", "30")), 100)
        page = int(query.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            base = request.url.copy_with(query=None)
            headers["Link"] = (
                f'<{base}?per_page={per_page}&page={page + 1}>; rel="next", '
                f'<{base}?per_page={per_page}&page={-(-len(items) // per_page)}>; rel="last"'
            )
        return httpx.Response(
            200, json={"total_count": len(items), **extra, key: chunk}, headers=headers
        )

    def _user_json(self, login: str) -> dict[str, Any]:
        uid = self.users[login]
        return {
            "login": login,
            "id": uid,
            "node_id": f"U_kgDO{uid}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
            "html_url": f"https://github.com/{login}",
            "type": "User",
            "site_admin": False,
            "name": login.title(),
        }

    def _installation_json(self, installation: FakeInstallation) -> dict[str, Any]:
        return {
            "id": installation.id,
            "account": {
                "login": installation.account,
                "id": installation.id + 1,
                "type": "Organization",
            },
            "repository_selection": "selected",
            "access_tokens_url": f"{API}/app/installations/{installation.id}/access_tokens",
            "repositories_url": f"{API}/installation/repositories",
            "app_id": 1,
            "app_slug": "pairbot",
            "target_id": installation.id + 1,
            "target_type": "Organization",
            "permissions": {"contents": "write", "issues": "write", "metadata": "read"},
            "events": ["issue_comment", "pull_request"],
            "created_at": "2026-11-01T10:00:00Z",
            "updated_at": "2026-11-01T10:00:00Z",
            "single_file_name": None,
            "suspended_at": None,
        }

    def _repo_json(self, full_name: str) -> dict[str, Any]:
        owner, name = full_name.split("/")
        return {
            "id": abs(hash(full_name)) % 10**9,
            "node_id": "R_kgDOfake",
            "name": name,
            "full_name": full_name,
            "private": True,
            "owner": {"login": owner, "type": "Organization"},
            "html_url": f"https://github.com/{full_name}",
            "permissions": {"admin": False, "push": False, "pull": True},
        }
