"""Rows as column arrays: how the PostgreSQL store sends a batch of any size in one statement.

`unnest(%s::int[], %s::text[], …)` turns the arrays back into rows: ONE statement text for
every batch size, prepared once per connection and planned once (a text per batch size would
be prepared and planned per size and connection).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows as `width` column lists: the arrays `unnest` turns back into rows."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width
