"""The PostgreSQL store's schema: its migrations, and applying the ones a database has not seen.

`MIGRATIONS` is a versioned list of DDL, applied in one transaction under an advisory lock
(replicas starting together migrate once) and recorded in `schema_version`. A schema written
by a newer pairbot is refused.
"""

from __future__ import annotations

from typing import Any, cast

import psycopg

from app.errors import OperatorError

# The advisory lock key migrations run under (any constant; "pairbot" as ASCII bytes).
_MIGRATION_LOCK = 0x70616972626F74

# Each entry is one migration; its index + 1 is the version `schema_version` records.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE deliveries (
            source      TEXT NOT NULL,
            id          TEXT NOT NULL,
            event       TEXT NOT NULL,
            action      TEXT,
            status      TEXT NOT NULL,
            note        TEXT NOT NULL DEFAULT '',
            jobs        INTEGER NOT NULL DEFAULT 0,
            received_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (source, id)
        )
        """,
        "CREATE INDEX deliveries_received ON deliveries (received_at)",
        """
        CREATE TABLE jobs (
            id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            delivery_id  TEXT NOT NULL,
            kind         TEXT NOT NULL
                         CHECK (kind IN ('command', 'scope-decision', 'head-moved')),
            source       TEXT NOT NULL,
            repo         TEXT NOT NULL,
            installation BIGINT,
            target       TEXT NOT NULL CHECK (target IN ('card', 'pull')),
            number       INTEGER NOT NULL,
            dedupe_key   TEXT NOT NULL UNIQUE,
            serial_key   TEXT NOT NULL,
            request      TEXT NOT NULL,
            state        TEXT NOT NULL DEFAULT 'queued'
                         CHECK (state IN ('queued', 'running', 'done', 'failed')),
            stage        TEXT NOT NULL DEFAULT '',
            attempts     INTEGER NOT NULL DEFAULT 0,
            not_before   DOUBLE PRECISION NOT NULL DEFAULT 0,
            result       TEXT NOT NULL DEFAULT '',
            created_at   DOUBLE PRECISION NOT NULL,
            updated_at   DOUBLE PRECISION NOT NULL,
            owner        TEXT NOT NULL DEFAULT '',
            lease_until  DOUBLE PRECISION NOT NULL DEFAULT 0
        )
        """,
        # Open jobs only: finished ones stay for the record but out of the queue's indexes.
        "CREATE INDEX jobs_open ON jobs (serial_key, id) WHERE state IN ('queued', 'running')",
        "CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued'",
        "CREATE INDEX jobs_running ON jobs (owner, lease_until) WHERE state = 'running'",
        "CREATE INDEX jobs_repo ON jobs (lower(repo), id)",
        """
        CREATE TABLE commands (
            job_id       BIGINT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
            repo         TEXT NOT NULL,
            number       INTEGER NOT NULL,
            verb         TEXT NOT NULL,
            args         TEXT NOT NULL,
            author_id    TEXT NOT NULL,
            author_login TEXT NOT NULL,
            comment_id   TEXT NOT NULL,
            comment_url  TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE installations (
            id         BIGINT PRIMARY KEY,
            account    TEXT NOT NULL,
            repos      TEXT NOT NULL DEFAULT '[]',
            suspended  BOOLEAN NOT NULL DEFAULT FALSE,
            updated_at DOUBLE PRECISION NOT NULL
        )
        """,
    ),
    (
        # The claim's two tests per candidate job, each one probe of a small partial index:
        # the oldest queued job of its key (jobs_queued_key), nothing of its key running
        # (jobs_running_key). They replace jobs_open and jobs_running: with those, a plan
        # could hash the whole table for the first test, and read every running job's entry
        # for the second. The lease statements that read running jobs by owner or by lease run
        # once a second at most.
        "CREATE INDEX jobs_queued_key ON jobs (serial_key, id) WHERE state = 'queued'",
        "CREATE INDEX jobs_running_key ON jobs (serial_key) WHERE state = 'running'",
        "DROP INDEX jobs_open",
        "DROP INDEX jobs_running",
    ),
)


async def migrate(conn: psycopg.AsyncConnection[Any], where: str) -> None:
    """Apply the migrations this database has not seen, in one transaction under an advisory
    lock: replicas starting at once wait for each other, and the second finds nothing to do."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = await (await conn.execute("SELECT max(version) FROM schema_version")).fetchone()
        version = int(row[0]) if row is not None and row[0] is not None else 0
        if version > len(MIGRATIONS):
            raise OperatorError(
                f"{where}: the store's schema version is {version}, newer than this pairbot "
                f"knows ({len(MIGRATIONS)}); run the pairbot that wrote it, or point PAIR_STORE "
                "elsewhere"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            for statement in MIGRATIONS[number - 1]:
                await conn.execute(cast(Any, statement))
            await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (number,))
