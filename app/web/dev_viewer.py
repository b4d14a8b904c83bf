"""`--dev`'s viewer: everyone on loopback sees every repository, as an operator.

`pairbot serve --dev` serves the local forge on a loopback address only, for one person trying
pairbot out; its status pages need no sign-in there. `DevViewer` puts
`Viewer.everyone(operator=True)` in every request's scope when the app serves the local forge,
and nothing otherwise — then no viewer is decided and the pages fail closed (they show nothing).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.viewer import VIEWER_KEY, Viewer


class DevViewer:
    """ASGI middleware: the open `--dev` viewer when `enabled`, else the request unchanged."""

    def __init__(self, app: ASGIApp, *, enabled: bool) -> None:
        self.app = app
        self.enabled = enabled
        self._viewer = Viewer.everyone(operator=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] in ("http", "websocket"):
            scope[VIEWER_KEY] = self._viewer
        await self.app(scope, receive, send)
