"""locks: the state-store lock (used when REDIS_URL is unset)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # One row per lock name, never deleted: `fence` keeps counting up across acquisitions. `token` is NULL when
    # the lock is free; `expires_at_ms` is milliseconds since the Unix epoch on the database clock.
    op.create_table('locks',
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('token', sa.String(length=255), nullable=True),
    sa.Column('expires_at_ms', sa.BigInteger(), nullable=False),
    sa.Column('fence', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )


def downgrade() -> None:
    op.drop_table('locks')
