"""Durable metric observations: what run workers, sensors and the CLI add to the state store's `metric_series`
(lock waits, landing lag), checked against the catalog (`runtime_ops.observability.metrics`); the ops API's
`/metrics` reads them back (`runtime_ops.observability.collector`).

    from runtime_ops.observability import metric_writes
    labels = {"lock": "promotion", "outcome": "acquired"}
    metric_writes.observe(store.metrics, "runtime_ops_lock_wait_seconds", 0.12, labels)

`observe`, `observe_many` and `inc` never raise: an observation that cannot be written is logged as a warning and
counted (`runtime_ops_metrics_write_errors_total`), and the work it measured carries on.

Pure module: no Dagster, no SQLAlchemy; the store's metrics repository is only passed in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from runtime_ops.observability.metrics import METRICS, MetricDef
from runtime_ops.store.operations import series
from runtime_ops.store.operations.series import SeriesDelta, canonical_labels, note_write_error

if TYPE_CHECKING:
    from runtime_ops.store.operations.metrics import Metrics

# The logger these warnings always had (they were written from the catalog module): log names stay.
log = logging.getLogger("runtime_ops.observability.metrics")


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


# Failed writes are counted by the store's metrics repository (`write_errors()` reads this process' counts).
def _failed(metrics: Metrics | None, name: str, exc: BaseException) -> None:
    if metrics is not None:
        metrics.failed(name, exc)
        return
    note_write_error(name)
    log.warning("metric %s not recorded (%s: %s); the observed work goes on", name, type(exc).__name__, exc)


def record(metrics: Metrics | None, deltas: Sequence[SeriesDelta]) -> bool:
    """Add `deltas` to the store in one transaction. Never raises; False when nothing was written."""
    if metrics is None or not deltas:
        return False
    return bool(metrics.record(deltas))


def observe(metrics: Metrics | None, name: str, value: float, labels: Mapping[str, object] | None = None) -> bool:
    """Add one observation to the durable histogram `name`. Never raises."""
    return observe_many(metrics, name, [value], labels)


def observe_many(
    metrics: Metrics | None, name: str, values: Sequence[float], labels: Mapping[str, object] | None = None
) -> bool:
    """Add several observations of one series (a whole batch) in one transaction. Never raises."""
    if not values:
        return True
    try:
        delta = histogram_delta(name, values, labels)
    except Exception as exc:
        _failed(metrics, name, exc)
        return False
    return record(metrics, [delta])


def inc(metrics: Metrics | None, name: str, labels: Mapping[str, object] | None = None, by: float = 1) -> bool:
    """Add `by` to the durable counter `name`. Never raises."""
    try:
        delta = counter_delta(name, labels, by)
    except Exception as exc:
        _failed(metrics, name, exc)
        return False
    return record(metrics, [delta])


class LockWaitRecorder:
    """The lockers' wait observer: `recorder(lock, outcome, seconds)` adds one lock-wait observation.

    Takes the store's metrics repository itself, or a zero-argument factory opening the store and returning it on
    first use (a RedisLocker's process may never need the state store otherwise).
    """

    def __init__(self, metrics: Metrics | None = None, open_metrics: Callable[[], Metrics] | None = None) -> None:
        self._metrics = metrics
        self._open = open_metrics
        self._lock = threading.Lock()

    def _get_metrics(self) -> Metrics | None:
        if self._metrics is None and callable(self._open):
            with self._lock:
                if self._metrics is None:
                    self._metrics = self._open()
        return self._metrics

    def __call__(self, lock: str, outcome: str, seconds: float) -> None:
        try:
            metrics = self._get_metrics()
        except Exception as exc:
            _failed(None, "runtime_ops_lock_wait_seconds", exc)
            return
        observe(metrics, "runtime_ops_lock_wait_seconds", max(seconds, 0.0), {"lock": lock, "outcome": outcome})
