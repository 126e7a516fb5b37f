"""operator keys: api_keys.approver maps a key to the approver id it decides as (the CLI's and the API's
authenticated identity for approvals); keys without one cannot decide

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 13:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("approver", sa.String(length=256), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("approver")
