"""The corpus: landing batches, the document ledger, chunking profiles, chunks and their embeddings, and the change
feed vector indexes replay."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
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
