"""The GitHub adapter: `GitHubHost` over githubkit, one module per job.

    credentials.py   GitHubCredentials (App, token, Actions token) and GitHubOptions: what a
                     host is built from; secrets that never print
    auth.py          run-time credentials: App JWTs, installation tokens minted and cached
    client.py        the githubkit client, configured once (timeouts, no auto-retry, no cache)
    transport.py     the HTTP edge: the rate-limit window and conditional reads
    translate.py     githubkit/httpx errors → `hosts.errors`
    payloads.py      GitHub's JSON → host-neutral models
    push.py          `git push` with the token in environment config (through `hosts.git`)
    session.py       what the hosts of one installation share: the connection pool, the
                     token, the rate window, the write pacer (the App keeps one per
                     installation for its life)
    connection.py    what every part of the host stands on: credentials, clients, the call
                     discipline (`hosts.calls`), identity
    issues.py        cards (issues) and state labels
    comments.py      issue comments, reactions, a scope decision by reference
    pulls.py         open, read and merge pull requests
    checks.py        the `pair-review` status and the other checks on a head
    host.py          GitHubHost: the `Host` operations, the parts above put together

The public names are re-exported here lazily: `from hosts.github import GitHubCredentials`
loads neither githubkit nor httpx (the App's web process builds credentials before it needs a
host), and nothing here ever imports the Azure DevOps SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hosts.github.connection import ACTIONS_BOT, GITHUB_API
    from hosts.github.credentials import GitHubCredentials, GitHubOptions
    from hosts.github.host import GitHubHost

__all__ = ["ACTIONS_BOT", "GITHUB_API", "GitHubCredentials", "GitHubHost", "GitHubOptions"]

_WHERE = {
    "ACTIONS_BOT": "hosts.github.connection",
    "GITHUB_API": "hosts.github.connection",
    "GitHubHost": "hosts.github.host",
    "GitHubCredentials": "hosts.github.credentials",
    "GitHubOptions": "hosts.github.credentials",
}


def __getattr__(name: str) -> Any:
    """PEP 562: import the module that defines `name` on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'hosts.github' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
