"""The pgvector store on PostgreSQL: the connection, the `runtime_ops_vectors` schema and its tuning table (set up
once per process), and the index tables it creates, opens, drops and lists. What is done with one index is
`vectors/pgvector.py` (`PgVectorIndex`). The database may be the state store's or one of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from runtime_ops.vectors.base import IndexMissing, IndexName, VectorIndex, VectorStore, VectorStoreError
from runtime_ops.vectors.pgvector import SCHEMA, TUNING, PgVectorIndex, delta_table, row_estimate


def _exists(cur: Any, table: str) -> bool:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f'{SCHEMA}."{table}"',))
    return bool(cur.fetchone()[0])


class PgVectorStore(VectorStore):
    kind = "pgvector"

    def __init__(self, url: str) -> None:
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://") :]
        self._url = make_url(url)
        self._engine: Engine = create_engine(self._url, pool_pre_ping=True, pool_size=5, max_overflow=10)
        self._ready = False
        self._lock = threading.Lock()

    def describe(self) -> str:
        u = self._url
        return f"pgvector://{u.host}:{u.port or 5432}/{u.database}"

    @contextmanager
    def raw(self, *, autocommit: bool = False) -> Iterator[Any]:
        """A psycopg2 cursor in one transaction (committed at the end of the block, rolled back on error)."""
        self._setup()
        conn = self._engine.raw_connection()
        try:
            dbapi = conn.driver_connection
            assert dbapi is not None
            dbapi.autocommit = autocommit
            try:
                with dbapi.cursor() as cur:
                    yield cur
                if not autocommit:
                    dbapi.commit()
            except BaseException:
                if not autocommit:
                    dbapi.rollback()
                raise
            finally:
                if autocommit and not dbapi.closed:
                    dbapi.autocommit = False
        except (OperationalError, DBAPIError, psycopg2.Error) as exc:
            raise VectorStoreError(f"pgvector store {self.describe()}: {exc}".strip()) from exc
        finally:
            conn.close()

    def estimated_rows(self, qualified: str) -> int:
        with self.raw() as cur:
            return row_estimate(cur, qualified)

    def _setup(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            try:
                with self._engine.begin() as conn:
                    # Serialise first-time setup across processes (CREATE ... IF NOT EXISTS races otherwise).
                    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('runtime_ops_vectors'))"))
                    conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
                    conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
                    conn.execute(
                        text(
                            f"CREATE TABLE IF NOT EXISTS {TUNING} (table_name text PRIMARY KEY, "
                            "ef_search integer NOT NULL, recall real NOT NULL, n_rows bigint NOT NULL, "
                            "calibrated_at timestamptz NOT NULL)"
                        )
                    )
            except ProgrammingError as exc:
                raise VectorStoreError(
                    f"pgvector store {self.describe()}: cannot enable the vector extension ({exc.orig}); "
                    "use a PostgreSQL with pgvector installed (e.g. the pgvector/pgvector:pg16 image) and let a "
                    "superuser run CREATE EXTENSION vector once"
                ) from None
            except OperationalError as exc:
                raise VectorStoreError(f"pgvector store {self.describe()} is unreachable: {exc.orig}") from None
            self._ready = True

    def _dim_of(self, cur: Any, name: IndexName) -> int | None:
        cur.execute(
            "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding'",
            (SCHEMA, name.table),
        )
        row = cur.fetchone()
        return None if row is None else int(row[0])

    def open(self, name: IndexName, dim: int, *, create: bool = False) -> VectorIndex:
        with self.raw() as cur:
            have = self._dim_of(cur, name)
            if have is None:
                if not create:
                    raise IndexMissing(f"no vector index {name.table} in {self.describe()}")
                cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name.table,))
                table = f'{SCHEMA}."{name.table}"'
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (chunk_id bigint PRIMARY KEY, "
                    f"document_id bigint NOT NULL, embedding vector({int(dim)}) NOT NULL)"
                )
                cur.execute(f'CREATE INDEX IF NOT EXISTS "{name.table}_doc" ON {table} (document_id)')
                have = self._dim_of(cur, name)
            if have is not None and not _exists(cur, delta_table(name)):
                # Made with the index (or later, for an index of an earlier release): same columns, no graph.
                cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name.table,))
                delta = f'{SCHEMA}."{delta_table(name)}"'
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {delta} (chunk_id bigint PRIMARY KEY, "
                    f"document_id bigint NOT NULL, embedding vector({int(have)}) NOT NULL)"
                )
                cur.execute(f'CREATE INDEX IF NOT EXISTS "{delta_table(name)}_doc" ON {delta} (document_id)')
        if have != dim:
            raise VectorStoreError(f"vector index {name.table} holds {have}-dimensional vectors, not {dim}")
        return PgVectorIndex(self, name, dim)

    def drop(self, name: IndexName) -> bool:
        with self.raw() as cur:
            if self._dim_of(cur, name) is None:
                return False
            cur.execute(f'DROP TABLE IF EXISTS {SCHEMA}."{name.table}", {SCHEMA}."{delta_table(name)}"')
            cur.execute(f"DELETE FROM {TUNING} WHERE table_name = %s", (name.table,))
            return True

    def names(self, pipeline: str | None = None) -> list[IndexName]:
        with self.raw() as cur:
            cur.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'index_tuning'", (SCHEMA,)
            )
            found = [n for (t,) in cur.fetchall() if (n := IndexName.from_table(t)) is not None]
        return sorted(n for n in found if pipeline is None or n.pipeline == pipeline)

    def close(self) -> None:
        self._engine.dispose()
