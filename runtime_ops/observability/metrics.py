"""runtime_ops' Prometheus metrics: their names, labels and buckets (defined once, here), durable observations,
and a parser for the exposition text.

Run workers, sensors and the CLI are separate processes (and containers), so an in-process prometheus_client
registry would only ever show what the ops API process itself saw. What is born in those processes (lock waits,
landing lag) is therefore added to the state store's `metric_series` table - one short transaction per
observation site, rows merged with an UPSERT - and the ops API's `/metrics` reads it back
(`runtime_ops.observability.collector`). Everything else is derived at scrape time from data that already exists
(the state store's approval and document rows, Dagster's run and event storage).

    from runtime_ops.observability import metrics
    metrics.observe(store, "runtime_ops_lock_wait_seconds", 0.12, {"lock": "promotion", "outcome": "acquired"})

`observe`, `observe_many` and `inc` never raise: an observation that cannot be written is logged as a warning and
counted (`runtime_ops_metrics_write_errors_total`), and the work it measured carries on.

Pure module: no Dagster, no SQLAlchemy; the store is only passed in.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from runtime_ops.store.operations import series
from runtime_ops.store.operations.series import (  # the store's series primitives, used (and offered) here
    LANDING_LAG,
    LANDING_LAG_BOUNDS,
    MAX_LABELS_CHARS,  # noqa: F401 (offered here)
    WRITE_ERRORS,
    SeriesDelta,
    bucket_counts,  # noqa: F401 (offered here)
    canonical_labels,
    decode_labels,  # noqa: F401 (offered here)
    le_label,
    merge_buckets,  # noqa: F401 (offered here)
    note_write_error,
    write_errors,  # noqa: F401 (offered here)
)

if TYPE_CHECKING:
    from runtime_ops.store import StateStore

log = logging.getLogger(__name__)

Kind = Literal["counter", "gauge", "histogram"]

# Where a family is computed: `store` = durable rows in metric_series written where the value is born,
# `sql` = an aggregate over the state store at scrape time, `dagster` = Dagster's run/event storage at scrape time,
# `api` = the ops API process itself.
Source = Literal["store", "sql", "dagster", "api"]

_LATENCY_BOUNDS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_DURATION_BOUNDS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
# Approvals wait for people: minutes to days (policy decisions land in the first bucket).
_DECISION_BOUNDS = (1.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 172800.0)
# Queries of the ops API's search and answer routes: milliseconds (an answer through a model endpoint: seconds).
SEARCH_BOUNDS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Lock waits: most acquisitions are uncontended (a few ms); the bounded waits end at 10 s by default.
_LOCK_BOUNDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    source: Source
    buckets: tuple[float, ...] = ()


_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "runtime_ops_step_success_total",
        "counter",
        ("pipeline", "job", "step"),
        "Dagster steps that succeeded (STEP_SUCCESS events), by job and step.",
        "dagster",
    ),
    MetricDef(
        "runtime_ops_step_failure_total",
        "counter",
        ("pipeline", "job", "step"),
        "Dagster steps that failed (STEP_FAILURE events; retried attempts are not failures), by job and step.",
        "dagster",
    ),
    MetricDef(
        "runtime_ops_runs_total",
        "counter",
        ("pipeline", "job", "status"),
        "Dagster runs that finished, by job and status (success, failure, canceled).",
        "dagster",
    ),
    MetricDef(
        "runtime_ops_queue_latency_seconds",
        "histogram",
        ("pipeline", "job"),
        "Seconds from a run's creation to its start (queued and launching).",
        "dagster",
        _LATENCY_BOUNDS,
    ),
    MetricDef(
        "runtime_ops_run_duration_seconds",
        "histogram",
        ("pipeline", "job", "status"),
        "Seconds from a run's start to its end, for finished runs.",
        "dagster",
        _DURATION_BOUNDS,
    ),
    MetricDef(
        "runtime_ops_approval_decision_latency_seconds",
        "histogram",
        ("pipeline", "outcome"),
        "Seconds from an approval request's creation to its decision, by outcome.",
        "sql",
        _DECISION_BOUNDS,
    ),
    MetricDef(
        "runtime_ops_approvals_pending", "gauge", ("pipeline",), "Approval requests waiting for a decision.", "sql"
    ),
    MetricDef(
        "runtime_ops_approval_oldest_pending_age_seconds",
        "gauge",
        ("pipeline",),
        "Age of the oldest pending approval request in seconds (0 when none is pending).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_approval_escalations_total",
        "counter",
        ("pipeline",),
        "Approval requests that were escalated.",
        "sql",
    ),
    MetricDef(
        "runtime_ops_approval_expiries_total",
        "counter",
        ("pipeline",),
        "Approval requests that expired undecided.",
        "sql",
    ),
    MetricDef(
        "runtime_ops_documents_quarantined_total",
        "counter",
        ("pipeline", "code"),
        "Documents quarantined at ingestion, by quarantine code.",
        "sql",
    ),
    MetricDef(
        LANDING_LAG,
        "histogram",
        ("pipeline",),
        "Seconds from a landed object's last_modified to its being recorded in the landing ledger.",
        "store",
        LANDING_LAG_BOUNDS,
    ),
    MetricDef(
        "runtime_ops_landing_oldest_pending_age_seconds",
        "gauge",
        ("pipeline",),
        "Age of the oldest landing batch recorded but not yet ingested, in seconds (0 when none).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_lock_wait_seconds",
        "histogram",
        ("lock", "outcome"),
        "Seconds a process waited for a distributed lock, by lock and outcome (acquired, timeout, unavailable).",
        "store",
        _LOCK_BOUNDS,
    ),
)

_SEARCH_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "runtime_ops_search_latency_seconds",
        "histogram",
        ("pipeline", "route"),
        "Seconds to answer POST /api/search or /api/answer in this ops API process, by pipeline and route.",
        "api",
        SEARCH_BOUNDS,
    ),
    MetricDef(
        "runtime_ops_search_results_total",
        "counter",
        ("pipeline", "model_version"),
        "Hits returned by /api/search and /api/answer in this ops API process, by the model version that served them.",
        "api",
    ),
)
# Re-embedding backfills (`<pipeline>/shadow_embeddings`, one shard per partition): the indexes still `filling` with
# a plan in index_shards; a version's series go away once its index is ready (or dropped).
_BACKFILL_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "runtime_ops_index_shards_planned",
        "gauge",
        ("pipeline", "model_version"),
        "Shards planned for a model version's index being filled by a backfill (one shadow_embeddings partition each).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_index_shards_filled",
        "gauge",
        ("pipeline", "model_version"),
        "Shards of a model version's index being filled by a backfill that are embedded and upserted.",
        "sql",
    ),
)
_DEFS = (*_DEFS, *_SEARCH_DEFS, *_BACKFILL_DEFS)

# The contract: the names the Grafana dashboard and the Prometheus rules use. Keep them exactly.
METRIC_NAMES: tuple[str, ...] = tuple(d.name for d in _DEFS)

# Health of the metrics themselves (not part of the dashboard contract).
_HEALTH_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        WRITE_ERRORS,
        "counter",
        ("metric",),
        "Durable observations that could not be written (the observed work carried on).",
        "store",
    ),
    MetricDef(
        "runtime_ops_metrics_scrape_errors_total",
        "counter",
        ("section",),
        "Parts of a /metrics scrape that failed in this ops API process (the rest was still served).",
        "api",
    ),
    MetricDef(
        "runtime_ops_dagster_instance_up",
        "gauge",
        (),
        "1 when the ops API could read the Dagster instance at the last scrape, else 0.",
        "api",
    ),
)

METRICS: dict[str, MetricDef] = {d.name: d for d in (*_DEFS, *_HEALTH_DEFS)}


# ---------------------------------------------------------------------------------------------------------- pure
def sorted_buckets(buckets: Mapping[str, int]) -> list[tuple[str, int]]:
    """Buckets in `le` order, `+Inf` last, as HistogramMetricFamily wants them."""
    return sorted(((le, int(n)) for le, n in buckets.items()), key=lambda kv: float(kv[0]))


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


def histogram_delta(name: str, values: Sequence[float], labels: Mapping[str, object] | None = None) -> SeriesDelta:
    d = _definition(name, "histogram")
    return series.histogram(name, canonical_labels(labels, d.labels), d.buckets, values)


def counter_delta(name: str, labels: Mapping[str, object] | None = None, by: float = 1) -> SeriesDelta:
    d = _definition(name, "counter")
    return series.counter(name, canonical_labels(labels, d.labels), by)


def _definition(name: str, kind: str) -> MetricDef:
    d = METRICS.get(name)
    if d is None:
        raise ValueError(f"unknown metric {name!r}; define it in runtime_ops.observability.metrics")
    if d.kind != kind:
        raise ValueError(f"{name} is a {d.kind}, not a {kind}")
    if d.source != "store":
        raise ValueError(f"{name} is computed at scrape time ({d.source}); it is not written durably")
    return d


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Exposition text -> {(sample name, frozenset of (label, value)): value}, with prometheus_client's parser.

    Sample names are as exposed: `..._total` for counters, `..._bucket` / `..._sum` / `..._count` for histograms
    (the bucket's `le` is one of its labels). For tests and the topology check.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = float(sample.value)
    return out


# ------------------------------------------------------------------------------------------- durable writes
# Failed writes are counted by the store's metrics repository (`write_errors()` reads this process' counts).
def _failed(store: StateStore | None, name: str, exc: BaseException) -> None:
    if store is not None:
        store.metrics.failed(name, exc)
        return
    note_write_error(name)
    log.warning("metric %s not recorded (%s: %s); the observed work goes on", name, type(exc).__name__, exc)


def record(store: StateStore | None, deltas: Sequence[SeriesDelta]) -> bool:
    """Add `deltas` to the store in one transaction. Never raises; False when nothing was written."""
    if store is None or not deltas:
        return False
    return bool(store.metrics.record(deltas))


def observe(store: StateStore | None, name: str, value: float, labels: Mapping[str, object] | None = None) -> bool:
    """Add one observation to the durable histogram `name`. Never raises."""
    return observe_many(store, name, [value], labels)


def observe_many(
    store: StateStore | None, name: str, values: Sequence[float], labels: Mapping[str, object] | None = None
) -> bool:
    """Add several observations of one series (a whole batch) in one transaction. Never raises."""
    if not values:
        return True
    try:
        delta = histogram_delta(name, values, labels)
    except Exception as exc:
        _failed(store, name, exc)
        return False
    return record(store, [delta])


def inc(store: StateStore | None, name: str, labels: Mapping[str, object] | None = None, by: float = 1) -> bool:
    """Add `by` to the durable counter `name`. Never raises."""
    try:
        delta = counter_delta(name, labels, by)
    except Exception as exc:
        _failed(store, name, exc)
        return False
    return record(store, [delta])


class LockWaitRecorder:
    """The lockers' wait observer: `recorder(lock, outcome, seconds)` adds one lock-wait observation.

    Takes the store itself, or a zero-argument factory opening it on first use (a RedisLocker's process may
    never need the state store otherwise).
    """

    def __init__(self, store: StateStore | None = None, open_store: Callable[[], StateStore] | None = None) -> None:
        self._store = store
        self._open = open_store
        self._lock = threading.Lock()

    def _get_store(self) -> StateStore | None:
        if self._store is None and callable(self._open):
            with self._lock:
                if self._store is None:
                    self._store = self._open()
        return self._store

    def __call__(self, lock: str, outcome: str, seconds: float) -> None:
        try:
            store = self._get_store()
        except Exception as exc:
            _failed(None, "runtime_ops_lock_wait_seconds", exc)
            return
        observe(store, "runtime_ops_lock_wait_seconds", max(seconds, 0.0), {"lock": lock, "outcome": outcome})
