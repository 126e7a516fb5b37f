"""The candidate lifecycle: one row per model-promotion request (a candidate digest), holding the state of the pure
machine in `runtime_ops/lifecycle/machine.py`. Its one writer is `store/approvals/lifecycle.py`; every other
writer that ends or moves a candidate (a decision, an expiry, a ramp stage, the promotion, a rollback) asks it, in
its own transaction.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, ForeignKey, Index, Integer, String, Table, Text, false

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata

candidate_lifecycle = Table(
    "candidate_lifecycle",
    metadata,
    Column("approval_id", String(64), ForeignKey("approval_requests.id"), primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("candidate_version", Integer, nullable=False),
    # pending | approved | ramping | promoting | promoted | rejected | expired | superseded | rolled_back | halted
    Column("state", String(16), nullable=False),
    Column("stage", Integer),  # the ramp stage while ramping (0-based)
    Column("skip_ramp", Boolean, nullable=False, server_default=false()),  # a person said so, audited
    Column("reason", Text),  # why it is where it is
    Column("actor", String(256), nullable=False),  # who asked for the last transition
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Index("ix_candidate_lifecycle_pipeline_state", "pipeline", "state"),
)
