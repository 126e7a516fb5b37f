"""Collecting what old model versions leave behind: their vector indexes and their stored vectors (glue).

The plan (`runtime_ops.policies.retention`) protects production, the rollback target, the candidate and versions
awaiting approval; everything else beyond the newest few is dropped from the vector store and the state store.
Safe beside a promotion or rollback: neither can move an alias to a version the plan collects (a promotion's
target is the candidate or awaits approval, a rollback's is the protected rollback target).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from runtime_ops.policies.retention import RetentionPlan, RetentionPolicy, plan_retention
from runtime_ops.store import StateStore
from runtime_ops.store.approvals.requests import Requests
from runtime_ops.store.registry.registry import Registry
from runtime_ops.tags import CANDIDATE_ALIAS, PRODUCTION_ALIAS, SERVING_INDEX_ALIAS
from runtime_ops.vectors.base import IndexName, VectorStore


@dataclass
class RetentionReport:
    plan: RetentionPlan
    dropped_indexes: list[int] = field(default_factory=list)  # index row ids
    dropped_vectors: int = 0  # stored chunk vectors deleted
    released_bytes: int = 0  # model artifacts (weights) of collected versions
    dry_run: bool = False

    def describe(self) -> str:
        kept = ", ".join(f"v{v} ({why})" for v, why in sorted(self.plan.reasons.items()))
        gone = ", ".join(f"v{v}" for v in self.plan.collect) or "nothing"
        verb = "would collect" if self.dry_run else "collected"
        return f"retention: kept {kept or 'nothing'}; {verb} {gone}"


def retention_plan(registry: Registry, requests: Requests, policy: RetentionPolicy) -> RetentionPlan:
    history = [int(h["new_target"]) for h in registry.alias_history(PRODUCTION_ALIAS) if h["new_target"] is not None]
    pending = [int(r["candidate_version"]) for r in requests.list_requests(status="pending")]
    return plan_retention(
        [int(m["version"]) for m in registry.models()],
        production=registry.alias(PRODUCTION_ALIAS),
        production_history=history,
        candidate=registry.alias(CANDIDATE_ALIAS),
        pending=pending,
        policy=policy,
    )


def collect(
    store: StateStore,
    vectors: VectorStore,
    policy: RetentionPolicy = RetentionPolicy(),
    *,
    dry_run: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> RetentionReport:
    plan = retention_plan(store.registry, store.requests, policy)
    report = RetentionReport(plan, dry_run=dry_run)
    serving = store.registry.alias(SERVING_INDEX_ALIAS)
    assert store.pipeline is not None, "retention is per pipeline: a scoped store"
    for row in store.indexes.list_indexes():
        version = int(row["model_version"])
        if version not in plan.collect or row["id"] == serving:
            continue
        if not dry_run:
            if row["backend"] == vectors.kind and row["location"] == vectors.describe():
                vectors.drop(IndexName(store.pipeline, version))
            store.indexes.mark_dropped(int(row["id"]))
        report.dropped_indexes.append(int(row["id"]))
    for version in plan.collect:
        if not dry_run:
            report.dropped_vectors += store.embeddings.drop_embeddings(version)
    # A collected version's weights go too, unless a kept model shares the artifact (the same content). Artifacts
    # are shared by every pipeline, so another pipeline's models count, whatever their version numbers.
    models = {int(m["version"]): int(m["artifact_id"]) for m in store.registry.models()}
    kept = {
        int(m["artifact_id"])
        for m in store.scoped(None).registry.models()
        if m["pipeline"] != store.pipeline or int(m["version"]) not in plan.collect
    }
    if not dry_run:
        report.released_bytes = store.artifacts.release(
            a for v, a in models.items() if v in plan.collect and a not in kept
        )
    log(
        report.describe()
        + (
            f" ({report.dropped_vectors} stored vectors, {report.released_bytes} bytes of weights)"
            if not dry_run
            else ""
        )
    )
    return report
