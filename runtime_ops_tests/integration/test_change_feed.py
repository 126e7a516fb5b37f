"""The corpus change feed on SQLite and PostgreSQL: documents becoming current or not are recorded with their
change, seqs follow commit order (a reader never sees seq N+1 before N), and the tables match migration 0010."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from runtime_ops.settings import get_settings
from runtime_ops.store import NewObject, StateStore, open_store


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    url = f"sqlite:///{tmp_path / 'state.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    return open_store(url, get_settings(), pipeline="alpha")


def _ingest(store: StateStore, key: str, version: str, text_: str = "hello world") -> int:
    batch = store.ledger.record_batch("test://", [NewObject(key, version, len(text_), None)])
    assert batch is not None
    [doc] = [d for d in store.documents.batch_documents(batch["id"]) if d["key"] == key]
    store.documents.store_chunks(doc["id"], [text_])
    return int(doc["id"])


def test_current_superseded_and_deleted_documents_are_in_the_feed(store: StateStore) -> None:
    a1 = _ingest(store, "a.md", "v1")
    b1 = _ingest(store, "b.md", "v1")
    a2 = _ingest(store, "a.md", "v2")  # supersedes a1
    assert store.documents.remove_key("b.md", reason="gone") == b1
    assert store.documents.remove_key("b.md", reason="gone") is None  # nothing current any more
    feed = [(c.seq, c.document_id, c.op) for c in store.changes.since(0)]
    assert feed == [(1, a1, "add"), (2, b1, "add"), (3, a1, "remove"), (4, a2, "add"), (5, b1, "remove")]
    assert store.changes.head() == 5 and store.changes.pending(3) == 2
    assert [c.seq for c in store.changes.since(2, limit=2)] == [3, 4]
    # Another pipeline has its own feed.
    assert store.scoped("beta").changes.head() == 0


def test_seqs_follow_commit_order_under_concurrent_writers_on_postgresql(postgres_url: str) -> None:
    # (SQLite serialises writers: there is no interleaving to order there.)
    store = open_store(postgres_url, get_settings(), pipeline="alpha")
    first = _ingest(store, "first.md", "v1")
    # Writer A takes the next seq and holds its transaction open; writer B must wait for A's commit before it
    # gets a seq, so no reader can see B's change while A's lower one is still invisible.
    from runtime_ops.store.corpus.changes import append_changes

    holding = threading.Event()
    release = threading.Event()

    def writer_a() -> None:
        with store.engine.begin() as conn:
            append_changes(conn, "alpha", [(first, "remove")])
            holding.set()
            release.wait(10)

    a = threading.Thread(target=writer_a)
    a.start()
    assert holding.wait(10)
    b_done = threading.Event()
    b = threading.Thread(target=lambda: (_ingest(store, "second.md", "v1"), b_done.set()))
    b.start()
    time.sleep(0.5)
    assert not b_done.is_set(), "B took a seq while A's lower one was uncommitted"
    assert [c.seq for c in store.changes.since(0)] == [1]
    release.set()
    a.join(10)
    b.join(10)
    assert [(c.seq, c.op) for c in store.changes.since(0)] == [(1, "add"), (2, "remove"), (3, "add")]


def test_feed_and_index_tables_match_their_migration(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from runtime_ops.store import schema as t

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings())
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
        names = ("corpus_changes", "change_counters", "retrieval_indexes")
        assert [d for d in diffs if any(n in repr(d) for n in names)] == []
        assert conn.execute(text("SELECT count(*) FROM change_counters")).scalar() == 0
