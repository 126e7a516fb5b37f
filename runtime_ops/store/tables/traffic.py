"""Live traffic: the query log (one row per search/answer request, with the items it showed) and the feedback
callers send on those items. Shown items and feedback hang off their request's row and are reached through it."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from runtime_ops.store.tables.base import UTCDateTime, metadata

query_records = Table(
    "query_records",
    metadata,
    Column("request_id", String(32), primary_key=True),  # q_ + 26 characters (runtime_ops.online.request_ids)
    Column("pipeline", String(64), nullable=False),
    Column("route", String(16), nullable=False),
    Column("arm", String(16), nullable=False),
    Column("session_hash", String(64)),
    Column("query_text", Text),
    Column("query_hash", String(64)),
    Column("k", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("latency_ms", Float, nullable=False),
    Column("n_results", Integer, nullable=False),
    Column("production_version", Integer, nullable=False),
    Column("production_index", Integer, nullable=False),
    Column("candidate_version", Integer),
    Column("candidate_index", Integer),
    Column("rollout_id", String(64)),
    Index("ix_query_records_pipeline_created", "pipeline", "created_at"),
    Index("ix_query_records_created", "created_at"),  # retention deletes by age across pipelines
)

shown_items = Table(
    "shown_items",
    metadata,
    Column("request_id", String(32), ForeignKey("query_records.request_id"), primary_key=True),
    Column("rank", Integer, primary_key=True),
    Column("chunk_id", BigInteger, nullable=False),
    Column("document_id", Integer, nullable=False),
    Column("document_key", String(1024), nullable=False),
    Column("team", String(16)),
)

feedback = Table(
    "feedback",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", String(32), ForeignKey("query_records.request_id"), nullable=False),
    Column("chunk_id", BigInteger, nullable=False),
    Column("signal", String(16), nullable=False),
    Column("value", Float),
    Column("key_id", String(32), nullable=False),  # the API key that sent it
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("request_id", "chunk_id", "signal", name="uq_feedback_request_id_chunk_id_signal"),
)
