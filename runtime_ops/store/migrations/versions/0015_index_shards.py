"""index shards: the shards of a vector index filled by a backfill (planned, filled, by which run)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 21:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "index_shards",
        sa.Column("index_id", sa.Integer(), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("shard_count", sa.Integer(), nullable=False),
        sa.Column("planned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("filled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("chunks", sa.Integer(), nullable=True),
        sa.Column("centroid_sum", sa.LargeBinary(), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["index_id"], ["retrieval_indexes.id"]),
        sa.PrimaryKeyConstraint("index_id", "shard"),
    )


def downgrade() -> None:
    op.drop_table("index_shards")
