"""The state store's engine and transactions: one engine per URL (SQLite pragmas and BEGIN IMMEDIATE, or a
PostgreSQL pool), `tx()`, and the one dialect-aware INSERT ... ON CONFLICT helper every repository uses."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, Executable, Table, create_engine, event
from sqlalchemy.engine import Connection, Row, make_url
from sqlalchemy.exc import DBAPIError

from runtime_ops.database_urls import check_sqlite_folder, sqlite_path
from runtime_ops.errors import UserError

if TYPE_CHECKING:
    from runtime_ops.settings import Settings

_ENGINES: dict[str, Engine] = {}
_READERS: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def utcnow() -> datetime:
    return datetime.now(UTC)


def engine_for(url: str, settings: Settings) -> Engine:
    """The process' engine for `url` (created once, under `settings`' statement timeout; a SQLite file's folder
    is created too when it is the home's)."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            engine = _ENGINES[url] = _create(url, settings)
        return engine


def reader_for(engine: Engine) -> Engine:
    """The engine `fetch()` reads `engine`'s database with. PostgreSQL: an AUTOCOMMIT engine with its own small
    pool and no pre-ping, so a standalone read is one round trip instead of four (ping, BEGIN, the query,
    COMMIT): every `/api/search` reads its key, its alias and its texts. SQLite: the engine itself."""
    if engine.dialect.name != "postgresql":
        return engine
    url = engine.url.render_as_string(hide_password=False)
    with _ENGINES_LOCK:
        reader = _READERS.get(url)
        if reader is None:
            timeout_ms = engine.get_execution_options().get(_STATEMENT_TIMEOUT_MS, 0)
            reader = _READERS[url] = create_engine(
                url,
                isolation_level="AUTOCOMMIT",
                pool_size=5,
                max_overflow=20,
                connect_args=_pg_connect_args(url, timeout_ms),
            )
        return reader


def statement_timeout_ms(settings: Settings) -> int:
    """RUNTIME_OPS_DB_STATEMENT_TIMEOUT in milliseconds (0: none): PostgreSQL cancels a statement that runs, or
    waits on a lock, for longer. Schema migrations run without it (`unbounded`)."""
    timeout = settings.statement_timeout
    return round(timeout.total_seconds() * 1000) if timeout else 0


# The engine's own statement timeout (ms), kept among its execution options so its reader (`reader_for`) uses it.
_STATEMENT_TIMEOUT_MS = "runtime_ops_statement_timeout_ms"


# A connection attempt that gets no answer (a host that drops packets) fails after this many seconds instead of the
# operating system's minutes; a `connect_timeout` in the URL wins.
CONNECT_TIMEOUT_S = 10


def _pg_connect_args(url: str, timeout_ms: int) -> dict[str, Any]:
    # Every state-store statement is short; one that hangs (a lock held by a stuck process, a runaway query) is
    # cancelled by the server instead of holding a step or an API request for ever.
    args: dict[str, Any] = {"options": f"-c statement_timeout={timeout_ms}"}
    if "connect_timeout" not in make_url(url).query:
        args["connect_timeout"] = CONNECT_TIMEOUT_S
    return args


def _sqlite_folder(url: str, settings: Settings) -> None:
    """The folder of a SQLite state file must exist; only the home's (RUNTIME_OPS_HOME) is created, on first use: a
    mistyped path must not become a new, empty store."""
    path = sqlite_path(url)
    if path is None or path.parent.is_dir():
        return
    try:
        check_sqlite_folder(url, settings.resolved_home)
    except ValueError as exc:
        raise UserError(f"state store {url}: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)


def _create(url: str, settings: Settings) -> Engine:
    if not url.startswith("sqlite"):
        timeout_ms = statement_timeout_ms(settings)
        return create_engine(
            url,
            pool_pre_ping=True,
            pool_size=5,
            max_overflow=20,
            connect_args=_pg_connect_args(url, timeout_ms),
            execution_options={_STATEMENT_TIMEOUT_MS: timeout_ms},
        )
    _sqlite_folder(url, settings)
    # Sensors, runs and the CLI are separate processes: wait for the writer instead of failing.
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        # Let SQLAlchemy's "begin" below issue BEGIN IMMEDIATE: a deferred transaction that reads then writes
        # fails at once (SQLITE_BUSY) when another process wrote in between.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
        if not conn.get_execution_options().get(_READ_ONLY):
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextlib.contextmanager
def tx(engine: Engine) -> Iterator[Connection]:
    """One transaction: committed when the block ends, rolled back when it raises."""
    with engine.begin() as conn:
        yield conn


_READ_ONLY = "runtime_ops_read_only"


def fetch(engine: Engine, statement: Executable, params: dict[str, Any] | None = None) -> list[Row[Any]]:
    """The rows of one read statement that stands alone: no transaction around it (no lock, no BEGIN/COMMIT
    round trips). A connection the database dropped (a restart) is noticed by the statement itself instead of
    a ping before every read; the read then runs once more on a fresh connection. Reads that must see one
    snapshot, and every write, use `tx()`."""
    for attempt in (1, 2):
        try:
            with reader_for(engine).connect() as conn:
                conn.execution_options(**{_READ_ONLY: True})
                return list(conn.execute(statement, params or {}))
        except DBAPIError as exc:
            if attempt == 2 or not exc.connection_invalidated:
                raise
    raise AssertionError("unreachable")


def upsert(table: Table, dialect: Connection | Engine | str) -> Any:
    """`INSERT` with `ON CONFLICT` for PostgreSQL and SQLite alike: chain `.on_conflict_do_nothing()` (an
    insert-once; check the rowcount for the outcome) or `.on_conflict_do_update(...)`."""
    name = dialect if isinstance(dialect, str) else dialect.dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def unbounded(conn: Connection) -> None:
    """Lift the statement timeout for the rest of the connection's current transaction (PostgreSQL: schema
    migrations and the wait for their lock); it holds again from the next transaction on."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
