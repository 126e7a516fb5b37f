"""query log: query_records (one per /api/search or /api/answer request: arm, model versions and indexes, the
query's text and/or hash as the pipeline declares, a keyed session hash, and the ranked items it showed as one JSON
list, with their team when interleaved) and feedback (one per request, chunk and signal)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "query_records",
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("route", sa.String(length=16), nullable=False),
        sa.Column("arm", sa.String(length=16), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=True),
        sa.Column("query_text", sa.Text(), nullable=True),
        sa.Column("query_hash", sa.String(length=64), nullable=True),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("n_results", sa.Integer(), nullable=False),
        sa.Column("production_version", sa.Integer(), nullable=True),
        sa.Column("production_index", sa.Integer(), nullable=True),
        sa.Column("candidate_version", sa.Integer(), nullable=True),
        sa.Column("candidate_index", sa.Integer(), nullable=True),
        sa.Column("rollout_id", sa.Integer(), nullable=True),
        sa.Column("items", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("request_id"),
    )
    op.create_index("ix_query_records_pipeline_created", "query_records", ["pipeline", "created_at"])
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("request_id", sa.String(length=32), nullable=False),
        sa.Column("chunk_id", sa.BigInteger(), nullable=False),
        sa.Column("signal", sa.String(length=16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["query_records.request_id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("request_id", "chunk_id", "signal", name="uq_feedback_request_id_chunk_id_signal"),
    )


def downgrade() -> None:
    op.drop_table("feedback")
    op.drop_index("ix_query_records_pipeline_created", table_name="query_records")
    op.drop_table("query_records")
