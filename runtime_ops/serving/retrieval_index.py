"""The work of `retrieval_index`: bring the production model's index in step, optimize it, move the serving alias
to it through its one fenced writer (`serving/index_swap.py`), then collect old versions (the asset is defined in
`serving/assets.py`)."""

import time
from typing import Any

import dagster as dg

from runtime_ops.labels import version_label
from runtime_ops.locks.base import Locker
from runtime_ops.pipeline.spec import RetentionSpec
from runtime_ops.policies.retention import RetentionPolicy
from runtime_ops.serving.document_embeddings import production_version
from runtime_ops.serving.index_swap import move_retrieval_index
from runtime_ops.serving.retention import collect
from runtime_ops.store import StateStore
from runtime_ops.store.serving.indexes import Indexes
from runtime_ops.vectors.base import IndexName, VectorStore


def index_corpus(
    context: dg.AssetExecutionContext,
    store: StateStore,
    vectors: VectorStore,
    retention: RetentionSpec,
    locker: Locker,
) -> dg.MaterializeResult:
    # numpy: kept out of the code location's load
    from runtime_ops.serving.vector_index import ensure_index

    # Read without the lock: building the index takes minutes. The writer reads production again under the lock
    # and stands down if a promotion, rollback or compensation moved it meanwhile (the winner serves its own).
    version = production_version(store.registry)
    state = ensure_index(store, vectors, version, log=context.log.info, run_id=context.run_id)
    # Syncs append small fragments (LanceDB) or leave statistics stale (pgvector): fold them into the ANN structure
    # once per serving pass, off the path that makes new documents searchable.
    started = time.monotonic()
    assert store.pipeline is not None
    vectors.open(IndexName(store.pipeline, version), _index_dim(store.indexes, vectors, version)).optimize()
    optimize_s = time.monotonic() - started
    move = move_retrieval_index(
        store.registry,
        store.indexes,
        locker,
        state.index_id,
        actor=f"run:{context.run_id}",
        run_id=context.run_id,
        log=context.log.info,
    )
    # What old versions left behind (indexes, stored vectors), beyond production, its rollback target, the
    # candidate and the newest few: collected here, after each change of the serving index.
    policy = RetentionPolicy(keep_recent=retention.keep_recent, keep_previous=retention.keep_previous)
    report = collect(store, vectors, policy, log=context.log.info)
    # The materialization says what serves now: after a stand-down, what the winner put there (or nothing).
    served: dict[str, Any] = {"model_version": version, "n_chunks": state.n_chunks, "synced_seq": state.synced_seq}
    meta: dict[str, Any] = {}
    if move.stood_down:
        served = store.indexes.current_index() or {"model_version": move.production, "n_chunks": 0, "synced_seq": 0}
        meta = {"stood_down": move.message, "built_index_id": dg.MetadataValue.int(state.index_id)}
    return dg.MaterializeResult(
        metadata={
            "index_id": dg.MetadataValue.int(move.serving or 0),
            "previous_index_id": dg.MetadataValue.int(move.previous or 0),
            "model_version": dg.MetadataValue.int(served["model_version"] or 0),
            "chunks": dg.MetadataValue.int(served["n_chunks"] or 0),
            "change_seq": dg.MetadataValue.int(served["synced_seq"] or 0),
            "fence": dg.MetadataValue.int(move.fence),
            "vector_store": vectors.describe(),
            "optimize_s": dg.MetadataValue.float(round(optimize_s, 3)),
            **meta,
            "retention/kept": ", ".join(f"v{v} ({why})" for v, why in sorted(report.plan.reasons.items())),
            "retention/collected_versions": ", ".join(f"v{v}" for v in report.plan.collect) or "none",
            "retention/dropped_indexes": dg.MetadataValue.int(len(report.dropped_indexes)),
            "retention/dropped_vectors": dg.MetadataValue.int(report.dropped_vectors),
            "retention/released_bytes": dg.MetadataValue.int(report.released_bytes),
        },
        data_version=dg.DataVersion(
            f"{version_label(served['model_version'])}-i{move.serving or 0}-s{served['synced_seq']}"
        ),
    )


def _index_dim(indexes: Indexes, vectors: VectorStore, version: int) -> int:
    row = indexes.index_for(version, vectors.kind, vectors.describe())
    assert row is not None and row["dim"], f"model v{version} has no index in {vectors.describe()}"
    return int(row["dim"])
