"""The SQLite store's schema: its migrations, and applying the ones a file has not seen.

`PRAGMA user_version` counts the migrations applied; each runs in its own transaction, so a
crash mid-migration leaves the old schema. A store written by a newer pairbot is refused (an
operator error), never downgraded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.errors import OperatorError

# Each entry is one migration; its index + 1 is the `user_version` it leaves behind.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE deliveries (
        source      TEXT NOT NULL,
        id          TEXT NOT NULL,
        event       TEXT NOT NULL,
        action      TEXT,
        status      TEXT NOT NULL,
        note        TEXT NOT NULL DEFAULT '',
        jobs        INTEGER NOT NULL DEFAULT 0,
        received_at REAL NOT NULL,
        PRIMARY KEY (source, id)
    ) WITHOUT ROWID;
    CREATE INDEX deliveries_received ON deliveries (received_at);

    CREATE TABLE jobs (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id  TEXT NOT NULL,
        kind         TEXT NOT NULL CHECK (kind IN ('command', 'scope-decision', 'head-moved')),
        source       TEXT NOT NULL,
        repo         TEXT NOT NULL,
        installation INTEGER,
        target       TEXT NOT NULL CHECK (target IN ('card', 'pull')),
        number       INTEGER NOT NULL,
        dedupe_key   TEXT NOT NULL UNIQUE,
        serial_key   TEXT NOT NULL,
        request      TEXT NOT NULL,
        state        TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed')),
        stage        TEXT NOT NULL DEFAULT '',
        attempts     INTEGER NOT NULL DEFAULT 0,
        not_before   REAL NOT NULL DEFAULT 0,
        result       TEXT NOT NULL DEFAULT '',
        created_at   REAL NOT NULL,
        updated_at   REAL NOT NULL
    );
    CREATE INDEX jobs_queue ON jobs (state, serial_key, id);

    CREATE TABLE commands (
        job_id       INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
        repo         TEXT NOT NULL,
        number       INTEGER NOT NULL,
        verb         TEXT NOT NULL,
        args         TEXT NOT NULL,
        author_id    TEXT NOT NULL,
        author_login TEXT NOT NULL,
        comment_id   TEXT NOT NULL,
        comment_url  TEXT NOT NULL
    );

    CREATE TABLE installations (
        id         INTEGER PRIMARY KEY,
        account    TEXT NOT NULL,
        repos      TEXT NOT NULL DEFAULT '[]',
        suspended  INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    );
    """,
    # The queue's indexes cover open jobs only. Finished jobs stay in the table for the record
    # but leave these indexes, which so stay a few pages; finishing a job used to rewrite pages
    # of an index over every job ever run.
    """
    DROP INDEX jobs_queue;
    CREATE INDEX jobs_open ON jobs (state, serial_key, id)
        WHERE state IN ('queued', 'running');
    CREATE INDEX jobs_open_order ON jobs (state)
        WHERE state IN ('queued', 'running');
    """,
)


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations this store has not seen, each in its own transaction."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > len(MIGRATIONS):
        raise OperatorError(
            f"{path}: the store's schema version is {version}, newer than this pairbot knows "
            f"({len(MIGRATIONS)}); run the pairbot that wrote it, or point PAIR_STORE elsewhere"
        )
    for number in range(version + 1, len(MIGRATIONS) + 1):
        try:
            # executescript would COMMIT an open transaction first: the script carries its own.
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]}\nPRAGMA user_version = {number};\n"
                "COMMIT;"
            )
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
