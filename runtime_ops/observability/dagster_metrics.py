"""Metrics collected from Dagster's run and event storage at scrape time (`DagsterTracker`): step successes and
failures, finished runs, queue latency and run duration, labelled with the run's `runtime_ops/pipeline` tag
("none" without). The first scrape reads the whole history; later ones only what changed.

The pure parts it counts with (an in-memory histogram, a storage-id cursor that tolerates out-of-order commits)
are here too; the ops API's collector (`runtime_ops.observability.collector`) serves what it yields.
"""

from __future__ import annotations

import bisect
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from prometheus_client.core import Metric

from runtime_ops.observability.exposition import add_histogram, add_value, family_of
from runtime_ops.observability.metrics import METRICS
from runtime_ops.store.operations.series import le_label
from runtime_ops.tags import PIPELINE_TAG

InstanceProvider = Callable[[], Any]

# Dagster's terminal run statuses, as the `status` label says them.
_TERMINAL = {"SUCCESS": "success", "FAILURE": "failure", "CANCELED": "canceled"}
_ACTIVE = {"STARTING", "STARTED", "CANCELING"}
# Runs updated this long before the newest update seen are read again on every scrape: a run's status write can
# commit after a later one of another run (and run workers' clocks differ a little).
RUN_MARGIN = timedelta(seconds=120)
EVENT_PAGE = 1000
# Runs without the pipeline tag (PIPELINE_TAG) are labelled "none".
NO_PIPELINE = "none"
_PIPELINES_KEPT = 10_000  # run id -> pipeline entries remembered for step events


