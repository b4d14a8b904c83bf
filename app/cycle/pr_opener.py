"""The engine's `PrOpener` over a code host: a batch's PR group, pushed and opened mechanically.

For a batch (not a card: cards open their own PR after their first apply), the engine has
already built the group's branch from its changes' recorded work (`app/engine/work_line.py`,
`app/cycle/work_line_git.py`). The opener pushes that branch through the host (the agent never
holds a forge credential) and opens a draft PR — or finds the one already open for the branch,
so a resumed step never opens a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.engine.step import PrRequest
from hosts.base import Host
from hosts.errors import NotFound


@dataclass(frozen=True)
class HostPrOpener:
    """Open PR groups on the host `connect()` returns, from the checkout at `root`.

    The host is built on first use: most steps open no PR, and building one may create the
    local forge's directory or need credentials.
    """

    connect: Callable[[], Host]
    root: Path

    async def open_pr(self, request: PrRequest) -> str:
        """Push the group's branch and open (or find) its draft PR; returns `#<n>`."""
        host = self.connect()
        # Forced: a group branch is rebuilt from the journal, onto a base that may have moved.
        await host.push_branch(self.root, request.head_branch, force=True)
        try:
            pull = await host.open_pull(
                request.head_branch, request.base_branch, request.title, request.body, draft=True
            )
        except NotFound:
            if host.name != "local":
                raise
            # The local forge starts empty: it mirrors the project's base branch on first use.
            await host.push_branch(self.root, request.base_branch)
            pull = await host.open_pull(
                request.head_branch, request.base_branch, request.title, request.body, draft=True
            )
        return f"#{pull.number}" + (f" {pull.url}" if pull.url else "")
