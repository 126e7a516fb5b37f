"""Serving: vector indexes (one per model version and vector store), their shards, and the answers served."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, Integer, LargeBinary, String, Table, Text

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata
from runtime_ops.store.tables.registry import model_ref

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
