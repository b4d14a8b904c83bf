"""The App's store on a PostgreSQL server, for several `pairbot serve` replicas: `PostgresStore`
(store.py) over its pools (pools.py), its schema (schema.py), its deliveries' one statement
(deliveries.py) and its job queue (queue.py).

Selected by `PAIR_STORE=postgresql://…` (docs/app.md, Replicas on PostgreSQL); psycopg is an
optional extra (`pip install 'pairbot[postgres]'`) and only this package imports it.
"""

from app.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
