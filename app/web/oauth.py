"""GitHub sign-in through the App's own OAuth client (a user-to-server token), used once.

    authorize_url(...)      where the sign-in button sends the browser
    exchange_code(...)      POST {web}/login/oauth/access_token → the user's token
    read_access(...)        GET {api}/user, {api}/user/installations and each installation's
                            {api}/user/installations/{id}/repositories → login, user id +
                            repo names

A user-to-server token sees exactly the repositories both the user and the App can reach, so
the installations' repository lists are what the user may see of pairbot's data. The token is
used for these calls and then dropped: it is never stored (app.web.sessions says what is).

GitHub answers a failed code exchange with 200 and an `error` field, not a 4xx
(https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app).
Lists are paged with `per_page=100` and followed through the `Link` header's `rel="next"`,
a bounded number of pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import httpx

TIMEOUT_S: Final = 10.0
MAX_PAGES: Final = 100  # 10,000 installations or repositories per list: past it, the list is cut
_API_HEADERS: Final = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "pairbot",
}


class OAuthError(Exception):
    """The sign-in could not complete; the message is safe to show the user."""


@dataclass(frozen=True)
class Access:
    """Who signed in (login and numeric GitHub user id: the id is what the operator's allowlist
    names) and the full names of the repositories they can read through the App."""

    login: str
    repos: tuple[str, ...]
    id: int = 0


def authorize_url(web_url: str, client_id: str, state: str, redirect_uri: str | None) -> str:
    params = {"client_id": client_id, "state": state, "allow_signup": "false"}
    if redirect_uri is not None:
        params["redirect_uri"] = redirect_uri
    return f"{web_url}/login/oauth/authorize?{urlencode(params)}"


async def exchange_code(
    client: httpx.AsyncClient,
    web_url: str,
    *,
    client_id: str,
    client_secret: str,
    code: str,
    redirect_uri: str | None,
) -> str:
    """The user's access token for `code`."""
    form = {"client_id": client_id, "client_secret": client_secret, "code": code}
    if redirect_uri is not None:
        form["redirect_uri"] = redirect_uri
    response = await _send(
        client,
        "POST",
        f"{web_url}/login/oauth/access_token",
        data=form,
        headers={"Accept": "application/json", "User-Agent": "pairbot"},
    )
    body = _json(response)
    token = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        error = body.get("error") if isinstance(body, dict) else None
        raise OAuthError(
            f"GitHub did not accept the sign-in code ({error or 'no access_token'}): sign in again"
        )
    return token


async def read_access(client: httpx.AsyncClient, api_url: str, token: str) -> Access:
    """The signed-in user's login and id and every repository they can read through the App."""
    auth = {**_API_HEADERS, "Authorization": f"Bearer {token}"}
    user = _json(await _send(client, "GET", f"{api_url}/user", headers=auth))
    login = user.get("login") if isinstance(user, dict) else None
    if not isinstance(login, str) or not login:
        raise OAuthError("GitHub's answer for the signed-in user has no login")
    user_id = user.get("id") if isinstance(user, dict) else None
    if not isinstance(user_id, int) or isinstance(user_id, bool) or user_id <= 0:
        raise OAuthError("GitHub's answer for the signed-in user has no numeric id")
    repos: set[str] = set()
    installations = await _pages(
        client, f"{api_url}/user/installations?per_page=100", auth, "installations"
    )
    for installation in installations:
        ident = installation.get("id")
        if not isinstance(ident, int):
            continue
        url = f"{api_url}/user/installations/{ident}/repositories?per_page=100"
        for repo in await _pages(client, url, auth, "repositories"):
            name = repo.get("full_name")
            if isinstance(name, str) and name:
                repos.add(name)
    return Access(login=login, repos=tuple(sorted(repos, key=str.lower)), id=user_id)


async def _pages(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], key: str
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    next_url: str | None = url
    for _ in range(MAX_PAGES):
        if next_url is None:
            break
        response = await _send(client, "GET", next_url, headers=headers)
        body = _json(response)
        page = body.get(key) if isinstance(body, dict) else None
        if not isinstance(page, list):
            raise OAuthError(f"GitHub's answer to {httpx.URL(next_url).path} has no {key} list")
        items += [item for item in page if isinstance(item, dict)]
        next_url = response.links.get("next", {}).get("url")
    return items


async def _send(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    try:
        response = await client.request(method, url, timeout=TIMEOUT_S, **kwargs)
    except httpx.HTTPError as err:
        raise OAuthError(f"GitHub could not be reached ({type(err).__name__}): try again") from None
    if response.status_code >= 400:
        raise OAuthError(
            f"GitHub answered {response.status_code} to {httpx.URL(url).path}: sign in again"
        )
    return response


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise OAuthError(f"GitHub's answer to {response.url.path} is not JSON") from None
