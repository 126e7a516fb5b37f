"""A new state store in a test starts from a copy of the newest schema, migrated once per test process.

Creating a store runs every Alembic migration (SQLite rebuilds a table per batch operation): 0.5-2 s, paid again by
each of the hundreds of tests that open a fresh database. `install` wraps `runtime_ops.store.migrate.upgrade` in
this process only: a migration to head of an EMPTY database copies a template instead, which the real migrations
built on first use (per SQLite, and per PostgreSQL server). Everything else stays real: the template is the
migrations' own output, `upgrade_to_head` still creates the audit key of a store being created (its `on_create`
runs before `upgrade`), a database that already has tables or a partial migration (`revision` other than head:
the migration tests) runs Alembic as before, and so does every subprocess (CLI, API server, Dagster processes).

- SQLite: the template file is copied into the test's database with SQLite's online backup API (page by page,
  through the engine's own connection: no file is replaced under an open connection).
- PostgreSQL: the empty test database is dropped and created again from the template (`CREATE DATABASE ...
  TEMPLATE`, a file copy on the server); the engine's pool is disposed first, so it reconnects to the new one.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import URL

import runtime_ops.store.migrate as migrate

_lock = threading.Lock()
_sqlite_template: Path | None = None
_pg_templates: dict[tuple[str | None, int | None], str] = {}


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = migrate.upgrade

    def upgrade(engine: Engine, settings: Any, revision: str = "head") -> None:
        if revision != "head" or engine.url.database in (None, "", ":memory:") or inspect(engine).get_table_names():
            real(engine, settings, revision)
        elif engine.dialect.name == "sqlite":
            _copy_sqlite(engine, _sqlite(real, settings))
        elif engine.dialect.name == "postgresql":
            _recreate_postgres(engine, _postgres(real, settings, engine.url))
        else:
            real(engine, settings, revision)

    monkeypatch.setattr(migrate, "upgrade", upgrade)


def _sqlite(real: Callable[..., None], settings: Any) -> Path:
    global _sqlite_template
    with _lock:
        if _sqlite_template is None:
            path = Path(tempfile.mkdtemp(prefix="runtime_ops_schema_")) / "template.db"
            engine = create_engine(f"sqlite:///{path}")
            try:
                real(engine, settings)
            finally:
                engine.dispose()
            _sqlite_template = path
        return _sqlite_template


def _copy_sqlite(engine: Engine, template: Path) -> None:
    source = sqlite3.connect(str(template))
    raw = engine.raw_connection()
    try:
        source.backup(raw.driver_connection)  # type: ignore[arg-type]
    finally:
        raw.close()
        source.close()


def _admin_execute(url: URL, *statements: str) -> None:
    """Run `statements` in turn on the server of `url`, connected to its maintenance database."""
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        admin.dispose()


def _postgres(real: Callable[..., None], settings: Any, url: URL) -> str:
    server = (url.host, url.port)
    with _lock:
        if server not in _pg_templates:
            name = f"runtime_ops_schema_{os.getpid()}"  # one per test process (each xdist worker has its servers)
            _admin_execute(url, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
            engine = create_engine(url.set(database=name))
            try:
                real(engine, settings)
            finally:
                engine.dispose()  # CREATE DATABASE ... TEMPLATE needs no one connected to the template
            _pg_templates[server] = name
        return _pg_templates[server]


def _recreate_postgres(engine: Engine, template: str) -> None:
    database = engine.url.database
    engine.dispose()
    _admin_execute(
        engine.url, f'DROP DATABASE "{database}" WITH (FORCE)', f'CREATE DATABASE "{database}" TEMPLATE "{template}"'
    )
