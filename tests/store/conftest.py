"""The store contract suite's backends: each contract test runs on SQLite and on PostgreSQL.

`make_store(**options)` builds a store of the test's backend; every store a test builds shares
one database (a SQLite file in tmp_path, or a PostgreSQL schema of the test's own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.store.base import Store
from app.store.sqlite import SqliteStore
from tests.support.postgres import schema_url

StoreFactory = Callable[..., Store]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, tmp_path: Path) -> Iterator[StoreFactory]:
    if backend == "sqlite":
        path = tmp_path / "s.sqlite3"

        def sqlite(**options: Any) -> Store:
            options.pop("lease_s", None)  # one process owns the file: no leases
            return SqliteStore(path, **options)

        yield sqlite
        return
    from app.store.postgres import PostgresStore

    with schema_url() as url:

        def postgres(**options: Any) -> Store:
            return PostgresStore(url, **options)

        yield postgres
