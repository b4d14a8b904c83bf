"""Who is looking at the status pages, and which repositories they may see.

The sign-in layer (a middleware) decides the viewer once per request and stores it in the ASGI
scope under `VIEWER_KEY`; the pages and the JSON API only ask `viewer_of(request)` and filter
with `Viewer.can_read`. A request that reached a page without the sign-in layer deciding sees
nothing (`Viewer.nobody()`): failing closed keeps private repository names off an unguarded
route.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starlette.requests import HTTPConnection

VIEWER_KEY = "pairbot.viewer"


@dataclass(frozen=True)
class Viewer:
    """A signed-in user, an operator, the open `--dev` visitor, or nobody.

    `repos` is None when every repository is visible (an operator, `--dev` on loopback), else
    the full names (`owner/name`, or `org/project/repo` on Azure DevOps) the viewer can read.
    `user_id`: a signed-in GitHub user's numeric id (what the operator's allowlist names), 0
    when unknown (the operator, `--dev`, a session from before sessions kept it).
    """

    login: str | None
    repos: frozenset[str] | None
    operator: bool = False
    user_id: int = 0

    @classmethod
    def nobody(cls) -> Viewer:
        return cls(login=None, repos=frozenset())

    @classmethod
    def everyone(cls, login: str | None = None, *, operator: bool = False) -> Viewer:
        return cls(login=login, repos=None, operator=operator)

    @classmethod
    def reader_of(cls, login: str, repos: Iterable[str], user_id: int = 0) -> Viewer:
        return cls(login=login, repos=frozenset(r.lower() for r in repos), user_id=user_id)

    @property
    def signed_in(self) -> bool:
        return self.login is not None or self.repos is None

    def can_read(self, repo: str) -> bool:
        """Repository names compare case-insensitively, as GitHub and Azure DevOps do."""
        return self.repos is None or repo.lower() in self.repos


def viewer_of(request: HTTPConnection) -> Viewer:
    """The viewer the sign-in layer decided for this request; nobody when none did."""
    viewer = request.scope.get(VIEWER_KEY)
    return viewer if isinstance(viewer, Viewer) else Viewer.nobody()
