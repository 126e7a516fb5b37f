"""candidate_lifecycle: a model candidate's state (pending, approved, ramping, promoting, promoted or its end), one
row per promotion request, written by one repository in the transaction of the event that moves it

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 21:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "candidate_lifecycle",
        sa.Column("approval_id", sa.String(length=64), nullable=False),
        sa.Column("pipeline", sa.String(length=64), server_default="demo", nullable=False),
        sa.Column("candidate_version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=True),
        sa.Column("skip_ramp", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["approval_id"], ["approval_requests.id"]),
        sa.PrimaryKeyConstraint("approval_id"),
    )
    op.create_index("ix_candidate_lifecycle_pipeline_state", "candidate_lifecycle", ["pipeline", "state"])


def downgrade() -> None:
    op.drop_index("ix_candidate_lifecycle_pipeline_state", table_name="candidate_lifecycle")
    op.drop_table("candidate_lifecycle")
