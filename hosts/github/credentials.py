"""What `GitHubHost` is built from: who it acts as (`GitHubCredentials`) and its limits.

    GitHubCredentials.app(app_id, private_key, installation_id)   a GitHub App installation
    GitHubCredentials.token(token)                                a PAT (or any user token)
    GitHubCredentials.actions(token)                              the workflow's GITHUB_TOKEN:
                                                                  acts as github-actions[bot],
                                                                  so GET /user is never asked
    GitHubOptions(timeout_s=…, write_spacing_s=…, …)              limits and push settings

Both are frozen values checked when made: an empty token, a half-given App or a key that is
not an RSA PEM fails here, before any request. Secrets are `hosts.secrets.Secret`, so a
credentials object can be logged or shown in a traceback without leaking (its repr says
`Secret(***)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hosts.secrets import Secret

CredentialKind = Literal["app", "token", "actions"]
DEFAULT_REFRESH_MARGIN_S = 300.0


@dataclass(frozen=True)
class GitHubCredentials:
    """A GitHub App installation, a token, or the Actions token. Build with the classmethods."""

    kind: CredentialKind
    secret: Secret  # the token, or the App's PEM private key
    app_id: str = ""
    installation_id: int = 0

    def __post_init__(self) -> None:
        if not self.secret:
            raise ValueError(
                "the GitHub token is empty" if self.kind != "app" else "private_key is empty"
            )
        if self.kind == "app" and (not self.app_id.strip() or self.installation_id <= 0):
            raise ValueError("a GitHub App needs all of app_id, private_key, installation_id")

    @classmethod
    def app(
        cls, app_id: int | str, private_key: str | bytes, installation_id: int
    ) -> GitHubCredentials:
        """A GitHub App: JWTs signed with `private_key` mint tokens for `installation_id`."""
        key = private_key.decode() if isinstance(private_key, bytes) else private_key
        return cls(
            "app", Secret(key), app_id=str(app_id).strip(), installation_id=int(installation_id)
        )

    @classmethod
    def token(cls, token: str) -> GitHubCredentials:
        """A personal access token (or any user or installation token)."""
        return cls("token", Secret(token.strip()))

    @classmethod
    def actions(cls, token: str) -> GitHubCredentials:
        """The workflow's own `GITHUB_TOKEN`, which acts as `github-actions[bot]`."""
        return cls("actions", Secret(token.strip()))

    def describe(self) -> str:
        """Who these credentials are, with no secret: for reprs and logs."""
        if self.kind == "app":
            return f"app {self.app_id} installation {self.installation_id}"
        return self.kind


@dataclass(frozen=True)
class GitHubOptions:
    """Limits and push settings; every default is the production one.

    `timeout_s` per request phase (twice that per attempt end to end); `max_wait_s` the longest
    rate-limit window waited out before `RateLimited` is raised instead; `read_attempts` per
    read; `write_spacing_s` between mutations; `token_refresh_margin_s` before an installation
    token's expiry; `api_version` the REST version header (GHES default: 2022-11-28); `proxy`
    (never the environment's, which would route around the rate-limit window); `remote_url`,
    `git` and `push_timeout_s` for `push_branch`.
    """

    timeout_s: float = 30.0
    max_wait_s: float = 60.0
    read_attempts: int = 3
    write_spacing_s: float = 1.0
    token_refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S
    api_version: str | None = None
    proxy: str | None = None
    remote_url: str | None = None
    git: str = "git"
    push_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive: a call without a timeout can hang")
