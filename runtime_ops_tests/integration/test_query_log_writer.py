"""The query log's writer against a real SQLite store: a batch the store cannot take now stays in memory and is
written once it can (in order, nothing lost, nothing twice); a record the store refuses for its data is dropped and
counted alone, the rest of its batch written."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from runtime_ops.api.query_log_writer import QueryLogWriter
from runtime_ops.online.query_records import QueryRecord, ShownItem
from runtime_ops.online.request_ids import new_request_id
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store


def _record(at: datetime, request_id: str | None = None) -> QueryRecord:
    return QueryRecord(request_id or new_request_id(at), "demo", "search", "production", at, 1, 1.0, 1, 1,
                       items=(ShownItem(1, 7, 1, "a.md"),))  # fmt: skip


def _until(condition: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + 30  # a state, not a duration: the deadline only stops a test that would hang
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_a_store_that_cannot_take_a_batch_gets_it_later_and_a_refused_record_is_dropped_alone(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", get_settings(), pipeline=None)
    dropped: list[tuple[str, str]] = []
    writer = QueryLogWriter(store.query_log, flush_s=0.05, batch=10, capacity=100,
                            on_drop=lambda r, reason: dropped.append((r.request_id, reason)))  # fmt: skip
    now = datetime.now(UTC)
    with store.tx() as conn:  # the table is away: every write fails as if the store were unreachable
        conn.execute(text("ALTER TABLE query_records RENAME TO query_records_away"))
    writer.start()
    try:
        first = [_record(now + timedelta(milliseconds=i)) for i in range(3)]
        for r in first:
            assert writer.submit(r)
        _until(lambda: writer.pending(first[0].request_id) and writer.waiting() == 0, "the writer to take them")
        time.sleep(0.2)  # several flush intervals with the store away: the batch is kept, not dropped
        assert dropped == [] and all(writer.pending(r.request_id) for r in first)
        with store.tx() as conn:
            conn.execute(text("ALTER TABLE query_records_away RENAME TO query_records"))
        _until(lambda: store.query_log.counts()["records"] == 3, "the kept batch to be written")
        # A batch holding a record the store refuses (its request id is already logged): the others are written.
        again = [_record(now + timedelta(seconds=1)), _record(now, first[1].request_id), _record(now)]
        for r in again:
            assert writer.submit(r)
        _until(lambda: store.query_log.counts()["records"] == 5, "the rest of the batch to be written")
    finally:
        writer.stop()
    assert dropped == [(first[1].request_id, "refused by the store: IntegrityError")]
    assert (writer.written, writer.dropped) == (5, 1)
    assert not any(writer.pending(r.request_id) for r in (*first, *again))
    store.engine.dispose()
