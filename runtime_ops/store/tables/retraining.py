"""What the retrain policy reads: drift signals of embedded landing batches and pending retrain requests."""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, LargeBinary, String, Table, Text

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata
from runtime_ops.store.tables.corpus import model_ref

# One row per embedding pass of document_embeddings that embedded new chunks with the production model: how far
# those chunks moved from the corpus centroid and how many of their tokens the model does not know. The running
# centroid of that model version (sum of its vectors, little-endian float64, and their count) after the batch is
# kept on the row, so the next batch compares against it without reading every vector back.
drift_signals = Table(
    "drift_signals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("model_version", Integer, nullable=False),
    Column("corpus_revision", Integer, nullable=False),  # the corpus revision the batch was embedded at
    Column("chunks", Integer, nullable=False),
    Column("embedding_shift", Float),  # NULL: nothing to compare against (the model's first embedded chunks)
    Column("oov_rate", Float),
    Column("centroid_sum", LargeBinary, nullable=False),
    Column("centroid_count", Integer, nullable=False),
    Column("run_id", String(64)),
    Column("created_at", UTCDateTime(), nullable=False),
    Index("ix_drift_signals_pipeline_revision", "pipeline", "corpus_revision"),
    Index("ix_drift_signals_pipeline_model", "pipeline", "model_version"),
    model_ref("drift_signals", "model_version"),
)

# A request to retrain (an alert's or a person's) that the corpus sensor consumes once: `pending` until the
# sensor requests its run (status `requested`, with that run key).
retrain_requests = Table(
    "retrain_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("source", String(16), nullable=False),  # alert | manual
    Column("reason", Text, nullable=False),
    Column("requested_by", String(128)),
    Column("corpus_revision", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # pending | requested
    Column("run_key", String(255)),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("handled_at", UTCDateTime()),
    Index("ix_retrain_requests_pipeline_status", "pipeline", "status"),
)
