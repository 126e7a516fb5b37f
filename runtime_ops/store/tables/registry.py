"""The model registry: content-addressed artifacts, model versions (and `model_ref`, the foreign key to one of a
pipeline's own), evaluation reports, aliases and their history."""

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
