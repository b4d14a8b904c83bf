"""A real PostgreSQL for the store's tests: the server to use, and a schema of one's own.

`PAIR_TEST_POSTGRES_URL` names the server. Unset, the development and CI machines' server is
used when one answers at 127.0.0.1:5432 (trust auth, database `test`); when none does, the
PostgreSQL tests skip with one line saying how to run them. Each test gets its own schema
(`schema_url`): parallel test workers never see each other's tables. `abandon(store)` leaves
a store as a killed process would.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from app.store.base import Store
from app.store.sqlite import SqliteStore

DEFAULT_URL = "postgresql://127.0.0.1:5432/test?user=postgres"
HOW = (
    "no PostgreSQL answers: set PAIR_TEST_POSTGRES_URL=postgresql://user@host:port/db "
    "(or run a server on 127.0.0.1:5432, trust auth, database test)"
)


@functools.cache
def server_url() -> str | None:
    """The server the tests use, or None when none answers."""
    import psycopg

    url = os.environ.get("PAIR_TEST_POSTGRES_URL", "").strip() or DEFAULT_URL
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return None
    return url


def require_server() -> str:
    url = server_url()
    if url is None:
        pytest.skip(HOW)
    return url


def with_schema(url: str, schema: str) -> str:
    """`url` whose connections use `schema` first (libpq's `options=-csearch_path=…`)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query)))


@contextmanager
def schema_url() -> Iterator[str]:
    """A URL on a fresh schema of the test server, dropped afterwards."""
    import psycopg

    url = require_server()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # a name of this module's own making
    try:
        yield with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


async def abandon(store: Store) -> None:
    """As if the process holding `store` was killed: its connections gone, its running jobs
    still marked running (on PostgreSQL, their leases no longer renewed)."""
    if isinstance(store, SqliteStore):
        await store.close()
        return
    from app.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    await store._abandon()
