"""rollouts: a candidate meeting live traffic (shadow, interleave, canary), at most one active per pipeline

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05 04:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

ACTIVE = sa.text("status = 'active'")


def upgrade() -> None:
    op.create_table(
        "rollouts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pipeline", sa.String(length=64), server_default="demo", nullable=False),
        sa.Column("approval_id", sa.String(length=64), nullable=True),
        sa.Column("candidate_version", sa.Integer(), nullable=False),
        sa.Column("candidate_index_id", sa.Integer(), nullable=False),
        sa.Column("production_version", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("shadow_queries", sa.Integer(), server_default="0", nullable=False),
        sa.Column("shadow_overlap_sum", sa.Float(), server_default="0", nullable=False),
        sa.Column("shadow_overlap_sq_sum", sa.Float(), server_default="0", nullable=False),
        sa.Column("shadow_log_latency_ratio_sum", sa.Float(), server_default="0", nullable=False),
        sa.Column("shadow_log_latency_ratio_sq_sum", sa.Float(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["approval_id"], ["approval_requests.id"]),
        sa.ForeignKeyConstraint(["candidate_index_id"], ["retrieval_indexes.id"]),
        sa.ForeignKeyConstraint(
            ["pipeline", "candidate_version"],
            ["model_versions.pipeline", "model_versions.version"],
            name="fk_rollouts_candidate_version_model",
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    # The database, not only the code, keeps one active rollout per pipeline: a unique index over active rows.
    op.create_index(
        "uq_rollouts_one_active", "rollouts", ["pipeline"], unique=True, sqlite_where=ACTIVE, postgresql_where=ACTIVE
    )
    op.create_index("ix_rollouts_pipeline_started", "rollouts", ["pipeline", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_rollouts_pipeline_started", table_name="rollouts")
    op.drop_index("uq_rollouts_one_active", table_name="rollouts")
    op.drop_table("rollouts")
