"""retrain policy: drift_signals (per embedded landing batch: embedding shift, OOV rate, the running centroid)
and retrain_requests (alert or manual requests the corpus sensor consumes once)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "drift_signals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False, server_default="demo"),
        sa.Column("model_version", sa.Integer(), nullable=False),
        sa.Column("corpus_revision", sa.Integer(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("embedding_shift", sa.Float(), nullable=True),
        sa.Column("oov_rate", sa.Float(), nullable=True),
        sa.Column("centroid_sum", sa.LargeBinary(), nullable=False),
        sa.Column("centroid_count", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["model_version"], ["model_versions.version"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_drift_signals_pipeline_revision", "drift_signals", ["pipeline", "corpus_revision"])
    op.create_index("ix_drift_signals_pipeline_model", "drift_signals", ["pipeline", "model_version"])
    op.create_table(
        "retrain_requests",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False, server_default="demo"),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.String(length=128), nullable=True),
        sa.Column("corpus_revision", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_key", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("handled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_retrain_requests_pipeline_status", "retrain_requests", ["pipeline", "status"])


def downgrade() -> None:
    op.drop_index("ix_retrain_requests_pipeline_status", table_name="retrain_requests")
    op.drop_table("retrain_requests")
    op.drop_index("ix_drift_signals_pipeline_model", table_name="drift_signals")
    op.drop_index("ix_drift_signals_pipeline_revision", table_name="drift_signals")
    op.drop_table("drift_signals")
