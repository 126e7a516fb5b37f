"""Standalone reads (`runtime_ops.store.engine.fetch`): what every `/api/search` reads (its key, the serving alias,
its hits' texts) runs outside any transaction. On SQLite such a read does not wait for a writer's lock; on
PostgreSQL it needs no ping before it and still survives a connection the server dropped."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

import psycopg2
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store.engine import reader_for


def test_sqlite_reads_do_not_wait_for_a_writer(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    url = f"sqlite:///{db}"
    store = open_store(url, get_settings(), pipeline="demo")
    key = store.api_keys.create("reader", ["search"]).key
    assert store.api_keys.verify(key) is not None  # its first use is noted now; the next verify only reads

    writer = sqlite3.connect(db, timeout=1, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock (a long ingest transaction)
        writer.execute("UPDATE api_keys SET name = 'renamed' WHERE 1 = 0")
        started = time.monotonic()
        found = store.api_keys.verify(key)
        serving = store.indexes.current_index()
        texts = store.documents.chunk_texts([1, 2, 3])
        waited = time.monotonic() - started
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert found is not None and found.name == "reader"
    assert serving is None and texts == {}
    # A transaction would have waited up to its 30 s busy timeout for the writer and then failed.
    assert waited < 5, f"the reads waited {waited:.1f} s for the writer's lock"


def test_postgres_reads_survive_a_dropped_connection(postgres_url: str) -> None:
    store = open_store(postgres_url, get_settings(), pipeline="demo")
    key = store.api_keys.create("reader", ["search"]).key
    assert store.api_keys.verify(key) is not None
    reader = reader_for(store.engine)
    pool = reader.pool
    assert isinstance(pool, QueuePool) and pool.checkedin() >= 1  # the pooled connection the next read reuses

    # The server ends every session of this database but ours (a restart, a failover, an idle-session reaper).
    url = make_url(postgres_url)
    admin = psycopg2.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, dbname=url.database
    )
    admin.autocommit = True
    with contextlib.closing(admin), admin.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = cur.fetchone()
        assert row is not None and row[0] >= 1

    # No ping before the read: the read itself meets the dead connection, and runs again on a fresh one.
    found = store.api_keys.verify(key)
    assert found is not None and found.name == "reader"
    assert store.indexes.current_index() is None
    assert store.documents.chunk_texts([1]) == {}


def test_postgres_reads_run_outside_a_transaction(postgres_url: str) -> None:
    store = open_store(postgres_url, get_settings(), pipeline="demo")
    reader = reader_for(store.engine)
    assert reader is not store.engine
    with reader.connect() as conn:
        # AUTOCOMMIT: no BEGIN before a read and no COMMIT after it (two round trips each request saves).
        assert getattr(conn.connection.dbapi_connection, "autocommit", None) is True
    assert (
        reader_for(open_store(postgres_url, get_settings(), pipeline="beta").engine) is reader
    )  # one pool per database
