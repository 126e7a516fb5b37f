"""The query log's writer: requests hand their records over without waiting, a thread of its own writes them.

`submit` never blocks a request: it puts the record on a bounded queue (RUNTIME_OPS_QUERY_LOG_QUEUE records at most,
so memory stays bounded however slow the store is) or, when the queue is full, drops it, counts the drop and says so
in the log at most once a minute. The writer thread takes what waits every RUNTIME_OPS_QUERY_LOG_FLUSH_S seconds
(default 1 s), or as soon as RUNTIME_OPS_QUERY_LOG_BATCH records wait, and writes them in one transaction: a record
is stored with all its shown items or not at all. The app's shutdown writes whatever still waits.

What a crash loses: the records still in memory, i.e. those of the last flush interval while the store answers
(with the store unreachable, everything waiting, up to the queue's bound). Never half a record.

A batch the store refuses for the data in it (not because it is unreachable) is written record by record, so one
bad record is dropped (and counted) rather than holding back the others; an unreachable store keeps the batch for
the next flush.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from runtime_ops.online.query_records import QueryRecord
from runtime_ops.store.serving.query_log import QueryLog

log = logging.getLogger("runtime_ops.api.query_log")

DROP_LOG_EVERY_S = 60.0


class QueryLogWriter:
    def __init__(
        self,
        query_log: QueryLog,
        *,
        flush_s: float,
        batch: int,
        capacity: int,
        on_drop: Callable[[QueryRecord, str], None] = lambda record, reason: None,
    ) -> None:
        self.query_log = query_log
        self.flush_s, self.batch = flush_s, batch
        self.on_drop = on_drop
        self._queue: queue.Queue[QueryRecord] = queue.Queue(maxsize=capacity)
        self._pending: set[str] = set()  # submitted, not yet written or dropped: feedback on them is "too early"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake = threading.Event()  # a batch's worth waits: write now rather than at the next flush
        self._thread: threading.Thread | None = None
        self._dropped_since_log = 0
        self._last_drop_log = 0.0
        self.written = 0
        self.dropped = 0

    # The request side ---------------------------------------------------------------------------------------
    def submit(self, record: QueryRecord) -> bool:
        """Queue `record` for the next flush; False when the queue is full (the record is dropped and counted)."""
        with self._lock:
            self._pending.add(record.request_id)
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self._drop(record, "queue full")
            return False
        if self._queue.qsize() >= self.batch:
            self._wake.set()
        return True

    def pending(self, request_id: str) -> bool:
        """Whether `request_id` was submitted here and waits to be written."""
        with self._lock:
            return request_id in self._pending

    def waiting(self) -> int:
        """Records on the queue, not yet taken by the writer thread."""
        return self._queue.qsize()

    # The writer thread --------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="runtime-ops-query-log", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Write what waits, then stop the thread (the app's shutdown)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
        self.flush()  # anything submitted after the thread's last take (or with no thread at all)

    def flush(self) -> int:
        """Write every record waiting now, in batches; the number written."""
        total = 0
        while batch := self._take(self.batch):
            total += max(0, self._write(batch))  # a store that is down: those records are lost (stop only)
        return total

    def _run(self) -> None:
        carried: list[QueryRecord] = []  # a batch the store could not take: tried again before anything newer
        while not self._stopping.is_set():
            # Records stay on the queue until they are written: its bound is the whole of what waits in memory.
            self._wake.wait(self.flush_s)
            self._wake.clear()
            while not self._stopping.is_set() and (batch := carried or self._take(self.batch)):
                carried = []
                if self._write(batch) < 0:
                    carried = batch
                    self._stopping.wait(self.flush_s)  # the store is down: try again after a flush interval, not
                    break  # at every request that wakes the writer
        if carried:
            self._write(carried)

    def _take(self, most: int) -> list[QueryRecord]:
        taken: list[QueryRecord] = []
        while len(taken) < most:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return taken

    def _write(self, batch: list[QueryRecord]) -> int:
        """Write `batch` in one transaction; -1 when the store is unreachable (the caller keeps the batch)."""
        try:
            self.query_log.record(batch)
        except (OperationalError, InterfaceError) as exc:
            log.warning("query log: the state store is unreachable, %d records wait: %s", len(batch), exc.orig)
            return -1
        except (DBAPIError, ValueError):
            return self._one_by_one(batch)
        self._written(batch)
        return len(batch)

    def _one_by_one(self, batch: list[QueryRecord]) -> int:
        written = 0
        for record in batch:
            try:
                self.query_log.record([record])
            except (DBAPIError, ValueError) as exc:
                self._drop(record, f"refused by the store: {type(exc).__name__}")
                continue
            self._written([record])
            written += 1
        return written

    def _written(self, records: list[QueryRecord]) -> None:
        with self._lock:
            self._pending.difference_update(r.request_id for r in records)
            self.written += len(records)

    def _drop(self, record: QueryRecord, reason: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._pending.discard(record.request_id)
            self.dropped += 1
            self._dropped_since_log += 1
            say = now - self._last_drop_log >= DROP_LOG_EVERY_S
            count = self._dropped_since_log
            if say:
                self._dropped_since_log, self._last_drop_log = 0, now
        self.on_drop(record, reason)
        if say:
            log.warning(
                "query log: %d record(s) dropped since the last report (%s); raise RUNTIME_OPS_QUERY_LOG_QUEUE or "
                "look at the state store's write latency",
                count,
                reason,
                extra={"pipeline": record.pipeline},
            )
