"""metric_series: durable counters and histograms written by run workers, read by the ops API's /metrics;
approval_requests.trace_context: the W3C traceparent of the span that opened the request, so the decision's
span can link to it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_series",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("labels", sa.String(length=512), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("sum", sa.Float(), nullable=False),
        sa.Column("buckets", sa.JSON(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", "labels"),
    )
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("trace_context", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("trace_context")
    op.drop_table("metric_series")
