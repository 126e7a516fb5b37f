"""Alembic environment: runs on a connection handed in by `runtime_ops.store.migrate` (with the settings it hands in,
which 0013 reads the audit key from), or on the URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from runtime_ops.store.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    # render_as_batch lets the same migrations ALTER tables on SQLite.
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    url = config.get_main_option("sqlalchemy.url")
    assert url is not None, "alembic: no connection and no sqlalchemy.url"
    engine = create_engine(url)
    with engine.connect() as conn:
        _run(conn)
