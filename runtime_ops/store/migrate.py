"""Bring a database to the newest schema with Alembic, safely when several processes start at once."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, text

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


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn).get_current_revision()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
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


def upgrade_to_head(engine: Engine) -> None:
    key = str(engine.url)
    if key in _MIGRATED:
        return
    head = head_revision()
    if current_revision(engine) != head:
        from alembic import command

        with _migration_lock(engine):
            if current_revision(engine) != head:
                cfg = _config()
                with engine.begin() as conn:
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, "head")
    _MIGRATED.add(key)
