"""The ops API's Prometheus collector: everything `/metrics` shows, computed at scrape time from shared storage.

Three sources, so the numbers are the same whichever process ran the work and whichever API replica is scraped:

- durable series (`metric_series`): what run workers, sensors and the CLI observed (lock waits, landing lag);
- SQL aggregates over the state store: approvals (pending, oldest age, decision latency, escalations, expiries),
  quarantined documents, the oldest landing batch not yet ingested, the shards of re-embedding backfills, each
  pipeline's active rollout and its online evidence (mode, share, ramp stage, decisive queries, estimate, verdict),
  and production's live quality since its promotion (`QualityTracker`, in `observability/quality.py`: a CUSUM kept
  between scrapes);
- Dagster's run and event storage, read incrementally (`DagsterTracker`, in `observability/dagster_metrics.py`):
  step successes and failures, finished runs, queue latency and run duration, labelled with the run's
  `runtime_ops/pipeline` tag ("none" without). The first scrape reads the whole history; later ones only what
  changed.

Each source is guarded on its own: when one fails, the others are still served, the failure is logged and counted
in `runtime_ops_metrics_scrape_errors_total{section}`, and the scrape never turns into an HTTP 500.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from runtime_ops.observability.dagster_metrics import DagsterTracker, InstanceProvider, default_instance_provider
from runtime_ops.observability.exposition import add_histogram, add_value, family_of
from runtime_ops.observability.metrics import METRICS
from runtime_ops.observability.quality import QualityTracker
from runtime_ops.online.evidence import OnlineEvidence, online_evidence
from runtime_ops.store import StateStore
from runtime_ops.store.operations.series import decode_labels

log = logging.getLogger("runtime_ops.metrics")

# The queries a pipeline's rollout needs before its verdict counts: (pipeline, is a ramp stage) -> count.
MinQueries = Callable[[str, bool], int]
DEFAULT_MIN_QUERIES = 500  # gate.online.min_queries and rollout.min_queries when undeclared
ROLLOUT_FAMILIES = tuple(name for name in METRICS if name.startswith("runtime_ops_rollout_"))


def deciding_estimate(evidence: OnlineEvidence) -> float | None:
    """The deciding signal's candidate-minus-production estimate (None: no signal yet, or shadow)."""
    if evidence.mode == "interleave" and evidence.preference is not None:
        return float(evidence.preference.delta)
    if evidence.mode == "canary" and evidence.feedback_rate is not None:
        return float(evidence.feedback_rate.difference)
    return None


class RuntimeOpsCollector(Collector):
    """A custom collector for a private CollectorRegistry: yields the families fresh on every scrape."""

    def __init__(
        self,
        store: StateStore,
        instance_provider: InstanceProvider | None = None,
        clock: Callable[[], datetime] | None = None,
        min_queries: MinQueries | None = None,
    ) -> None:
        self.store = store
        self.min_queries = min_queries or (lambda _pipeline, _stage: DEFAULT_MIN_QUERIES)
        self.instance_provider = instance_provider or default_instance_provider()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.scrape_errors: Counter[str] = Counter()
        self._tracker: DagsterTracker | None = None
        self._tracker_ok = False  # whether the last scrape read the Dagster instance
        self._quality = QualityTracker(store)
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
                ("quality", lambda: self._quality.families(self.clock())),
                ("sql", self._rollouts),
                ("dagster", self._dagster),
            ):
                try:
                    families.extend(part())
                except Exception as exc:  # one failing source must not take the others down
                    self.error(section, exc)
            families.extend(self.health())
        yield from families

    def health(self) -> list[Metric]:
        errors = family_of("runtime_ops_metrics_scrape_errors_total")
        for section, n in sorted(self.scrape_errors.items()):
            add_value(errors, [section], n)
        up = family_of("runtime_ops_dagster_instance_up")
        add_value(up, [], 1.0 if self._tracker_ok else 0.0)
        return [errors, up]

    # ------------------------------------------------------------------ sources
    def _series(self) -> list[Metric]:
        families: dict[str, Metric] = {d.name: family_of(d.name) for d in METRICS.values() if d.source == "store"}
        for row in self.store.metrics.metric_rows():
            d = METRICS.get(row["name"])
            if d is None or d.source != "store":
                continue  # a series an older or newer version wrote: not ours to describe
            labels = decode_labels(row["labels"])
            values = [labels.get(n, "") for n in d.labels]
            if d.kind == "histogram":
                add_histogram(families[d.name], values, int(row["count"]), float(row["sum"]), row["buckets"] or {})
            else:
                add_value(families[d.name], values, float(row["sum"]))
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
            family = family_of(name)
            for pipeline, agg in by_pipeline:
                add_value(family, [pipeline], value(agg))
            out.append(family)
        latency = family_of("runtime_ops_approval_decision_latency_seconds")
        quarantined = family_of("runtime_ops_documents_quarantined_total")
        for pipeline, agg in by_pipeline:
            for outcome, h in sorted((agg.decision_latency or {}).items()):
                add_histogram(latency, [pipeline, outcome], h.count, h.sum, h.buckets)
            for code, n in sorted((agg.quarantined or {}).items()):
                add_value(quarantined, [pipeline, code], n)
        out.extend((latency, quarantined))
        return out

    def _backfills(self) -> list[Metric]:
        """Shards planned and filled of every index a backfill is still filling (no series once it is ready)."""
        planned = family_of("runtime_ops_index_shards_planned")
        filled = family_of("runtime_ops_index_shards_filled")
        for b in self.store.scoped(None).indexes.backfills():
            add_value(planned, [b.pipeline, str(b.model_version)], b.planned)
            add_value(filled, [b.pipeline, str(b.model_version)], b.filled)
        return [planned, filled]

    def _rollouts(self) -> list[Metric]:
        """Each pipeline's active rollout and its online evidence (one query-log read per active rollout)."""
        pipelines, active = self.store.scoped(None).rollouts.activity()
        families = {name: family_of(name) for name in ROLLOUT_FAMILIES}
        by_pipeline = {str(r["pipeline"]): r for r in active}
        for pipeline in pipelines:
            row = by_pipeline.get(pipeline)
            add_value(families["runtime_ops_rollout_active"], [pipeline], 1.0 if row else 0.0)
            if row is None:
                continue
            ramp = row["stage"] is not None
            add_value(families["runtime_ops_rollout_mode"], [pipeline, str(row["mode"])], 1.0)
            add_value(families["runtime_ops_rollout_share"], [pipeline], float(row["share"]))
            add_value(families["runtime_ops_rollout_stage"], [pipeline], int(row["stage"]) + 1 if ramp else 0)
            need = self.min_queries(pipeline, ramp)
            inputs = self.store.scoped(pipeline).query_log.online_inputs(int(row["id"]))
            evidence = online_evidence(inputs, mode=str(row["mode"]), min_queries=need)
            add_value(families["runtime_ops_rollout_decisive_queries"], [pipeline], evidence.queries)
            add_value(families["runtime_ops_rollout_min_queries"], [pipeline], need)
            estimate = deciding_estimate(evidence)
            if estimate is not None:
                add_value(families["runtime_ops_rollout_preference"], [pipeline], estimate)
            add_value(families["runtime_ops_rollout_verdict"], [pipeline, evidence.verdict], 1.0)
        return list(families.values())

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
