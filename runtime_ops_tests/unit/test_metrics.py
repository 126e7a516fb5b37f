"""The pure parts of the metrics: bucket math, label canonicalisation, the windowed event cursor, the contract."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from runtime_ops.observability.dagster_metrics import HistogramAccumulator, WindowedCursor
from runtime_ops.observability.exposition import parse_metrics, sorted_buckets
from runtime_ops.observability.metric_writes import counter_delta, histogram_delta
from runtime_ops.observability.metrics import METRIC_NAMES, METRICS
from runtime_ops.store.operations.series import bucket_counts, canonical_labels, decode_labels, le_label, merge_buckets

# Every family but the lock waits (process-wide) says which pipeline it is about; Dagster's from the run's tag.
CONTRACT = {
    "runtime_ops_step_success_total": ("counter", ("pipeline", "job", "step")),
    "runtime_ops_step_failure_total": ("counter", ("pipeline", "job", "step")),
    "runtime_ops_runs_total": ("counter", ("pipeline", "job", "status")),
    "runtime_ops_queue_latency_seconds": ("histogram", ("pipeline", "job")),
    "runtime_ops_run_duration_seconds": ("histogram", ("pipeline", "job", "status")),
    "runtime_ops_approval_decision_latency_seconds": ("histogram", ("pipeline", "outcome")),
    "runtime_ops_approvals_pending": ("gauge", ("pipeline",)),
    "runtime_ops_approval_oldest_pending_age_seconds": ("gauge", ("pipeline",)),
    "runtime_ops_approval_escalations_total": ("counter", ("pipeline",)),
    "runtime_ops_approval_expiries_total": ("counter", ("pipeline",)),
    "runtime_ops_documents_quarantined_total": ("counter", ("pipeline", "code")),
    "runtime_ops_landing_lag_seconds": ("histogram", ("pipeline",)),
    "runtime_ops_landing_oldest_pending_age_seconds": ("gauge", ("pipeline",)),
    "runtime_ops_lock_wait_seconds": ("histogram", ("lock", "outcome")),
    "runtime_ops_search_latency_seconds": ("histogram", ("pipeline", "route")),
    "runtime_ops_search_results_total": ("counter", ("pipeline", "model_version")),
    "runtime_ops_search_requests_total": ("counter", ("pipeline", "route", "arm")),
    "runtime_ops_search_zero_results_total": ("counter", ("pipeline", "route", "arm")),
    "runtime_ops_feedback_total": ("counter", ("pipeline", "arm", "model_version", "signal")),
    "runtime_ops_feedback_click_rank": ("histogram", ("pipeline", "model_version")),
    "runtime_ops_query_log_dropped_total": ("counter", ("pipeline",)),
    "runtime_ops_index_shards_planned": ("gauge", ("pipeline", "model_version")),
    "runtime_ops_index_shards_filled": ("gauge", ("pipeline", "model_version")),
    "runtime_ops_quality_cusum": ("gauge", ("pipeline", "model_version")),
    "runtime_ops_quality_cusum_threshold": ("gauge", ("pipeline",)),
    "runtime_ops_quality_reference_helpful_ratio": ("gauge", ("pipeline", "model_version")),
    "runtime_ops_rollout_active": ("gauge", ("pipeline",)),
    "runtime_ops_rollout_mode": ("gauge", ("pipeline", "mode")),
    "runtime_ops_rollout_share": ("gauge", ("pipeline",)),
    "runtime_ops_rollout_stage": ("gauge", ("pipeline",)),
    "runtime_ops_rollout_decisive_queries": ("gauge", ("pipeline",)),
    "runtime_ops_rollout_min_queries": ("gauge", ("pipeline",)),
    "runtime_ops_rollout_preference": ("gauge", ("pipeline",)),
    "runtime_ops_rollout_verdict": ("gauge", ("pipeline", "verdict")),
}


def test_metric_names_are_the_contract_with_its_types_and_labels() -> None:
    assert tuple(CONTRACT) == METRIC_NAMES
    for name, (kind, labels) in CONTRACT.items():
        assert (METRICS[name].kind, METRICS[name].labels) == (kind, labels), name
        # Prometheus conventions: counters end in _total, histograms of time in _seconds, base units only.
        assert not name.endswith("_total") or kind == "counter"
        assert kind != "counter" or name.endswith("_total")
        # (a clicked item's rank is a count of places, not a unit: the one histogram not of time)
        assert kind != "histogram" or name.endswith("_seconds") or name == "runtime_ops_feedback_click_rank"
        assert kind != "histogram" or METRICS[name].buckets == tuple(sorted(METRICS[name].buckets))


def test_buckets_are_cumulative_and_a_value_on_a_bound_is_in_that_bucket() -> None:
    assert bucket_counts((1, 5), [0.5, 1, 1.0001, 5, 7]) == {"1.0": 2, "5.0": 4, "+Inf": 5}
    assert bucket_counts((0.1,), []) == {"0.1": 0, "+Inf": 0}
    assert bucket_counts((5, 1, math.inf), [3]) == {"1.0": 0, "5.0": 1, "+Inf": 1}  # order and an explicit +Inf
    with pytest.raises(ValueError):
        bucket_counts((1,), [math.nan])
    with pytest.raises(ValueError):
        bucket_counts((1, 1), [0])


def test_bucket_math_agrees_with_prometheus_client() -> None:
    """Our buckets, their le labels and the accumulator are what prometheus_client's own Histogram exposes."""
    rng = random.Random(7)
    bounds = METRICS["runtime_ops_lock_wait_seconds"].buckets
    values = [rng.choice([rng.expovariate(5), *bounds]) for _ in range(500)]
    registry = CollectorRegistry()
    reference = Histogram("h_seconds", "h", buckets=bounds, registry=registry)
    acc = HistogramAccumulator(bounds)
    for v in values:
        reference.observe(v)
        acc.observe(v)
    samples = parse_metrics(generate_latest(registry).decode())
    theirs = {dict(labels)["le"]: v for (name, labels), v in samples.items() if name == "h_seconds_bucket"}
    assert bucket_counts(bounds, values) == {le: int(n) for le, n in theirs.items()} == acc.buckets()
    assert acc.count == len(values) and acc.sum == pytest.approx(samples[("h_seconds_sum", frozenset())])


