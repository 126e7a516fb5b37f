"""query_records.shared_prefix (how many leading ranks the two rankings of an interleaved request shared: clicks
there credit neither team) and an index on rollout_id over rollout requests only, for a rollout's online evidence

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05 07:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

IN_ROLLOUT = sa.text("rollout_id IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("query_records") as batch:
        batch.add_column(sa.Column("shared_prefix", sa.Integer(), nullable=True))
    op.create_index(
        "ix_query_records_rollout",
        "query_records",
        ["rollout_id"],
        sqlite_where=IN_ROLLOUT,
        postgresql_where=IN_ROLLOUT,
    )


def downgrade() -> None:
    op.drop_index("ix_query_records_rollout", table_name="query_records")
    with op.batch_alter_table("query_records") as batch:
        batch.drop_column("shared_prefix")
