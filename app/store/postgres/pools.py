"""The PostgreSQL store's connections: one to migrate or listen, and the replica's two pools.

Every replica keeps two pools of connections (`psycopg_pool.AsyncConnectionPool`), each in
autocommit mode: the edge's (and the status pages'), whose commits wait for the WAL on disk,
and the worker's, whose bookkeeping commits do not (`synchronous_commit = off`: a crash of the
server may undo its last fraction of a second, and those jobs run again — SqliteStore's
`synchronous=NORMAL` for the same writes). A replica holds one more connection to LISTEN.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from app.errors import OperatorError
from app.store.urls import redact_url

Pool = AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]


async def connect(url: str, timeout_s: float) -> psycopg.AsyncConnection[Any]:
    """One autocommit connection (not pooled)."""
    return await psycopg.AsyncConnection.connect(
        url, autocommit=True, connect_timeout=max(1, int(timeout_s))
    )


async def connect_or_explain(url: str, timeout_s: float) -> psycopg.AsyncConnection[Any]:
    """`connect`, its failure an operator error that names the server (never the password)."""
    try:
        return await connect(url, timeout_s)
    except psycopg.Error as err:
        reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise OperatorError(
            f"PAIR_STORE: cannot connect to PostgreSQL at {redact_url(url)}: {reason}"
        ) from None


def new_pool(url: str, name: str, size: int, *, durable: bool) -> Pool:
    """A pool (opened by the caller) whose sessions commit durably or not."""

    async def configure(conn: psycopg.AsyncConnection[DictRow]) -> None:
        # A delivery's commit waits for the WAL on disk: answered 2xx, it survives a crash
        # of the database server. The worker's bookkeeping (claim, stage, outcome, leases)
        # does not, as SqliteStore's does not: a crash of the server may undo its last
        # fraction of a second, and those jobs run again (at least once). JIT off: the
        # queue's statements are index probes, never worth compiling. Generic plans: each
        # statement is planned once per connection, not on each of its first five runs
        # (its plan does not depend on the values: every lookup is by key or partial index).
        sync = "on" if durable else "off"
        await conn.execute(
            f"SET synchronous_commit = {sync}; SET jit = off; "
            "SET plan_cache_mode = force_generic_plan",
            prepare=False,
        )

    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=size,
        # Every statement is prepared on its first run: the edge's and the worker's run
        # thousands of times, and a prepared one skips the parse and plan.
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0},
        configure=configure,
        open=False,
        name=name,
    )


async def open_pools(pools: tuple[Pool, ...], timeout_s: float) -> None:
    """Open every pool, waiting for a first connection each; close them all if one fails."""
    try:
        for pool in pools:
            await pool.open(wait=True, timeout=timeout_s)
    except BaseException:
        for pool in pools:
            await pool.close()
        raise
