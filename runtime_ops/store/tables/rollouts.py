"""Rollouts: a candidate meeting live traffic (shadow, interleave, canary) while it waits for a decision.

One row per rollout. At most one is active per pipeline, which the database enforces (a unique index over the
pipeline of active rows only), so two starters racing cannot both win. The shadow comparison is kept as running
sums on the row (count, overlap and the latency log-ratio with their squares): bounded whatever the traffic, enough
for means and normal intervals, and one UPDATE per sampled request off the response path.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Index, Integer, String, Table, Text, text

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata
from runtime_ops.store.tables.registry import model_ref

ACTIVE_WHERE = text("status = 'active'")

rollouts = Table(
    "rollouts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("approval_id", String(64), ForeignKey("approval_requests.id")),  # the request it runs beside
    Column("candidate_version", Integer, nullable=False),
    Column("candidate_index_id", Integer, ForeignKey("retrieval_indexes.id"), nullable=False),
    Column("production_version", Integer, nullable=False),  # production when it started
    Column("mode", String(16), nullable=False),  # shadow | interleave | canary
    Column("share", Float, nullable=False),
    Column("stage", Integer),  # index into the pipeline's ramp (None: not ramping)
    Column("status", String(16), nullable=False),  # active | stopped | completed | rolled_back
    Column("reason", Text),  # why it ended
    Column("started_at", UTCDateTime(), nullable=False),
    Column("ends_at", UTCDateTime(), nullable=False),  # started_at + max_duration
    Column("ended_at", UTCDateTime()),
    Column("actor", String(255), nullable=False),
    Column("shadow_queries", Integer, nullable=False, server_default="0"),
    Column("shadow_overlap_sum", Float, nullable=False, server_default="0"),
    Column("shadow_overlap_sq_sum", Float, nullable=False, server_default="0"),
    Column("shadow_log_latency_ratio_sum", Float, nullable=False, server_default="0"),
    Column("shadow_log_latency_ratio_sq_sum", Float, nullable=False, server_default="0"),
    Index(
        "uq_rollouts_one_active",
        "pipeline",
        unique=True,
        sqlite_where=ACTIVE_WHERE,
        postgresql_where=ACTIVE_WHERE,
    ),
    Index("ix_rollouts_pipeline_started", "pipeline", "started_at"),
    model_ref("rollouts", "candidate_version"),
)
