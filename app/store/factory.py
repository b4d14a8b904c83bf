"""Which store PAIR_STORE names: the SQLite file (embedded default) or a PostgreSQL database.

`make_store(path, url)` imports PostgreSQL's only when it builds it: the SQLite path never loads
psycopg, an optional extra (`pip install 'pairbot[postgres]'`). The factory alone knows both
backends; neither imports it (`redact_url` lives in app/store/urls.py).
`alone_across_replicas(store, tick)` keeps replicas sharing a store from ticking at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from app.errors import ConfigError
from app.store.base import Store
from app.store.sqlite import SqliteStore
from app.store.urls import redact_url

__all__ = ["alone_across_replicas", "make_store", "redact_url"]


def make_store(path: Path, url: str | None = None, *, lease_s: float = 60.0) -> Store:
    """`PostgresStore(url, lease_s=…)` when a URL is given, else `SqliteStore(path)`."""
    if url is None:
        return SqliteStore(path)
    try:
        # The one lazy import: psycopg is an optional extra, and only a URL needs it.
        from app.store.postgres import PostgresStore  # noqa: PLC0415
    except ImportError as err:  # pragma: no cover - the dev install has the extra
        raise ConfigError(
            f"PAIR_STORE={redact_url(url)!r} needs the PostgreSQL extra: "
            f"pip install 'pairbot[postgres]' ({err.name} is missing)"
        ) from None
    return PostgresStore(url, lease_s=lease_s)


def alone_across_replicas(
    store: Store, tick: Callable[[], Awaitable[bool]], *, name: str = "tick"
) -> Callable[[], Awaitable[bool]]:
    """`tick` run by one replica at a time when the store is shared (PostgreSQL); a replica
    whose turn finds another ticking skips it (an idle tick). SQLite serves one process:
    `tick` as is. `name` is the lock's: loops with different names do not wait on each other
    (the catch-up of lost deliveries, app.web.catchup, is "catchup")."""
    run_alone = getattr(store, "run_alone", None)
    if run_alone is None:
        return tick

    async def alone() -> bool:
        return bool(await run_alone(name, tick))

    return alone
