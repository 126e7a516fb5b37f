"""alerts: the Alertmanager alert inbox and what the alert sensor did about each alert

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("alertname", sa.String(length=256), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("generator_url", sa.Text(), nullable=True),
        sa.Column("receiver", sa.String(length=256), nullable=True),
        sa.Column("group_key", sa.Text(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rule", sa.String(length=128), nullable=True),
        sa.Column("action", sa.String(length=16), nullable=True),
        sa.Column("action_status", sa.String(length=32), nullable=True),
        sa.Column("action_detail", sa.Text(), nullable=True),
        sa.Column("action_params", sa.JSON(), nullable=True),
        sa.Column("run_key", sa.String(length=255), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("approval_id", sa.String(length=64), nullable=True),
        sa.Column("handled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_fingerprint_starts_at"),
    )
    op.create_index("ix_alerts_status", "alerts", ["status"])
    op.create_index("ix_alerts_action_status", "alerts", ["action_status"])
    op.create_index("ix_alerts_rule", "alerts", ["rule"])


def downgrade() -> None:
    op.drop_index("ix_alerts_rule", table_name="alerts")
    op.drop_index("ix_alerts_action_status", table_name="alerts")
    op.drop_index("ix_alerts_status", table_name="alerts")
    op.drop_table("alerts")
