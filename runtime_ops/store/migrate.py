"""Bring a database to the newest schema with Alembic, safely when several processes start at once."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Engine, text

from runtime_ops.store.engine import unbounded

if TYPE_CHECKING:
    from runtime_ops.settings import Settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x72756E6F7073  # "runops": one advisory lock id for schema migrations


def _config():  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head() or ""


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {r.revision for r in ScriptDirectory.from_config(_config()).walk_revisions()}


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn).get_current_revision()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            unbounded(conn)  # the transaction this connection holds until the lock is released
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})  # waits out another migration
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
                conn.commit()
    else:
        db_path = engine.url.database
        if not db_path or db_path == ":memory:":
            yield
            return
        with open(f"{db_path}.migrate.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


_MIGRATED: set[str] = set()


def upgrade(engine: Engine, settings: Settings, revision: str = "head") -> None:
    """Run the migrations up to `revision` under the migration lock (tests stop at an older one). `settings` give
    a migration what it needs beyond the schema (0013: the audit key)."""
    _migrate(engine, settings, "upgrade", revision)


def downgrade(engine: Engine, settings: Settings, revision: str) -> None:
    """Undo the migrations above `revision` under the migration lock (tests and a rollback of a release)."""
    _migrate(engine, settings, "downgrade", revision)


def _migrate(engine: Engine, settings: Settings, direction: Literal["upgrade", "downgrade"], revision: str) -> None:
    from alembic import command

    with _migration_lock(engine):
        cfg = _config()
        with engine.connect() as conn:
            sqlite = engine.dialect.name == "sqlite"
            if sqlite:
                # Batch mode recreates tables (copy, drop, rename): with foreign keys enforced, dropping a parent
                # table would fail. The pragma only takes outside a transaction, hence before `begin`.
                conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
            try:
                with conn.begin():
                    unbounded(conn)
                    cfg.attributes["connection"] = conn
                    cfg.attributes["settings"] = settings
                    if direction == "upgrade":
                        command.upgrade(cfg, revision)
                    else:
                        command.downgrade(cfg, revision)
                    if sqlite:
                        broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                        if broken:
                            raise RuntimeError(f"migration left foreign keys broken: {broken[:5]}")
            finally:
                if sqlite:
                    conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]


def upgrade_to_head(engine: Engine, settings: Settings, *, on_create: Callable[[], object] | None = None) -> None:
    """Migrate to the newest schema (once per process and URL); `on_create` runs first when the database has no
    schema yet, i.e. when the store is being created."""
    key = str(engine.url)
    if key in _MIGRATED:
        return
    head = head_revision()
    current = current_revision(engine)
    if current != head:
        if current is None and on_create is not None:
            on_create()
        upgrade(engine, settings)
    _MIGRATED.add(key)
