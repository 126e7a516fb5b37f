"""inference_results: an item's model output stored once per (pipeline, item, input digest, model), so a retried run
calls the endpoint only for the items without a result

Revision ID: 0023
Revises: 0021 (after merging i28-gate: 0022, its approval_requests generalization)
Create Date: 2026-12-05 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inference_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pipeline", sa.String(length=64), server_default="demo", nullable=False),
        sa.Column("item_id", sa.String(length=255), nullable=False),
        sa.Column("input_digest", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("output", sa.Text(), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("pipeline", "item_id", "input_digest", "model", name="uq_inference_results_item"),
    )
    op.create_index("ix_inference_results_pipeline_created", "inference_results", ["pipeline", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_inference_results_pipeline_created", table_name="inference_results")
    op.drop_table("inference_results")
