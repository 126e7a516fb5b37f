"""audit record key id: audit_log.key_id names the key that MACed each record (chain.key_id, public), so
`audit verify` tells a wrong key from a forged record; records written before have none (verify then judges by
the MAC alone)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("key_id", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("key_id")
