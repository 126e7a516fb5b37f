"""runtime_ops' Prometheus metrics catalog: every family's name, kind, labels, help and buckets (defined once,
here), and where its value comes from (`Source`).

Run workers, sensors and the CLI are separate processes (and containers), so an in-process prometheus_client
registry would only ever show what the ops API process itself saw. What is born in those processes (lock waits,
landing lag) is therefore added to the state store's `metric_series` table - one short transaction per
observation site, rows merged with an UPSERT (`runtime_ops.observability.metric_writes`) - and the ops API's
`/metrics` reads it back (`runtime_ops.observability.collector`). Everything else is derived at scrape time from
data that already exists (the state store's approval and document rows, Dagster's run and event storage).

Pure module: no Dagster, no SQLAlchemy, no Prometheus client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runtime_ops.store.operations.series import LANDING_LAG, LANDING_LAG_BOUNDS, WRITE_ERRORS

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
# Ranks of clicked items: the first page, then coarser.
CLICK_RANK_BOUNDS = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0, 50.0, 100.0)
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
    MetricDef(
        "runtime_ops_search_requests_total",
        "counter",
        ("pipeline", "route", "arm"),
        "Requests /api/search and /api/answer answered in this ops API process, by the arm that served them.",
        "api",
    ),
    MetricDef(
        "runtime_ops_search_zero_results_total",
        "counter",
        ("pipeline", "route", "arm"),
        "Requests /api/search and /api/answer answered with no result, by the arm that served them.",
        "api",
    ),
    MetricDef(
        "runtime_ops_feedback_total",
        "counter",
        ("pipeline", "arm", "model_version", "signal"),
        "Feedback accepted by POST /api/feedback: the arm of the request, the model version that produced the item "
        "(its team's when interleaved), the signal (click, helpful, not_helpful). Replays are not counted.",
        "api",
    ),
    MetricDef(
        "runtime_ops_feedback_click_rank",
        "histogram",
        ("pipeline", "model_version"),
        "The rank (1-based) of the shown item a click was reported on.",
        "api",
        CLICK_RANK_BOUNDS,
    ),
    MetricDef(
        "runtime_ops_query_log_dropped_total",
        "counter",
        ("pipeline",),
        "Query log records dropped in this ops API process: the writer's queue was full "
        "(RUNTIME_OPS_QUERY_LOG_QUEUE) or the store refused the record. The request itself was answered.",
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
# Live quality of production from its first hour (`observability/quality.py`, `online/quality_cusum.py`): one series
# per pipeline with a production model, computed from the state store at scrape time (every replica shows the same).
_QUALITY_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "runtime_ops_quality_cusum",
        "gauge",
        ("pipeline", "model_version"),
        "CUSUM of production's helpful judgements against its own share since its promotion (the rule "
        "RetrievalQualityDropped fires at runtime_ops_quality_cusum_threshold); 0 until the reference is large enough.",
        "sql",
    ),
    MetricDef(
        "runtime_ops_quality_cusum_threshold",
        "gauge",
        ("pipeline",),
        "The level of runtime_ops_quality_cusum that means production's helpful share dropped.",
        "sql",
    ),
    MetricDef(
        "runtime_ops_quality_reference_helpful_ratio",
        "gauge",
        ("pipeline", "model_version"),
        "Production's helpful share since its promotion (at most a day) minus the last 15 minutes: the CUSUM's "
        "reference (absent until it holds enough judgements).",
        "sql",
    ),
)
# Live traffic on a candidate: the active rollout of each pipeline that ever had one (a ramp stage is a canary
# rollout too), and its evidence as the gate reads it. A pipeline with none shows active 0 and no other series.
_ROLLOUT_DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "runtime_ops_rollout_active", "gauge", ("pipeline",), "1 while a rollout of the pipeline is active.", "sql"
    ),
    MetricDef("runtime_ops_rollout_mode", "gauge", ("pipeline", "mode"), "1 for the active rollout's mode.", "sql"),
    MetricDef(
        "runtime_ops_rollout_share",
        "gauge",
        ("pipeline",),
        "The share of traffic (requests; sessions for a canary) the active rollout gives the candidate.",
        "sql",
    ),
    MetricDef(
        "runtime_ops_rollout_stage",
        "gauge",
        ("pipeline",),
        "The ramp stage the active rollout is (1-based); 0 for a rollout beside a pending request (not a ramp).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_rollout_decisive_queries",
        "gauge",
        ("pipeline",),
        "Queries the active rollout's deciding signal has counted (interleaved queries with a click; the "
        "candidate's requests in a canary; shadowed queries).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_rollout_min_queries",
        "gauge",
        ("pipeline",),
        "Queries the deciding signal needs before its verdict counts (gate.online / rollout.min_queries).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_rollout_preference",
        "gauge",
        ("pipeline",),
        "The deciding signal's candidate-minus-production estimate: the interleaving preference, or the canary's "
        "positive-feedback rate difference (absent before the first signal, and for shadow).",
        "sql",
    ),
    MetricDef(
        "runtime_ops_rollout_verdict",
        "gauge",
        ("pipeline", "verdict"),
        "1 for the active rollout's online verdict: better, worse, no difference yet, not enough queries.",
        "sql",
    ),
)
_DEFS = (*_DEFS, *_SEARCH_DEFS, *_BACKFILL_DEFS, *_QUALITY_DEFS, *_ROLLOUT_DEFS)

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
