"""Landing batches, the document ledger, chunks, artifacts, the model registry and aliases, evaluation reports,
embeddings, retrieval indexes and answers."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata

# One row per sensor tick that found new objects: the unit Dagster partitions by.
landing_batches = Table(
    "landing_batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("seq", Integer, nullable=False),
    Column("source", String(1024), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("n_objects", Integer, nullable=False),
    # pending -> launched (a run exists) -> ingested | failed
    Column("status", String(16), nullable=False),
    Column("run_id", String(64)),
    Column("ingested_at", UTCDateTime()),
    UniqueConstraint("pipeline", "seq", name="uq_landing_batches_pipeline_seq"),
)

# The document ledger: one row per (key, version). Each version is processed once.
documents = Table(
    "documents",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("key", String(1024), nullable=False),
    Column("version", String(256), nullable=False),
    Column("batch_id", String(64), ForeignKey("landing_batches.id"), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("last_modified", UTCDateTime()),
    # pending -> ok | quarantined | duplicate ; ok -> superseded when a newer version is ingested
    Column("status", String(16), nullable=False),
    Column("reason", Text),
    Column("quarantine_code", String(32)),
    Column("content_hash", String(64)),
    Column("format", String(16)),
    Column("title", Text),
    Column("text", Text),
    Column("processed_at", UTCDateTime()),
    UniqueConstraint("pipeline", "key", "version", name="uq_documents_pipeline_key_version"),
    Index("ix_documents_batch", "batch_id"),
    Index("ix_documents_status_key", "status", "key"),
)

# How a corpus is cut for an embedder (`runtime_ops.pipeline.chunking`), by digest: shared by every pipeline, like
# artifacts. Profile 1 is the character chunking every chunk had before profiles existed (migration 0017).
chunking_profiles = Table(
    "chunking_profiles",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("digest", String(64), nullable=False, unique=True),
    Column("profile", JSON, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)

# A document's chunks under one chunking profile: a document has one set per profile in use (production's, a
# candidate's that cuts differently), so a candidate re-chunks without touching what production serves.
chunks = Table(
    "chunks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("document_id", Integer, ForeignKey("documents.id"), nullable=False),
    Column("ord", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("profile_id", Integer, ForeignKey("chunking_profiles.id"), nullable=False, server_default="1"),
    UniqueConstraint("document_id", "profile_id", "ord", name="uq_chunks_document_profile_ord"),
)

# Content-addressed blobs: trained models, retrieval indexes.
artifacts = Table(
    "artifacts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),
    Column("digest", String(64), nullable=False, unique=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)

# A model is (pipeline, version): versions count per pipeline (v1, v2, ... in each; migration 0017), so every row
# that names a model names its pipeline too and refers to both (`model_ref`).
model_versions = Table(
    "model_versions",
    metadata,
    Column("version", Integer, nullable=False, autoincrement=False),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("digest", String(64), nullable=False),
    Column("artifact_id", Integer, ForeignKey("artifacts.id"), nullable=False),
    Column("params", JSON, nullable=False),
    Column("n_documents", Integer, nullable=False),
    Column("n_chunks", Integer, nullable=False),
    Column("corpus_revision", Integer, nullable=False),
    Column("trained_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
    # The chunks the model reads: its embeddings, indexes and evaluations use this profile's chunks only.
    Column("chunking_profile_id", Integer, ForeignKey("chunking_profiles.id"), nullable=False, server_default="1"),
    PrimaryKeyConstraint("pipeline", "version", name="pk_model_versions"),
    UniqueConstraint("pipeline", "digest", name="uq_model_versions_pipeline_digest"),
)


def model_ref(table: str, column: str) -> ForeignKeyConstraint:
    """`table`'s (pipeline, `column`) names a model version of its own pipeline."""
    return ForeignKeyConstraint(
        ["pipeline", column],
        ["model_versions.pipeline", "model_versions.version"],
        name=f"fk_{table}_{column}_model",
    )


