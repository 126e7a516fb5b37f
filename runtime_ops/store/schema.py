"""Tables of the state store (SQLAlchemy Core). Alembic migrations in `migrations/` create them.

Pipeline-owned tables carry `pipeline` (their uniqueness is per pipeline); chunks, embeddings, votes, the audit
log and link uses hang off owned rows and are reached through them; artifacts, locks, API keys and metric series
are process-wide (series carry a `pipeline` label)."""

from runtime_ops.store.tables.approvals import (
    approval_requests,
    approval_votes,
    audit_head,
    audit_log,
    interaction_deliveries,
    link_uses,
)
from runtime_ops.store.tables.base import UTCDateTime, metadata
from runtime_ops.store.tables.corpus import (
    change_counters,
    chunk_embeddings,
    chunking_profiles,
    chunks,
    corpus_changes,
    documents,
    landing_batches,
)
from runtime_ops.store.tables.inference import inference_results
from runtime_ops.store.tables.lifecycle import candidate_lifecycle
from runtime_ops.store.tables.operations import (
    alerts,
    api_keys,
    drift_signals,
    effects,
    locks,
    metric_series,
    retrain_requests,
    sagas,
)
from runtime_ops.store.tables.registry import (
    alias_history,
    aliases,
    artifacts,
    eval_reports,
    model_versions,
)
from runtime_ops.store.tables.rollouts import rollouts
from runtime_ops.store.tables.serving import answers, index_shards, retrieval_indexes
from runtime_ops.store.tables.traffic import feedback, query_records

__all__ = [
    "UTCDateTime",
    "alerts",
    "alias_history",
    "aliases",
    "answers",
    "api_keys",
    "approval_requests",
    "approval_votes",
    "artifacts",
    "audit_head",
    "audit_log",
    "candidate_lifecycle",
    "change_counters",
    "chunk_embeddings",
    "chunking_profiles",
    "chunks",
    "corpus_changes",
    "documents",
    "drift_signals",
    "effects",
    "eval_reports",
    "feedback",
    "index_shards",
    "inference_results",
    "interaction_deliveries",
    "landing_batches",
    "link_uses",
    "locks",
    "metadata",
    "metric_series",
    "model_versions",
    "query_records",
    "retrain_requests",
    "retrieval_indexes",
    "rollouts",
    "sagas",
]
