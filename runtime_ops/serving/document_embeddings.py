"""The work of `document_embeddings`: embed the corpus with the production model, in step with the corpus change
feed, and record the drift signals of new chunks (the asset is defined in `serving/assets.py`)."""

import time
from typing import Any

import dagster as dg

from runtime_ops.embedders.registry import load_embedder
from runtime_ops.store import StateStore
from runtime_ops.store.registry.registry import Registry
from runtime_ops.tags import PRODUCTION_ALIAS
from runtime_ops.vectors.base import VectorStore


def production_version(registry: Registry) -> int:
    """The production model's version; a step that needs one fails when nothing was promoted yet."""
    version = registry.alias(PRODUCTION_ALIAS)
    if version is None:
        raise dg.Failure("no production model yet: promote one first (production_model)")
    return int(version)


def embed_corpus(context: dg.AssetExecutionContext, store: StateStore, vectors: VectorStore) -> dg.MaterializeResult:
    # numpy: kept out of the code location's load
    from runtime_ops.policies.drift import BatchDrift
    from runtime_ops.serving.indexing import record_drift
    from runtime_ops.serving.vector_index import ensure_index

    version = production_version(store.registry)
    started = time.monotonic()
    embedder = load_embedder(store.registry, store.artifacts, version)
    drift = BatchDrift(getattr(embedder, "knows_term", None))
    state = ensure_index(
        store, vectors, version, log=context.log.info, run_id=context.run_id, observe=drift.observe, embedder=embedder
    )
    # A fill recorded the model's centroid itself; a sync's new chunks are the drift signal of this batch.
    signal = (
        None
        if state.filled
        else record_drift(store.ledger, store.retraining, version, drift, first=False, run_id=context.run_id)
    )
    meta: dict[str, Any] = {}
    if signal is not None:  # what the corpus sensor's retrain policy reads (drift_signals)
        meta["drift/chunks"] = dg.MetadataValue.int(signal.chunks)
        meta["drift/corpus_revision"] = dg.MetadataValue.int(signal.corpus_revision)
        if signal.embedding_shift is not None:
            meta["drift/embedding_shift"] = dg.MetadataValue.float(round(signal.embedding_shift, 6))
        if signal.oov_rate is not None:
            meta["drift/oov_rate"] = dg.MetadataValue.float(round(signal.oov_rate, 6))
    return dg.MaterializeResult(
        metadata={
            "model_version": dg.MetadataValue.int(version),
            "index_id": dg.MetadataValue.int(state.index_id),
            "filled": state.filled,
            "embedded_now": dg.MetadataValue.int(state.embedded),
            "upserted": dg.MetadataValue.int(state.upserted),
            "removed": dg.MetadataValue.int(state.removed),
            "change_seq": dg.MetadataValue.int(state.synced_seq),
            "chunks": dg.MetadataValue.int(state.n_chunks),
            "vector_store": vectors.describe(),
            "duration_s": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
            **meta,
        }
    )