eval_reports = Table(
    "eval_reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("candidate_version", Integer, nullable=False),
    Column("production_version", Integer),
    Column("candidate_metrics", JSON, nullable=False),
    Column("production_metrics", JSON),
    Column("verdict", JSON, nullable=False),
    Column("markdown", Text, nullable=False),
    Column("report_digest", String(64), nullable=False),
    Column("candidate_digest", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
    Index("ix_eval_reports_candidate", "candidate_version"),
    model_ref("eval_reports", "candidate_version"),
    model_ref("eval_reports", "production_version"),
)

# Named pointers: `production` -> model version, `retrieval_index` -> index id. `fence` is the highest
# fencing token a write to the alias carried (issue 4's lock tokens); 0 means unfenced writes so far.
aliases = Table(
    "aliases",
    metadata,
    Column("pipeline", String(64), primary_key=True, server_default=DEFAULT_PIPELINE),
    Column("name", String(64), primary_key=True),
    Column("target", Integer, nullable=False),
    Column("fence", BigInteger, nullable=False, default=0),
    Column("updated_at", UTCDateTime(), nullable=False),
)

alias_history = Table(
    "alias_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("name", String(64), nullable=False),
    Column("old_target", Integer),
    Column("new_target", Integer),  # NULL: the alias was removed
    Column("approval_id", String(64)),
    Column("actor", String(256), nullable=False),
    Column("run_id", String(64)),
    Column("changed_at", UTCDateTime(), nullable=False),
)

# A chunk belongs to one pipeline (through its document), so `model_version` is a version of that pipeline. No
# foreign key to model_versions: the table has no pipeline column to make one with (migration 0017 dropped the one
# on the version alone), and adding it would copy every vector for a fact the chunk already holds.
chunk_embeddings = Table(
    "chunk_embeddings",
    metadata,
    Column("chunk_id", Integer, ForeignKey("chunks.id"), primary_key=True),
    Column("model_version", Integer, primary_key=True, autoincrement=False),
    Column("vector", LargeBinary, nullable=False),
)

# One row per vector index: the vectors of one model version in one vector store (backend + location), kept in
# step with the corpus through the change feed (`synced_seq`). Rows of backend `blob` are the whole-matrix
# artifacts of schema 0009 and earlier, kept so old answers keep their reference.
retrieval_indexes = Table(
    "retrieval_indexes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("model_version", Integer, nullable=False),
    Column("corpus_revision", Integer, nullable=False),
    Column("n_chunks", Integer, nullable=False),
    Column("artifact_id", Integer, ForeignKey("artifacts.id")),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
    Column("backend", String(16), nullable=False, server_default="blob"),
    Column("location", String(1024), nullable=False, server_default=""),
    Column("dim", Integer),
    Column("synced_seq", BigInteger, nullable=False, server_default="0"),
    Column("status", String(16), nullable=False, server_default="ready"),
    Column("updated_at", UTCDateTime()),
    Index("ix_retrieval_indexes_pipeline_version", "pipeline", "model_version"),
    model_ref("retrieval_indexes", "model_version"),
)

# The shards of an index filled by a backfill (one Dagster partition each): planned when the backfill starts, marked
# filled when the shard's chunks are embedded and upserted. An index with planned shards is complete only when every
# one is filled; its fill then replays the change feed and marks it ready.
index_shards = Table(
    "index_shards",
    metadata,
    Column("index_id", Integer, ForeignKey("retrieval_indexes.id"), primary_key=True),
    Column("shard", Integer, primary_key=True),
    Column("shard_count", Integer, nullable=False),
    Column("planned_at", UTCDateTime(), nullable=False),
    Column("filled_at", UTCDateTime()),
    Column("chunks", Integer),
    Column("centroid_sum", LargeBinary),  # the sum of the shard's vectors: the model's centroid, summed over shards
    Column("run_id", String(64)),
)

# The corpus change feed: a row per document that became current (`add`) or stopped being current (`remove`:
# superseded by a newer version, deleted at the landing). `seq` is per pipeline and follows commit order (it is
# taken from `change_counters` under a row lock held until the change commits), so an index that applied every
# change up to `seq` N never misses one below it. Indexes replay the feed from their `synced_seq`.
corpus_changes = Table(
    "corpus_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("seq", BigInteger, nullable=False),
    Column("document_id", Integer, ForeignKey("documents.id"), nullable=False),
    Column("op", String(8), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("pipeline", "seq", name="uq_corpus_changes_pipeline_seq"),
)

change_counters = Table(
    "change_counters",
    metadata,
    Column("pipeline", String(64), primary_key=True),
    Column("seq", BigInteger, nullable=False),
)

answers = Table(
    "answers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("question", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("sources", JSON, nullable=False),
    Column("index_id", Integer, ForeignKey("retrieval_indexes.id"), nullable=False),
    Column("answerer", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
)
