"""escalation tiers: approval_requests.escalation_tiers (each tier's approvers and deadline, fixed when the request
opens) and escalation_tier (how many have joined), so several tiers escalate in turn, each once

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 10:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("escalation_tiers", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("escalation_tier", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("escalation_tier")
        batch.drop_column("escalation_tiers")
