"""The ops API's Prometheus collector: everything `/metrics` shows, computed at scrape time from shared storage.

Three sources, so the numbers are the same whichever process ran the work and whichever API replica is scraped:

- durable series (`metric_series`): what run workers, sensors and the CLI observed (lock waits, landing lag);
- SQL aggregates over the state store: approvals (pending, oldest age, decision latency, escalations, expiries),
  quarantined documents, the oldest landing batch not yet ingested, the shards of re-embedding backfills;
- Dagster's run and event storage, read incrementally (`DagsterTracker`): step successes and failures, finished
  runs, queue latency and run duration, labelled with the run's `runtime_ops/pipeline` tag ("none" without).
  The first scrape reads the whole history; later ones only what changed.

Each source is guarded on its own: when one fails, the others are still served, the failure is logged and counted
in `runtime_ops_metrics_scrape_errors_total{section}`, and the scrape never turns into an HTTP 500.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from runtime_ops.observability.metrics import (
    METRICS,
    HistogramAccumulator,
    WindowedCursor,
    decode_labels,
    sorted_buckets,
)
from runtime_ops.store import StateStore
from runtime_ops.tags import PIPELINE_TAG

log = logging.getLogger("runtime_ops.metrics")

InstanceProvider = Callable[[], Any]

# Dagster's terminal run statuses, as the `status` label says them.
_TERMINAL = {"SUCCESS": "success", "FAILURE": "failure", "CANCELED": "canceled"}
_ACTIVE = {"STARTING", "STARTED", "CANCELING"}
# Runs updated this long before the newest update seen are read again on every scrape: a run's status write can
# commit after a later one of another run (and run workers' clocks differ a little).
RUN_MARGIN = timedelta(seconds=120)
EVENT_PAGE = 1000
NO_PIPELINE = "none"
_PIPELINES_KEPT = 10_000  # run id -> pipeline entries remembered for step events


def _family(name: str) -> Metric:
    d = METRICS[name]
    if d.kind == "counter":
        return CounterMetricFamily(name, d.help, labels=list(d.labels))
    if d.kind == "gauge":
        return GaugeMetricFamily(name, d.help, labels=list(d.labels))
    return HistogramMetricFamily(name, d.help, labels=list(d.labels))


def _add_value(family: Metric, labels: list[str], value: float) -> None:
    assert isinstance(family, (CounterMetricFamily, GaugeMetricFamily))
    family.add_metric(labels, value)


def _add_histogram(family: Metric, labels: list[str], count: int, total: float, buckets: dict[str, int]) -> None:
    assert isinstance(family, HistogramMetricFamily)
    ordered = sorted_buckets(buckets)
    if not ordered or ordered[-1][0] != "+Inf":
        ordered.append(("+Inf", count))
    family.add_metric(labels, ordered, total)


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
                family = _family(name)
                for labels, n in sorted(counter.items()):
                    _add_value(family, list(labels), n)
                yield family
            for name, hists in (
                ("runtime_ops_queue_latency_seconds", self.queue),
                ("runtime_ops_run_duration_seconds", self.duration),
            ):
                family = _family(name)
                for labels, acc in sorted(hists.items()):
                    _add_histogram(family, list(labels), acc.count, acc.sum, acc.buckets())
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


class RuntimeOpsCollector(Collector):
    """A custom collector for a private CollectorRegistry: yields the families fresh on every scrape."""

    def __init__(
        self,
        store: StateStore,
        instance_provider: InstanceProvider | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        self.instance_provider = instance_provider or default_instance_provider()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.scrape_errors: Counter[str] = Counter()
        self._tracker: DagsterTracker | None = None
        self._tracker_ok = False  # whether the last scrape read the Dagster instance
        self._lock = threading.Lock()

    def describe(self) -> list[Metric]:
        # Registration would otherwise run a whole scrape (database and Dagster reads) just to learn the names.
        return []

    def error(self, section: str, exc: BaseException) -> None:
        self.scrape_errors[section] += 1
        log.warning(
            "metrics scrape: %s failed (%s: %s); serving the rest", section, type(exc).__name__, exc, exc_info=exc
        )

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            families: list[Metric] = []
            for section, part in (
                ("store", self._series),
                ("sql", self._aggregates),
                ("sql", self._backfills),
                ("dagster", self._dagster),
            ):
                try:
                    families.extend(part())
                except Exception as exc:  # one failing source must not take the others down
                    self.error(section, exc)
            families.extend(self.health())
        yield from families

    def health(self) -> list[Metric]:
        errors = _family("runtime_ops_metrics_scrape_errors_total")
        for section, n in sorted(self.scrape_errors.items()):
            _add_value(errors, [section], n)
        up = _family("runtime_ops_dagster_instance_up")
        _add_value(up, [], 1.0 if self._tracker_ok else 0.0)
        return [errors, up]

    # ------------------------------------------------------------------ sources
    def _series(self) -> list[Metric]:
        families: dict[str, Metric] = {d.name: _family(d.name) for d in METRICS.values() if d.source == "store"}
        for row in self.store.metrics.metric_rows():
            d = METRICS.get(row["name"])
            if d is None or d.source != "store":
                continue  # a series an older or newer version wrote: not ours to describe
            labels = decode_labels(row["labels"])
            values = [labels.get(n, "") for n in d.labels]
            if d.kind == "histogram":
                _add_histogram(families[d.name], values, int(row["count"]), float(row["sum"]), row["buckets"] or {})
            else:
                _add_value(families[d.name], values, float(row["sum"]))
        return list(families.values())

    def _aggregates(self) -> list[Metric]:
        bounds = METRICS["runtime_ops_approval_decision_latency_seconds"].buckets
        # Every pipeline sharing the store, whichever pipeline the API's own store is scoped to.
        by_pipeline = sorted(self.store.scoped(None).metrics.metric_aggregates(self.clock(), bounds).items())
        gauges = {
            "runtime_ops_approvals_pending": lambda a: a.approvals_pending,
            "runtime_ops_approval_oldest_pending_age_seconds": lambda a: a.approval_oldest_pending_age_s,
            "runtime_ops_approval_escalations_total": lambda a: a.approval_escalations,
            "runtime_ops_approval_expiries_total": lambda a: a.approval_expiries,
            "runtime_ops_landing_oldest_pending_age_seconds": lambda a: a.landing_oldest_pending_age_s,
        }
        out: list[Metric] = []
        for name, value in gauges.items():
            family = _family(name)
            for pipeline, agg in by_pipeline:
                _add_value(family, [pipeline], value(agg))
            out.append(family)
        latency = _family("runtime_ops_approval_decision_latency_seconds")
        quarantined = _family("runtime_ops_documents_quarantined_total")
        for pipeline, agg in by_pipeline:
            for outcome, h in sorted((agg.decision_latency or {}).items()):
                _add_histogram(latency, [pipeline, outcome], h.count, h.sum, h.buckets)
            for code, n in sorted((agg.quarantined or {}).items()):
                _add_value(quarantined, [pipeline, code], n)
        out.extend((latency, quarantined))
        return out

    def _backfills(self) -> list[Metric]:
        """Shards planned and filled of every index a backfill is still filling (no series once it is ready)."""
        planned = _family("runtime_ops_index_shards_planned")
        filled = _family("runtime_ops_index_shards_filled")
        for b in self.store.scoped(None).indexes.backfills():
            _add_value(planned, [b.pipeline, str(b.model_version)], b.planned)
            _add_value(filled, [b.pipeline, str(b.model_version)], b.filled)
        return [planned, filled]

    def _dagster(self) -> list[Metric]:
        self._tracker_ok = False
        instance = self.instance_provider()
        if instance is None:
            return []  # no instance configured: the families are left out, and dagster_instance_up says 0
        if self._tracker is None or self._tracker.instance is not instance:
            self._tracker = DagsterTracker(instance)
        self._tracker.update()
        self._tracker_ok = True
        return list(self._tracker.families())


def metrics_registry(collector: RuntimeOpsCollector) -> CollectorRegistry:
    """A private registry holding only `collector` (the global one would mix in whatever else registered)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
