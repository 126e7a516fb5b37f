"""query_records.key_id: the API key that made each search/answer request, so that feedback on it is accepted only
from that key and a rollout's evidence can tell how much of it one key contributed

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-08 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no batch copy): SQLite adds a nullable column in place and keeps the partial index as is.
    # Rows logged before it have no key: feedback on them is refused (nobody can show they made them).
    op.add_column("query_records", sa.Column("key_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    op.drop_column("query_records", "key_id")