def test_merging_the_buckets_of_two_halves_gives_the_buckets_of_the_whole() -> None:
    rng = random.Random(3)
    bounds = METRICS["runtime_ops_landing_lag_seconds"].buckets
    values = [rng.uniform(0, 100_000) for _ in range(300)]
    a, b = bucket_counts(bounds, values[:120]), bucket_counts(bounds, values[120:])
    assert merge_buckets(a, b) == bucket_counts(bounds, values)
    assert merge_buckets(None, a) == a
    assert [le for le, _ in sorted_buckets(merge_buckets(a, b))][-1] == "+Inf"
    assert le_label(math.inf) == "+Inf" and le_label(0.25) == "0.25" and le_label(10) == "10.0"


def test_labels_are_canonical_whatever_their_order() -> None:
    one = canonical_labels({"outcome": "acquired", "lock": "promotion"})
    assert one == canonical_labels({"lock": "promotion", "outcome": "acquired"})
    assert one == '{"lock":"promotion","outcome":"acquired"}'
    assert decode_labels(one) == {"lock": "promotion", "outcome": "acquired"}
    assert canonical_labels(None) == canonical_labels({}) == "{}"
    assert canonical_labels({"n": 3, "x": None}) == '{"n":"3","x":""}'  # values are strings
    assert canonical_labels({"lock": "ünï"}) == '{"lock":"ünï"}'
    for bad in ({"0lock": "x"}, {"__name__": "x"}, {"lock-name": "x"}):
        with pytest.raises(ValueError):
            canonical_labels(bad)
    with pytest.raises(ValueError, match="do not match"):
        canonical_labels({"lock": "a"}, expected=("lock", "outcome"))
    with pytest.raises(ValueError, match="longer"):
        canonical_labels({"lock": "x" * 600})


def test_deltas_check_the_definitions() -> None:
    d = histogram_delta("runtime_ops_lock_wait_seconds", [0.01, 2.0], {"lock": "l", "outcome": "timeout"})
    assert (d.count, d.sum, d.buckets["+Inf"], d.buckets["0.01"]) == (2, 2.01, 2, 1)
    assert counter_delta("runtime_ops_metrics_write_errors_total", {"metric": "m"}, 3).sum == 3.0
    with pytest.raises(ValueError, match="unknown metric"):
        histogram_delta("runtime_ops_nope_seconds", [1.0])
    with pytest.raises(ValueError, match="scrape time"):  # derived families are never written durably
        histogram_delta("runtime_ops_queue_latency_seconds", [1.0], {"job": "j"})
    with pytest.raises(ValueError, match="only goes up"):
        counter_delta("runtime_ops_metrics_write_errors_total", {"metric": "m"}, -1)
    with pytest.raises(ValueError, match="is a histogram"):
        counter_delta("runtime_ops_landing_lag_seconds")


def test_windowed_cursor_counts_a_late_commit_once_and_nothing_twice() -> None:
    cursor = WindowedCursor(window_s=60)
    # Ids 1, 2 and 4 are visible; 3 was handed out but commits later.
    assert [cursor.take(i, now=0) for i in (1, 2, 4)] == [True, True, True]
    cursor.advance(now=10)
    assert cursor.after is None  # nothing has settled yet: the next query reads from the beginning again
    assert [cursor.take(i, now=10) for i in (1, 2, 3, 4)] == [False, False, True, False]  # 3 arrives late
    cursor.advance(now=65)  # 1, 2, 4 read more than a minute ago; 3 only 55 s ago
    assert cursor.after == 4 and cursor.pending == 0
    assert [cursor.take(i, now=70) for i in (3, 4, 5)] == [False, False, True]
    cursor.advance(now=200)
    assert cursor.after == 5


def test_parse_metrics_keys_samples_by_name_and_label_set() -> None:
    registry = CollectorRegistry()
    c = Counter("things_total", "t", ["kind"], registry=registry)
    c.labels(kind="a").inc(2)
    parsed = parse_metrics(generate_latest(registry).decode())
    assert parsed[("things_total", frozenset({("kind", "a")}))] == 2.0