class HistogramAccumulator:
    """An in-memory histogram (the scrape-time Dagster figures): per-bucket counts, total count and sum."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = sorted(float(b) for b in bounds if b != math.inf)
        self._per_bucket = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        value = float(value)
        if math.isnan(value):
            raise ValueError("NaN is not an observation")
        self._per_bucket[bisect.bisect_left(self.bounds, value)] += 1  # le: a value on a bound is in its bucket
        self.count += 1
        self.sum += value

    def buckets(self) -> dict[str, int]:
        out: dict[str, int] = {}
        running = 0
        for bound, n in zip((*self.bounds, math.inf), self._per_bucket, strict=True):
            running += n
            out[le_label(bound)] = running
        return out


class WindowedCursor:
    """A storage-id cursor for a table that concurrent writers append to.

    Ids are handed out at insert but become visible at commit, so id 101 can be read before id 100 commits: a
    cursor at "the highest id read" would skip 100 for good. This one stays behind the ids read within the last
    `window_s` seconds (of the reader's own clock) and remembers those ids, so a late commit is still counted
    and nothing is counted twice. `after` is what to query after; `take` says whether a record is new.
    """

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        self.after: int | None = None
        self._seen: dict[int, float] = {}  # ids above `after` -> when first read

    def take(self, storage_id: int, now: float) -> bool:
        if (self.after is not None and storage_id <= self.after) or storage_id in self._seen:
            return False
        self._seen[storage_id] = now
        return True

    def advance(self, now: float) -> None:
        settled = [i for i, at in self._seen.items() if at <= now - self.window_s]
        if settled:
            self.after = max(settled) if self.after is None else max(self.after, *settled)
            self._seen = {i: at for i, at in self._seen.items() if i > self.after}

    @property
    def pending(self) -> int:
        """Ids read but still inside the window (kept in memory)."""
        return len(self._seen)


class DagsterTracker:
    """Step, run, queue-latency and duration figures from a Dagster instance, kept up to date incrementally.

    Runs: `get_run_records` of the runs updated since the newest update seen (minus RUN_MARGIN), so a scrape reads
    the runs that changed, not the history. A finished run is counted once: runs counted within the margin are
    remembered; older ones are recognised by their end time being before the horizon already read.

    Steps: on a non-sharded event log (PostgreSQL, MySQL) STEP_SUCCESS / STEP_FAILURE records after a storage-id
    cursor that trails the newest id by a time window (`WindowedCursor`), since concurrent writers commit ids out
    of order. On SQLite, whose event log is one database per run (ids are per run), the events of each run that
    is running or just finished are read after a per-run cursor.
    """

    def __init__(self, instance: Any) -> None:
        from dagster import DagsterEventType

        self.instance = instance
        # Keys start with the pipeline: (pipeline, job, step) / (pipeline, job, status) / (pipeline, job).
        self.step_success: Counter[tuple[str, str, str]] = Counter()
        self.step_failure: Counter[tuple[str, str, str]] = Counter()
        self.runs: Counter[tuple[str, str, str]] = Counter()
        self._pipelines: dict[str, str] = {}  # run id -> pipeline (insertion order: oldest first)
        self.queue: dict[tuple[str, ...], HistogramAccumulator] = {}
        self.duration: dict[tuple[str, ...], HistogramAccumulator] = {}
        self._watermark: datetime | None = None  # newest run update_timestamp seen
        self._scanned = False  # whether the history was read once
        self._finished: dict[str, float] = {}  # run id -> update timestamp, finished runs within the margin
        self._started: dict[str, float] = {}  # run id -> update timestamp, queue latency observed
        # Sharded event log: job and event cursor of each run being followed (running, or just finished).
        self._run_cursors: dict[str, tuple[str, str | None]] = {}
        self._types = {
            DagsterEventType.STEP_SUCCESS: self.step_success,
            DagsterEventType.STEP_FAILURE: self.step_failure,
        }
        self._cursors = {t: WindowedCursor() for t in self._types}
        self._lock = threading.Lock()

    @property
    def sharded(self) -> bool:
        return bool(self.instance.event_log_storage.is_run_sharded)

    def update(self, now: float | None = None) -> None:
        with self._lock:
            now = time.monotonic() if now is None else now
            self._scan_runs()
            if not self.sharded:
                self._scan_step_events(now)

    # ------------------------------------------------------------------ runs
    def _scan_runs(self) -> None:
        from dagster import RunsFilter

        horizon = self._watermark - RUN_MARGIN if self._watermark is not None else None
        records = self.instance.get_run_records(
            filters=RunsFilter(updated_after=horizon) if horizon is not None else None,
            order_by="update_timestamp",
            ascending=True,
        )
        first = not self._scanned
        sharded = self.sharded
        h = horizon.timestamp() if horizon is not None else float("-inf")
        newest = self._watermark
        for rec in records:
            run = rec.dagster_run
            run_id, job, status = run.run_id, run.job_name, run.status.value
            pipeline = self._remember_pipeline(run_id, run.tags)
            updated = rec.update_timestamp.timestamp()
            if newest is None or rec.update_timestamp > newest:
                newest = rec.update_timestamp
            created = rec.create_timestamp.timestamp()
            # A run seen again after its entry was forgotten is recognised by a start/end before the horizon.
            if rec.start_time is not None and run_id not in self._started and (first or rec.start_time >= h):
                self._observe(
                    self.queue,
                    METRICS["runtime_ops_queue_latency_seconds"].buckets,
                    (pipeline, job),
                    rec.start_time - created,
                )
                self._started[run_id] = updated
            if status in _TERMINAL:
                new = run_id not in self._finished and (first or (rec.end_time or updated) >= h)
                if sharded and (new or run_id in self._run_cursors):
                    # Its last step events (all of them when it ran between two scrapes), then stop following it.
                    self._poll_run_steps(run_id, job)
                    self._run_cursors.pop(run_id, None)
                if not new:
                    continue
                label = _TERMINAL[status]
                self.runs[(pipeline, job, label)] += 1
                if rec.start_time is not None and rec.end_time is not None:
                    self._observe(
                        self.duration,
                        METRICS["runtime_ops_run_duration_seconds"].buckets,
                        (pipeline, job, label),
                        rec.end_time - rec.start_time,
                    )
                self._finished[run_id] = updated
            elif status in _ACTIVE and sharded:
                self._run_cursors.setdefault(run_id, (job, None))
        for run_id, (job, _) in list(self._run_cursors.items()):  # still running: their step events so far
            self._poll_run_steps(run_id, job)
        self._watermark = newest
        self._scanned = True
        if newest is not None:  # forget what the next scan cannot read again
            cut = (newest - RUN_MARGIN).timestamp()
            self._finished = {k: v for k, v in self._finished.items() if v >= cut}
            self._started = {k: v for k, v in self._started.items() if v >= cut}

    def _remember_pipeline(self, run_id: str, tags: Any) -> str:
        pipeline = str((tags or {}).get(PIPELINE_TAG) or NO_PIPELINE)
        self._pipelines.pop(run_id, None)
        self._pipelines[run_id] = pipeline
        while len(self._pipelines) > _PIPELINES_KEPT:
            self._pipelines.pop(next(iter(self._pipelines)))
        return pipeline

    def _pipeline_of(self, run_id: str | None) -> str:
        """The pipeline tag of a run (read from the instance once for a run no scan has shown)."""
        if not run_id:
            return NO_PIPELINE
        pipeline = self._pipelines.get(run_id)
        if pipeline is None:
            run = self.instance.get_run_by_id(run_id)
            pipeline = self._remember_pipeline(run_id, run.tags if run is not None else None)
        return pipeline

    @staticmethod
    def _observe(
        target: dict[tuple[str, ...], HistogramAccumulator], bounds: tuple[float, ...], key: tuple[str, ...], v: float
    ) -> None:
        acc = target.get(key)
        if acc is None:
            acc = target[key] = HistogramAccumulator(bounds)
        acc.observe(max(v, 0.0))

    # ------------------------------------------------------------------ steps
    def _poll_run_steps(self, run_id: str, job: str) -> None:
        """Sharded event log: the step events of one run after its cursor (one query)."""
        _, cursor = self._run_cursors.get(run_id, (job, None))
        conn = self.instance.get_records_for_run(run_id, cursor=cursor, of_type=set(self._types))
        counts: Counter[tuple[Any, str]] = Counter()
        for record in conn.records:
            entry = record.event_log_entry
            if entry.dagster_event is not None:
                counts[(entry.dagster_event.event_type, entry.step_key or "")] += 1
        pipeline = self._pipeline_of(run_id)
        for (event_type, step), n in counts.items():
            self._types[event_type][(pipeline, job, step)] += n
        self._run_cursors[run_id] = (job, conn.cursor)

    def _scan_step_events(self, now: float) -> None:
        from dagster import EventRecordsFilter

        storage = self.instance.event_log_storage
        for event_type, counter in self._types.items():
            cursor = self._cursors[event_type]
            after = cursor.after
            while True:
                records = storage.get_event_records(
                    EventRecordsFilter(event_type=event_type, after_cursor=after), limit=EVENT_PAGE, ascending=True
                )
                for record in records:
                    if cursor.take(record.storage_id, now):
                        entry = record.event_log_entry
                        key = (self._pipeline_of(entry.run_id), entry.job_name or "", entry.step_key or "")
                        counter[key] += 1
                if len(records) < EVENT_PAGE:
                    break
                after = records[-1].storage_id
            cursor.advance(now)

    # ------------------------------------------------------------------ exposition
    def families(self) -> Iterator[Metric]:
        with self._lock:
            for name, counter in (
                ("runtime_ops_step_success_total", self.step_success),
                ("runtime_ops_step_failure_total", self.step_failure),
                ("runtime_ops_runs_total", self.runs),
            ):
                family = family_of(name)
                for labels, n in sorted(counter.items()):
                    add_value(family, list(labels), n)
                yield family
            for name, hists in (
                ("runtime_ops_queue_latency_seconds", self.queue),
                ("runtime_ops_run_duration_seconds", self.duration),
            ):
                family = family_of(name)
                for labels, acc in sorted(hists.items()):
                    add_histogram(family, list(labels), acc.count, acc.sum, acc.buckets())
                yield family


def default_instance_provider() -> InstanceProvider:
    """`DagsterInstance.get()` when DAGSTER_HOME is set (the ops API then shares the daemon's and the run workers'
    instance), else None. The instance is opened once, on the first scrape that needs it."""
    holder: dict[str, Any] = {}
    lock = threading.Lock()

    def provide() -> Any:
        if not os.environ.get("DAGSTER_HOME"):
            return None
        with lock:
            if "instance" not in holder:
                from dagster import DagsterInstance

                holder["instance"] = DagsterInstance.get()
            return holder["instance"]

    return provide
