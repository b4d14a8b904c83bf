"""The App's store in one SQLite file, the embedded default: `SqliteStore` (store.py) over one
connection (connection.py), its schema (schema.py), its deliveries' writes (deliveries.py) and
its job queue (queue.py)."""

from app.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
