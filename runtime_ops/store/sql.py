"""Small SQL helpers shared by the store's modules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection


def utcnow() -> datetime:
    return datetime.now(UTC)


def insert_ignore(table: Table, conn: Connection) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING on PostgreSQL and SQLite alike (check rowcount for the outcome)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing()
